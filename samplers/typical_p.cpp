// Sampler "typical-p": locally typical sampling (Meister et al. 2022). Keeps the tokens whose
// surprise -log p is closest to the distribution's entropy H, until their mass reaches p.
#include <glassbox/mass_select.hpp>

#include "stage.hpp"

namespace {

using namespace glassbox;

class TypicalP final : public samplers::Stage {
 public:
  TypicalP(Params p, double v) : Stage("typical-p", std::move(p)), p_(v) {}
  void apply(Candidates& c, Rng&) override {
    if (p_ >= 1.0 || c.data.size() <= 1) return;
    c.normalize();
    float mx = c.data.front().logit;
    for (const auto& x : c.data) mx = std::max(mx, x.logit);
    double sum = 0, h = 0;
    for (const auto& x : c.data) {
      sum += std::exp(static_cast<double>(x.logit) - mx);
      if (x.prob > 0) h -= static_cast<double>(x.prob) * std::log(static_cast<double>(x.prob));
    }
    // -log p_i = (max + log sum) - logit_i, so |-log p_i - H| = |c0 - logit_i| with
    // c0 = max + log sum - H: the order needs no per-token logarithm.
    const double c0 = mx + std::log(sum) - h;
    auto dev = [c0](const Candidate& x) { return std::isinf(x.logit) ? INFINITY : std::fabs(c0 - x.logit); };
    keep_mass_prefix(c, p_, [&](const Candidate& a, const Candidate& b) {
      const double da = dev(a), db = dev(b);
      return da < db || (da == db && a.id < b.id);
    });
    c.sorted = c.data.size() <= 1;  // kept in order of typicality, not of probability
  }

 private:
  double p_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"typical-p", "locally typical: keep tokens whose surprise is closest to the entropy, up to mass p",
                 {{"p", ParamType::Float, "0.95", "0 < p <= 1; 1 keeps every token", 0.0, 1.0}},
                 "p"},
                [](const Params& p, const PluginContext&) {
                  const double v = samplers::finite_param("typical-p", p, "p");
                  if (!(v > 0 && v <= 1)) throw samplers::invalid("typical-p", "p", v, "is outside (0, 1]");
                  return std::make_unique<TypicalP>(p, v);
                });
}

}  // namespace

GLASSBOX_MODULE("typical-p", "locally typical sampling", register_factories)
