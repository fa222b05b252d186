// Sampler "dist": the final weighted random draw from whatever distribution the chain left.
#include <glassbox/plugin.hpp>

namespace {

class Dist final : public glassbox::Sampler {
 public:
  explicit Dist(glassbox::Params p) : params_(std::move(p)) {}
  std::string name() const override { return "dist"; }
  const glassbox::Params& params() const override { return params_; }
  bool selects() const override { return true; }
  // Inverse-CDF draw over the candidates in descending order: the first index whose
  // cumulative probability exceeds u. The order is fixed, so a seed fixes the token.
  void apply(glassbox::Candidates& c, glassbox::Rng& rng) override {
    c.softmax();
    const float u = rng.uniform();
    c.u = u;
    float cdf = 0.0f;
    c.selected = static_cast<int>(c.data.size()) - 1;
    for (int i = 0; i < static_cast<int>(c.data.size()); ++i) {
      cdf += c.data[i].prob;
      if (u < cdf) { c.selected = i; break; }
    }
  }

 private:
  glassbox::Params params_;
};

void register_factories(glassbox::Registrar& r) {
  r.add_sampler({"dist", "draw a token at random, weighted by the current probabilities", {}, ""},
                [](const glassbox::Params& p) { return std::make_unique<Dist>(p); });
}

}  // namespace

GLASSBOX_MODULE("dist", "weighted random draw", register_factories)
