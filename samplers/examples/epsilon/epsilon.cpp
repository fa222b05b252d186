// Sampler "epsilon": epsilon sampling (Hewitt, Manning, Liang 2022, "Truncation Sampling as
// Language Model Desmoothing"). Keeps the tokens whose probability is at least epsilon, an
// absolute floor, so that the long tail of tiny probabilities never gets drawn; the most likely
// token always stays. An example of a third-party glassbox plugin: it uses only the installed
// headers and is loaded like the built-in samplers.
#include <algorithm>
#include <memory>

#include <glassbox/error.hpp>
#include <glassbox/plugin.hpp>

namespace {

class Epsilon final : public glassbox::Sampler {
 public:
  Epsilon(glassbox::Params p, double eps) : params_(std::move(p)), eps_(eps) {}
  std::string name() const override { return "epsilon"; }
  const glassbox::Params& params() const override { return params_; }

  // Edits the candidates in place: drop every token with p < epsilon. normalize() computes
  // p = softmax(logit) without reordering; argmax() finds the best without sorting.
  void apply(glassbox::Candidates& c, glassbox::Rng&) override {
    c.normalize();
    const glassbox::Candidate best = c.data[c.argmax()];
    c.data.erase(std::remove_if(c.data.begin(), c.data.end(),
                                [&](const glassbox::Candidate& x) { return x.prob < eps_; }),
                 c.data.end());
    if (c.data.empty()) c.data.assign(1, best);
    // remove_if keeps the survivors' order, so c.sorted stays true if it was.
  }

 private:
  glassbox::Params params_;
  double eps_;
};

void register_factories(glassbox::Registrar& r) {
  r.add_sampler(
      {"epsilon",                                              // the name users put in --sampler
       "keep tokens with p >= epsilon (an absolute floor)",   // one line for `glassbox plugins`
       {{"epsilon", glassbox::ParamType::Float, "0.0003", "0 <= epsilon < 1", 0.0, 1.0}},
       "epsilon"},                                             // the main parameter: epsilon:0.02
      [](const glassbox::Params& p, const glassbox::PluginContext&) -> std::unique_ptr<glassbox::Sampler> {
        // The registry has parsed the value and checked [min, max]; the factory checks the rest.
        const double eps = p.get_float("epsilon");
        if (eps >= 1.0)
          throw glassbox::ConfigError("sampler 'epsilon': parameter 'epsilon' = '" + std::to_string(eps) +
                                      "' would remove every token (expected epsilon < 1)");
        return std::make_unique<Epsilon>(p, eps);
      });
}

}  // namespace

// Exports the entry point the registry looks for, stamped with GLASSBOX_ABI_VERSION.
GLASSBOX_MODULE("epsilon", "epsilon sampling (example third-party plugin)", register_factories)
