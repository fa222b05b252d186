// Attention "kv-cache": the classic contiguous K/V cache, one slot per position, allocated up front.
#include <glassbox/plugin.hpp>

#include "../common/contiguous_kv.hpp"

namespace {

void register_factories(glassbox::Registrar& r) {
  r.add_attention({"kv-cache",
                   "contiguous K/V cache: one slot per position for every layer, allocated up front",
                   {{"capacity", glassbox::ParamType::Int, "0", "positions to hold (0: the model's context length)", 0.0, {}}},
                   "capacity"},
                  [](const glassbox::Params& p, const glassbox::PluginContext& c) {
                    const auto& s = c.shape("attention 'kv-cache'");
                    const auto cap = p.get_int("capacity");
                    if (cap > s.seq_len)
                      throw glassbox::ConfigError("attention 'kv-cache': capacity = " + std::to_string(cap) +
                                                  " exceeds the model's context length " + std::to_string(s.seq_len));
                    return std::make_unique<glassbox::plugins::ContiguousKv>(s, cap == 0 ? s.seq_len : static_cast<int>(cap),
                                                                             "attention 'kv-cache'");
                  });
}

}  // namespace

GLASSBOX_MODULE("kv-cache", "contiguous key/value cache attention", register_factories)
