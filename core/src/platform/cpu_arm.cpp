// CPU detection on aarch64 (platform/cpu.hpp). Linux: the kernel's hardware capability bits
// (getauxval), so no trapping on an MRS of an ID register. macOS: sysctl's hw.optional.arm.FEAT_*
// (written from Apple's documentation, not yet tested on a Mac). Elsewhere: NEON only, which every
// ARMv8-A core has.
#include "cpu.hpp"

#if defined(__linux__)
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace glassbox::platform {

namespace {
#if defined(__APPLE__)
bool sysctl_flag(const char* name) {
  int v = 0;
  size_t len = sizeof v;
  return sysctlbyname(name, &v, &len, nullptr, 0) == 0 && v != 0;
}
#endif
}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
    c.neon = true;
#if defined(__linux__)
    // The bit numbers of the kernel's uapi asm/hwcap.h, spelled out for older headers that lack them.
    constexpr unsigned long kHwcapAsimd = 1ul << 1, kHwcapAsimddp = 1ul << 20, kHwcap2I8mm = 1ul << 13;
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    c.neon = (hw & kHwcapAsimd) != 0;
    c.dotprod = c.neon && (hw & kHwcapAsimddp) != 0;
    c.i8mm = c.dotprod && (hw2 & kHwcap2I8mm) != 0;
#elif defined(__APPLE__)
    c.dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
    c.i8mm = c.dotprod && sysctl_flag("hw.optional.arm.FEAT_I8MM");
#endif
    return c;
  }();
  return f;
}

}  // namespace glassbox::platform
