// The default plugin registry the tests share: every module of the build's plugin folder, loaded once.
#pragma once
#include "glassbox/registry.hpp"

namespace gbtest {

// Loaded on first use and never destroyed: plugin objects made from it and kept in other statics
// (a test's fixture) must not outlive the modules their code lives in.
inline glassbox::Registry& registry() {
  static glassbox::Registry* reg = [] {
    auto* r = new glassbox::Registry();
    r->load_default();
    return r;
  }();
  return *reg;
}

}  // namespace gbtest
