// Sampler "presence-penalty" (OpenAI / llama.cpp semantics): subtracts a constant once from the
// logit of every token seen in the last `last_n` tokens.
#include "penalty_window.hpp"

namespace {

using namespace glassbox;

void register_factories(Registrar& r) {
  r.add_sampler({"presence-penalty", "logit - penalty for every token seen recently (once, whatever the count)",
                 {{"penalty", ParamType::Float, "0.0", "subtracted once; > 0 discourages, < 0 encourages repeats",
                   std::nullopt, std::nullopt},
                  samplers::last_n_spec()},
                 "penalty"},
                [](const Params& p, const PluginContext&) {
                  const auto pen = static_cast<float>(samplers::finite_param("presence-penalty", p, "penalty"));
                  return samplers::make_penalty("presence-penalty", p, [pen](Candidate& c, int) { c.logit -= pen; });
                });
}

}  // namespace

GLASSBOX_MODULE("presence-penalty", "presence penalty over a look-back window", register_factories)
