// Sampler "repetition-penalty" (CTRL, Keskar et al. 2019; llama.cpp semantics): for each token
// seen in the last `last_n` tokens, a positive logit is divided by the penalty and a negative
// one multiplied by it, once, however often the token occurred.
#include "penalty_window.hpp"

namespace {

using namespace glassbox;

void register_factories(Registrar& r) {
  r.add_sampler({"repetition-penalty", "logit / penalty (if > 0) or * penalty (if < 0) for tokens seen recently",
                 {{"penalty", ParamType::Float, "1.1", "penalty > 0; 1 = off, > 1 discourages repeats", 0.0, std::nullopt},
                  samplers::last_n_spec()},
                 "penalty"},
                [](const Params& p, const PluginContext&) {
                  const double v = samplers::finite_param("repetition-penalty", p, "penalty");
                  if (!(v > 0)) throw samplers::invalid("repetition-penalty", "penalty", v, "is not positive (expected penalty > 0)");
                  const auto pen = static_cast<float>(v);
                  return samplers::make_penalty("repetition-penalty", p, [pen](Candidate& c, int) {
                    c.logit = c.logit > 0 ? c.logit / pen : c.logit * pen;
                  });
                });
}

}  // namespace

GLASSBOX_MODULE("repetition-penalty", "repetition penalty over a look-back window", register_factories)
