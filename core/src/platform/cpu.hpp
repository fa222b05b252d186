// The processor-specific calls libglassbox makes (a spin-wait hint, the CPU's instruction-set
// extensions), one small file per architecture: cpu_x86.cpp, cpu_arm.cpp, cpu_generic.cpp (the plain
// fallback). core/CMakeLists.txt compiles the one for CMAKE_SYSTEM_PROCESSOR. Internal to libglassbox.
#pragma once

namespace glassbox::platform {

// A hint to the core that this thread is spinning on a flag (x86 `pause`, arm64 `yield`): cheaper
// for the sibling hardware thread, and on x86 it avoids the memory-order flush when the flag changes.
// Inline because it sits in the thread pool's polling loops.
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Instruction-set extensions the kernel sets need (kernels.cpp). Each answers false where the
// architecture has no such extension, so a caller needs no #if of its own.
struct CpuFeatures {
  // x86-64 psABI levels: v2 = SSE4.2 + POPCNT, v3 = AVX2, FMA, BMI1/2, v4 = AVX-512 F/BW/CD/DQ/VL.
  bool x86_v2 = false, x86_v3 = false, x86_v4 = false, avx512vnni = false;
  // aarch64: Advanced SIMD (always on ARMv8-A Linux), SDOT/UDOT (ARMv8.2 dotprod), SMMLA (ARMv8.6 i8mm).
  bool neon = false, dotprod = false, i8mm = false;
};

// Detected once per process.
const CpuFeatures& cpu_features();

}  // namespace glassbox::platform
