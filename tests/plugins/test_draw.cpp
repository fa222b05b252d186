// Test-only sampler stages that select under names core has never heard of: "coin" declares a draw (it is
// dist under another name) and "sticky" an adaptive selection. Speculative decoding must accept the first
// and refuse the second from what they declare (Sampler::selection), not from their names.
#include <glassbox/plugin.hpp>

namespace {
using namespace glassbox;

class Coin final : public Sampler {
 public:
  explicit Coin(Params p) : p_(std::move(p)) {}
  std::string name() const override { return "coin"; }
  const Params& params() const override { return p_; }
  Selection selection() const override { return Selection::Draw; }
  void apply(Candidates& c, Rng& rng) override { c.draw(rng); }

 private:
  Params p_;
};

class Sticky final : public Sampler {
 public:
  explicit Sticky(Params p) : p_(std::move(p)) {}
  std::string name() const override { return "sticky"; }
  const Params& params() const override { return p_; }
  Selection selection() const override { return Selection::Adaptive; }
  void apply(Candidates& c, Rng&) override { c.selected = c.argmax(); }

 private:
  Params p_;
};

void register_factories(Registrar& r) {
  r.add_sampler({"coin", "a weighted draw under another name (declares Selection::Draw)", {}, ""},
                [](const Params& p, const PluginContext&) { return std::make_unique<Coin>(p); });
  r.add_sampler({"sticky", "an argmax that declares Selection::Adaptive", {}, ""},
                [](const Params& p, const PluginContext&) { return std::make_unique<Sticky>(p); });
}
}  // namespace

GLASSBOX_MODULE("test-draw", "test module: selecting stages known only by what they declare", register_factories)
