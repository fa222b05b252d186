// Attention "recompute": no cache. Nothing survives between steps, so the engine re-runs the whole
// sequence through the model at every decode step (the lesson's naive loop; attention work grows as n²).
#include <glassbox/plugin.hpp>

#include "../common/contiguous_kv.hpp"

namespace {

// The K/V rows live only for one pass over the sequence (a later block attends to earlier ones).
class Recompute final : public glassbox::plugins::ContiguousKv {
 public:
  using ContiguousKv::ContiguousKv;
  bool persistent() const override { return false; }
  void describe(glassbox::KvState& s) const override {
    ContiguousKv::describe(s);
    s.capacity = 0;  // keeps nothing between steps: `tokens` is what the last pass recomputed
  }
};

void register_factories(glassbox::Registrar& r) {
  r.add_attention({"recompute", "no cache: every step re-runs the model over the whole sequence", {}, ""},
                  [](const glassbox::Params&, const glassbox::PluginContext& c) {
                    const auto& s = c.shape("attention 'recompute'");
                    return std::make_unique<Recompute>(s, s.seq_len, "attention 'recompute'");
                  });
}

}  // namespace

GLASSBOX_MODULE("recompute", "no K/V cache: recompute the whole sequence every step", register_factories)
