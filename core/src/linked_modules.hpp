// The plugin modules linked into libglassbox (GLASSBOX_STATIC_PLUGINS): their names and entry points, in a
// table CMake generates (linked_modules.cpp.in), which the registry registers at start-up like loaded ones.
#pragma once
#include <span>

#include "glassbox/plugin.hpp"

namespace glassbox::detail {

struct LinkedModule {
  const char* file;                          // the module's file name in a shared build ("gb_sampler_greedy")
  const glassbox_module_info* (*entry)();    // its GLASSBOX_MODULE entry point, named for it
};

// Every linked-in module; empty in a build that loads the built-ins from the plugin folder.
std::span<const LinkedModule> linked_modules();

}  // namespace glassbox::detail
