// Sampler "top-p" (nucleus): keeps the smallest most-likely prefix whose probability mass is >= p.
#include "stage.hpp"

namespace {

using namespace glassbox;

class TopP final : public samplers::Stage {
 public:
  TopP(Params p, double v) : Stage("top-p", std::move(p)), p_(v) {}
  void apply(Candidates& c, Rng&) override {
    if (p_ >= 1.0) return;  // the whole distribution is the smallest set with mass >= 1
    c.normalize();
    // Quickselect on the mass finds the boundary in expected O(n); only the kept set is sorted.
    c.keep_mass_prefix(p_);
    c.sorted = true;
  }

 private:
  double p_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"top-p", "nucleus: keep the smallest set of most likely tokens whose mass reaches p",
                 {{"p", ParamType::Float, "0.95", "0 < p <= 1; 1 keeps every token", 0.0, 1.0}},
                 "p"},
                [](const Params& p, const PluginContext&) {
                  const double v = samplers::finite_param("top-p", p, "p");
                  if (!(v > 0 && v <= 1)) throw samplers::invalid("top-p", "p", v, "is outside (0, 1]");
                  return std::make_unique<TopP>(p, v);
                });
}

}  // namespace

GLASSBOX_MODULE("top-p", "nucleus (top-p) truncation", register_factories)
