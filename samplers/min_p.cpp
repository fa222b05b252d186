// Sampler "min-p": keeps the candidates whose probability is at least min_p times the top one's.
#include "stage.hpp"

namespace {

using namespace glassbox;

class MinP final : public samplers::Stage {
 public:
  MinP(Params p, double v) : Stage("min-p", std::move(p)), log_p_(std::log(v)) {}
  void apply(Candidates& c, Rng&) override {
    // p_i >= min_p * p_max  <=>  logit_i - logit_max >= log(min_p): no softmax, no sort.
    float mx = c.data.front().logit;
    for (const auto& x : c.data) mx = std::max(mx, x.logit);
    const double cut = log_p_ - 1e-6;  // relative tolerance 1e-6 for float rounding
    // remove_if keeps the survivors' relative order, so a sorted array stays sorted.
    c.data.erase(std::remove_if(c.data.begin(), c.data.end(),
                                [&](const Candidate& x) { return !(static_cast<double>(x.logit) - mx >= cut); }),
                 c.data.end());
  }

 private:
  double log_p_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"min-p", "keep tokens with p >= min_p * p_max",
                 {{"p", ParamType::Float, "0.05", "0 <= min_p <= 1; 0 keeps every token", 0.0, 1.0}},
                 "p"},
                [](const Params& p, const PluginContext&) {
                  const double v = samplers::finite_param("min-p", p, "p");
                  if (!(v >= 0 && v <= 1)) throw samplers::invalid("min-p", "p", v, "is outside [0, 1]");
                  return std::make_unique<MinP>(p, v);
                });
}

}  // namespace

GLASSBOX_MODULE("min-p", "min-p truncation", register_factories)
