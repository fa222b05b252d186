// Bit-level helpers shared by the reference quantization code (quant.cpp) and the SIMD kernels
// (kernels_isa.cpp, compiled once per instruction set).
#pragma once
#include <cstdint>
#include <cstring>

namespace glassbox::quant {
// Internal linkage on purpose: kernels_isa.cpp is compiled with -mavx2 / -mavx512f, and a shared
// inline definition could be merged by the linker into the copy built for the baseline CPU.
namespace {

[[maybe_unused]] inline std::uint32_t f32_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
[[maybe_unused]] inline float f32_from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The conversions, inline here: the public functions are exported, so calls to them from inside
// the shared library would go through the PLT and could not be inlined into the block loops.
[[maybe_unused]] inline float half_to_f32(std::uint16_t h) {
  // Move exponent and mantissa into f32 position and rebias the exponent (15 → 127). Inf/NaN get
  // the all-ones exponent; subnormals (exponent 0) are built as 2^−14·(1 + m/1024) and then
  // 2^−14 is subtracted, which is exact and never touches an f32 subnormal.
  std::uint32_t o = static_cast<std::uint32_t>(h & 0x7FFF) << 13;
  const std::uint32_t exp = o & 0x0F800000u;
  o += (127u - 15u) << 23;
  if (exp == 0x0F800000u) {
    o += (128u - 16u) << 23;
  } else if (exp == 0) {
    o += 1u << 23;
    o = f32_bits(f32_from_bits(o) - f32_from_bits(113u << 23));
  }
  return f32_from_bits(o | (static_cast<std::uint32_t>(h & 0x8000) << 16));
}

[[maybe_unused]] inline float bf16_to_f32(std::uint16_t h) { return f32_from_bits(static_cast<std::uint32_t>(h) << 16); }


// The 8 six-bit scales and 8 six-bit mins of a Q4_K/Q5_K super-block, packed in 12 bytes:
//   bytes 0..3:  low 6 bits = scale of sub-blocks 0..3, top 2 bits = high bits of scale 4..7
//   bytes 4..7:  low 6 bits = min   of sub-blocks 0..3, top 2 bits = high bits of min   4..7
//   bytes 8..11: low nibble = low 4 bits of scale 4..7, high nibble = low 4 bits of min 4..7
[[maybe_unused]] inline void get_scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& sc, std::uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<std::uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace
}  // namespace glassbox::quant
