// CPU detection where glassbox knows no extension (platform/cpu.hpp): the scalar kernel set only.
#include "cpu.hpp"

namespace glassbox::platform {

const CpuFeatures& cpu_features() {
  static const CpuFeatures f{};
  return f;
}

}  // namespace glassbox::platform
