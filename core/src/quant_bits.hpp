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

// IQ4_NL's 16 levels (ggml-common.h kvalues_iq4nl): a non-uniform grid, denser near zero.
[[maybe_unused]] alignas(16) constexpr std::int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                                       1,    13,   25,  38,  53,  69,  89,  113};

// The 16 six-bit scales of a Q3_K super-block (biased by 32), unpacked from its 12 bytes as ggml's
// dequantize_row_q3_K does: bytes 0..7 hold the low 4 bits (scale s in byte s mod 8, low nibble for
// s < 8, high nibble for s ≥ 8), bytes 8..11 the high 2 bits (scale s in byte 8 + s mod 4, bits
// 2·(s/4)..2·(s/4)+1). Returned as sc − 32, in −32..31.
[[maybe_unused]] inline void q3_K_scales(const std::uint8_t* q, int sc[16]) {
  constexpr std::uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  std::uint32_t aux[4];
  std::memcpy(aux, q, 12);
  const std::uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::int8_t s8[16];
  std::memcpy(s8, aux, 16);
  for (int i = 0; i < 16; ++i) sc[i] = s8[i] - 32;
}

}  // namespace
}  // namespace glassbox::quant
