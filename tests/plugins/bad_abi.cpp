// A sampler module compiled against ABI version 999: the registry must refuse to use it.
#include <glassbox/plugin.hpp>

namespace {
void register_factories(glassbox::Registrar& r) {
  r.add_sampler({"bad-abi", "must never be registered", {}, ""},
                [](const glassbox::Params&, const glassbox::PluginContext&) -> std::unique_ptr<glassbox::Sampler> { return nullptr; });
}
}  // namespace

GLASSBOX_MODULE("bad-abi", "built with another ABI version", register_factories)
