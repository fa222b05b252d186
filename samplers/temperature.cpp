// Sampler "temperature": p_i = softmax(logit_i / T). T < 1 sharpens, T > 1 flattens, T = 0 is greedy.
#include "stage.hpp"

namespace {

using namespace glassbox;

class Temperature final : public samplers::Stage {
 public:
  Temperature(Params p, double t) : Stage("temperature", std::move(p)), t_(static_cast<float>(t)) {}
  void apply(Candidates& c, Rng&) override {
    if (t_ == 0.0f) {
      // The limit T -> 0: all mass on the argmax (ties to the lower id). The final draw then
      // has a single candidate, so the chain is greedy.
      const Candidate best = c.data[c.argmax()];
      c.data.assign(1, best);
      c.sorted = true;
      return;
    }
    const float inv = 1.0f / t_;
    for (auto& x : c.data) x.logit *= inv;
    // A positive scale keeps the order, except that rounding may make two close logits equal,
    // whose canonical order is then by id: re-check rather than assume.
    if (c.sorted)
      for (std::size_t i = 1; i < c.data.size() && c.sorted; ++i)
        if (Candidates::before(c.data[i], c.data[i - 1])) c.sorted = false;
  }

 private:
  float t_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"temperature", "divide the logits by T: softmax(logits / T); T = 0 is greedy",
                 {{"temperature", ParamType::Float, "1.0", "T >= 0; < 1 sharpens, > 1 flattens, 0 keeps only the argmax",
                   0.0, std::nullopt}},
                 "temperature"},
                [](const Params& p, const PluginContext&) {
                  const double t = samplers::finite_param("temperature", p, "temperature");
                  if (t < 0) throw samplers::invalid("temperature", "temperature", t, "is negative (expected T >= 0)");
                  return std::make_unique<Temperature>(p, t);
                });
}

}  // namespace

GLASSBOX_MODULE("temperature", "temperature scaling", register_factories)
