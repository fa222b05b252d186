// Sampler "dynamic-temperature" (entropy-based temperature, as llama.cpp's llama_sampler_init_temp_ext):
// the temperature moves within [T - range, T + range] with the distribution's normalised entropy,
// T_dyn = T_min + (T_max - T_min) · (H / ln n)^exponent: a confident step is sharpened, an unsure one
// flattened. range = 0 is a plain temperature T.
#include "stage.hpp"

namespace {

using namespace glassbox;

class DynamicTemperature final : public samplers::Stage {
 public:
  DynamicTemperature(Params p, double t, double range, double exponent)
      : Stage("dynamic-temperature", std::move(p)),
        t_(static_cast<float>(t)),
        range_(static_cast<float>(range)),
        exponent_(static_cast<float>(exponent)) {}

  void apply(Candidates& c, Rng&) override {
    float t = t_;
    if (range_ > 0) {
      if (c.data.size() <= 1) return;  // one candidate: nothing to scale
      const float t_min = std::max(0.0f, t_ - range_), t_max = t_ + range_;
      // Entropy of the current candidates against its largest possible value, ln n (in float, as
      // llama.cpp computes it).
      const float max_entropy = -std::log(1.0f / static_cast<float>(c.data.size()));
      c.normalize();
      float h = 0.0f;
      for (const auto& x : c.data)
        if (x.prob > 0.0f) h -= x.prob * std::log(x.prob);
      t = t_min + (t_max - t_min) * std::pow(h / max_entropy, exponent_);
    }
    scale(c, t);
  }

  std::string noop_reason() const override {
    // range 0 is a plain temperature T: a no-op only at T = 1 (the defaults).
    if (range_ <= 0.0f && t_ == 1.0f)
      return "range = 0 and temperature = 1 (its defaults) scale nothing; e.g. dynamic-temperature:temperature=1;range=0.5 turns it on";
    return {};
  }

 private:
  // The temperature stage's rule: T <= 0 keeps only the argmax, otherwise logits / T.
  static void scale(Candidates& c, float t) {
    if (t <= 0.0f) {
      const Candidate best = c.data[c.argmax()];
      c.data.assign(1, best);
      c.sorted = true;
      return;
    }
    for (auto& x : c.data) x.logit /= t;
    c.sorted = false;  // rounding may tie two close logits, whose order is then by id
  }
  float t_, range_, exponent_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"dynamic-temperature", "temperature in [T - range, T + range] from the normalised entropy (llama.cpp's temp-ext)",
                 {{"temperature", ParamType::Float, "1.0", "the centre T >= 0", 0.0, std::nullopt},
                  {"range", ParamType::Float, "0.0", "delta >= 0: T moves within [max(0, T - delta), T + delta]; 0 = plain temperature",
                   0.0, std::nullopt},
                  {"exponent", ParamType::Float, "1.0", "exponent >= 0 on the normalised entropy; > 1 keeps T low longer", 0.0,
                   std::nullopt}},
                 "temperature"},
                [](const Params& p, const PluginContext&) {
                  const double t = samplers::finite_param("dynamic-temperature", p, "temperature");
                  const double d = samplers::finite_param("dynamic-temperature", p, "range");
                  const double e = samplers::finite_param("dynamic-temperature", p, "exponent");
                  if (t < 0) throw samplers::invalid("dynamic-temperature", "temperature", t, "is negative (expected T >= 0)");
                  if (d < 0) throw samplers::invalid("dynamic-temperature", "range", d, "is negative (expected range >= 0)");
                  if (e < 0) throw samplers::invalid("dynamic-temperature", "exponent", e, "is negative (expected exponent >= 0)");
                  return std::make_unique<DynamicTemperature>(p, t, d, e);
                });
}

}  // namespace

GLASSBOX_MODULE("dynamic-temperature", "entropy-based dynamic temperature", register_factories)
