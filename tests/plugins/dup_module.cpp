// A module that calls itself "greedy", the name of a built-in module (loaded or linked in): rejected as a
// duplicate module before any of its factories is looked at.
#include <glassbox/plugin.hpp>

namespace {
void register_factories(glassbox::Registrar& r) {
  r.add_sampler({"not-greedy", "never registered", {}, ""},
                [](const glassbox::Params&, const glassbox::PluginContext&) -> std::unique_ptr<glassbox::Sampler> { return nullptr; });
}
}  // namespace

GLASSBOX_MODULE("greedy", "test module with a built-in module's name", register_factories)
