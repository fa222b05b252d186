// Sampler "frequency-penalty" (OpenAI / llama.cpp semantics): subtracts count * penalty from the
// logit of every token seen in the last `last_n` tokens, count being its occurrences there.
#include "penalty_window.hpp"

namespace {

using namespace glassbox;

void register_factories(Registrar& r) {
  r.add_sampler({"frequency-penalty", "logit - count * penalty, count = occurrences in the recent window",
                 {{"penalty", ParamType::Float, "0.0", "per occurrence; > 0 discourages, < 0 encourages repeats",
                   std::nullopt, std::nullopt},
                  samplers::last_n_spec()},
                 "penalty"},
                [](const Params& p, const PluginContext&) {
                  const auto pen = static_cast<float>(samplers::finite_param("frequency-penalty", p, "penalty"));
                  return samplers::make_penalty("frequency-penalty", p,
                                                [pen](Candidate& c, int count) { c.logit -= static_cast<float>(count) * pen; });
                });
}

}  // namespace

GLASSBOX_MODULE("frequency-penalty", "frequency penalty over a look-back window", register_factories)
