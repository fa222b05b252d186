// A module that registers a sampler named "greedy" again: rejected as a duplicate.
#include <glassbox/plugin.hpp>

namespace {
void register_factories(glassbox::Registrar& r) {
  r.add_sampler({"greedy", "duplicate name", {}, ""},
                [](const glassbox::Params&, const glassbox::PluginContext&) -> std::unique_ptr<glassbox::Sampler> { return nullptr; });
}
}  // namespace

GLASSBOX_MODULE("dup-greedy", "test module with a duplicate plugin name", register_factories)
