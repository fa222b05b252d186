// CPU detection on x86-64 (platform/cpu.hpp): GCC's __builtin_cpu_supports, feature by feature
// (clang 14, the fuzz and sanitizer builds' compiler, knows no "x86-64-vN" names).
#include "cpu.hpp"

namespace glassbox::platform {

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    __builtin_cpu_init();
    CpuFeatures c;
    c.x86_v2 = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt");
    c.x86_v3 = c.x86_v2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
               __builtin_cpu_supports("bmi2");
    c.x86_v4 = c.x86_v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    c.avx512vnni = c.x86_v4 && __builtin_cpu_supports("avx512vnni");
    return c;
  }();
  return f;
}

}  // namespace glassbox::platform
