// Sampler "greedy": selects the most likely candidate (argmax; ties go to the lower id).
#include "stage.hpp"

namespace {

using namespace glassbox;

class Greedy final : public samplers::Stage {
 public:
  explicit Greedy(Params p) : Stage("greedy", std::move(p)) {}
  Selection selection() const override { return Selection::Argmax; }
  // One pass, no sort: the canonical first candidate (highest logit, ties to the lower id).
  void apply(Candidates& c, Rng&) override { c.selected = c.argmax(); }
};

void register_factories(Registrar& r) {
  r.add_sampler({"greedy", "pick the most likely token (argmax, ties to the lower id)", {}, ""},
                [](const Params& p, const PluginContext&) { return std::make_unique<Greedy>(p); });
}

}  // namespace

GLASSBOX_MODULE("greedy", "greedy (argmax) selection", register_factories)
