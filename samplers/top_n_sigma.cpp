// Sampler "top-n-sigma" (Tang et al. 2024): keeps the tokens whose logit is within n standard
// deviations of the largest: logit_i >= max - n * sigma, sigma over the candidates' logits.
#include "stage.hpp"

namespace {

using namespace glassbox;

class TopNSigma final : public samplers::Stage {
 public:
  TopNSigma(Params p, double n) : Stage("top-n-sigma", std::move(p)), n_(n) {}
  void apply(Candidates& c, Rng&) override {
    // Population mean and standard deviation of the finite logits (-inf ones are banned tokens).
    double mx = -INFINITY, s = 0, s2 = 0;
    std::size_t m = 0;
    for (const auto& x : c.data) {
      if (!std::isfinite(x.logit)) continue;
      mx = std::max(mx, static_cast<double>(x.logit));
      s += x.logit;
      ++m;
    }
    if (m == 0) return;
    const double mean = s / m;
    for (const auto& x : c.data)
      if (std::isfinite(x.logit)) s2 += (x.logit - mean) * (x.logit - mean);
    const double sigma = std::sqrt(s2 / m);
    const double cut = mx - n_ * sigma;
    // The threshold depends on the logits' spread only, so it is the same before and after a
    // temperature stage (which scales max and sigma alike).
    c.data.erase(std::remove_if(c.data.begin(), c.data.end(),
                                [&](const Candidate& x) { return !(x.logit >= cut); }),
                 c.data.end());
  }

 private:
  double n_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"top-n-sigma", "keep tokens with logit >= max - n * sigma (sigma: std. dev. of the logits)",
                 {{"n", ParamType::Float, "1.0", "n >= 0; 0 keeps only the top logit(s)", 0.0, std::nullopt}},
                 "n"},
                [](const Params& p, const PluginContext&) {
                  const double n = samplers::finite_param("top-n-sigma", p, "n");
                  if (n < 0) throw samplers::invalid("top-n-sigma", "n", n, "is negative (expected n >= 0)");
                  return std::make_unique<TopNSigma>(p, n);
                });
}

}  // namespace

GLASSBOX_MODULE("top-n-sigma", "top-n-sigma truncation", register_factories)
