// Sampler "greedy": selects the most likely candidate (argmax; ties go to the lower id).
#include <glassbox/plugin.hpp>

namespace {

class Greedy final : public glassbox::Sampler {
 public:
  explicit Greedy(glassbox::Params p) : params_(std::move(p)) {}
  std::string name() const override { return "greedy"; }
  const glassbox::Params& params() const override { return params_; }
  bool selects() const override { return true; }
  void apply(glassbox::Candidates& c, glassbox::Rng&) override {
    c.selected = -1;
    for (int i = 0; i < static_cast<int>(c.data.size()); ++i) {
      const auto& best = c.data[c.selected < 0 ? i : c.selected];
      const auto& x = c.data[i];
      if (c.selected < 0 || x.logit > best.logit || (x.logit == best.logit && x.id < best.id)) c.selected = i;
    }
  }

 private:
  glassbox::Params params_;
};

void register_factories(glassbox::Registrar& r) {
  r.add_sampler({"greedy", "pick the most likely token (argmax, ties to the lower id)", {}, ""},
                [](const glassbox::Params& p) { return std::make_unique<Greedy>(p); });
}

}  // namespace

GLASSBOX_MODULE("greedy", "greedy (argmax) selection", register_factories)
