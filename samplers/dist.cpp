// Sampler "dist": the final weighted random draw from whatever distribution the chain left.
#include "stage.hpp"

namespace {

using namespace glassbox;

class Dist final : public samplers::Stage {
 public:
  explicit Dist(Params p) : Stage("dist", std::move(p)) {}
  Selection selection() const override { return Selection::Draw; }
  // Inverse-CDF draw in canonical order (descending probability, ties to the lower id): the
  // first candidate whose cumulative probability exceeds u = rng.uniform(). The order is
  // fixed, so a seed fixes the token; only the prefix the draw reaches is ever sorted.
  void apply(Candidates& c, Rng& rng) override { c.draw(rng); }
};

void register_factories(Registrar& r) {
  r.add_sampler({"dist", "draw a token at random, weighted by the current probabilities", {}, ""},
                [](const Params& p, const PluginContext&) { return std::make_unique<Dist>(p); });
}

}  // namespace

GLASSBOX_MODULE("dist", "weighted random draw", register_factories)
