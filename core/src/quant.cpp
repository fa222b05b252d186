// ggml's weight types: fp16/bf16 conversion, (de)quantization of rows, and per-type dot products
// (plain reference versions here; the SIMD ones in kernels_isa.cpp), following ggml's formulas.
#include "glassbox/quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "glassbox/error.hpp"
#include "kernel_set.hpp"
#include "quant_bits.hpp"

namespace glassbox::quant {

namespace {

// The rows handed to us come from model files, so a wrong length is a bad file, not a crash.
void check_row(const char* fn, DType t, std::size_t n) {
  const auto& info = dtype_info(t);
  if (n % info.block_values != 0)
    throw ModelError(std::string(fn) + ": row of " + std::to_string(n) + " values is not a multiple of the " +
                     std::string(info.name) + " block size " + std::to_string(info.block_values));
}

inline std::uint16_t f32_to_half(float f) {
  const std::uint32_t u = f32_bits(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00;   // NaN
  if (a >= 0x477FF000u) return sign | 0x7C00;  // ≥ 65520, the midpoint above 65504 (odd), ties to inf
  if (a >= 0x38800000u) {                      // normal in fp16 (≥ 2^−14): rebias, round off 13 bits
    const std::uint32_t m = a - ((127u - 15u) << 23);
    return static_cast<std::uint16_t>(sign | ((m + 0x0FFFu + ((m >> 13) & 1u)) >> 13));  // a carry bumps the exponent, correctly
  }
  // Subnormal in fp16: the value in units of 2^−24, rounded to nearest even.
  const int e = static_cast<int>(a >> 23);
  const int shift = 126 - e;  // value = M · 2^(e−150) = (M >> shift) units of 2^−24
  if (e == 0 || shift > 24) return sign;  // below 2^−25: rounds to zero (2^−25 itself ties to even 0)
  const std::uint32_t M = (a & 0x7FFFFFu) | 0x800000u;
  std::uint32_t r = M >> shift;
  const std::uint32_t rem = M & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;  // may reach 0x400, the smallest normal: correct
  return static_cast<std::uint16_t>(sign | r);
}

inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 64);  // NaN: force quiet
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);              // nearest, ties to even
}

[[noreturn]] void unsupported(const char* fn, DType t) {
  throw ConfigError(std::string(fn) + ": type " + std::string(dtype_name(t)) + " is not supported here");
}

// ggml's nearest_int: adding 1.5·2^23 pushes the fraction bits out of the mantissa, so the FPU's
// round-to-nearest-even does the rounding; the integer is then read back from the low mantissa bits.
// Valid for |x| ≤ 2^22.
int nearest_int(float x) {
  const float v = x + 12582912.0f;
  return static_cast<int>(f32_bits(v) & 0x007fffff) - 0x00400000;
}

// ---- dequantization (ggml's dequantize_row_*, same operation order, so bit-identical) ---------

// Q8_0 and Q8_1 (whose s the values do not use).
template <class Block>
void dequant_q8(const Block* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = half_to_f32(x[i].d);
    for (std::size_t j = 0; j < QK8_0; ++j) y[i * QK8_0 + j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void dequant_q4_0(const block_q4_0* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = half_to_f32(x[i].d);
    for (std::size_t j = 0; j < QK8_0 / 2; ++j) {
      const int x0 = (x[i].qs[j] & 0x0F) - 8;
      const int x1 = (x[i].qs[j] >> 4) - 8;
      y[i * QK8_0 + j] = static_cast<float>(x0) * d;
      y[i * QK8_0 + j + QK8_0 / 2] = static_cast<float>(x1) * d;
    }
  }
}

// Q4_K and Q5_K: 8 sub-blocks of 32, y = d·sc·q − dmin·m with q a nibble, plus for Q5_K a fifth bit
// (16) from qh: bit s of qh[l] for value l of sub-block s.
template <class Block>
void dequant_q45_K(const Block* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const std::uint8_t* q = x[i].qs;
    const float d = half_to_f32(x[i].d);
    const float dmin = half_to_f32(x[i].dmin);
    // The fifth bit of value l of the sub-block whose qh bit is u (always 0 for Q4_K).
    auto fifth = [&](int l, std::uint8_t u) {
      if constexpr (std::is_same_v<Block, block_q5_K>) return x[i].qh[l] & u ? 16 : 0;
      else return 0;
    };
    std::uint8_t u1 = 1, u2 = 2;  // the qh bits of the current pair of sub-blocks
    for (int is = 0; is < 8; is += 2, q += 32, u1 <<= 2, u2 <<= 2) {  // 64 values: two sub-blocks share 32 bytes
      std::uint8_t sc, m;
      get_scale_min_k4(is, x[i].scales, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(is + 1, x[i].scales, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((q[l] & 0x0F) + fifth(l, u1)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((q[l] >> 4) + fifth(l, u2)) - m2;
    }
  }
}

// The 6-bit quant (minus 32) of value l + 32k (k = 0..3) of one 128-value half of a Q6_K block.
int q6_value(const std::uint8_t* ql, const std::uint8_t* qh, int l, int k) {
  const std::uint8_t lo = ql[l + 32 * (k & 1)];
  const int nibble = k < 2 ? (lo & 0x0F) : (lo >> 4);
  return (nibble | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
}

void dequant_q6_K(const block_q6_K* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = half_to_f32(x[i].d);
    const std::uint8_t* ql = x[i].ql;
    const std::uint8_t* qh = x[i].qh;
    const std::int8_t* sc = x[i].scales;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8)
      for (int l = 0; l < 32; ++l)
        for (int k = 0; k < 4; ++k)  // ggml: y[l + 32k] = d * sc[l/16 + 2k] * q
          y[l + 32 * k] = d * static_cast<float>(sc[l / 16 + 2 * k]) * static_cast<float>(q6_value(ql, qh, l, k));
  }
}

void dequant_q4_1(const block_q4_1* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = half_to_f32(x[i].d), m = half_to_f32(x[i].m);
    for (std::size_t j = 0; j < QK8_0 / 2; ++j) {
      y[i * QK8_0 + j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
      y[i * QK8_0 + j + QK8_0 / 2] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

// The fifth bits of a Q5_0/Q5_1 block: bit j of the little-endian word is value j's.
std::uint32_t q5_high_bits(const std::uint8_t* qh) {
  std::uint32_t h;
  std::memcpy(&h, qh, 4);
  return h;
}

// The 5-bit quant (0..31) of value j (0..31) of a Q5_0/Q5_1 block.
int q5_value(const std::uint8_t* qs, std::uint32_t qh, std::size_t j) {
  const int nibble = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

void dequant_q5_0(const block_q5_0* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = half_to_f32(x[i].d);
    const std::uint32_t qh = q5_high_bits(x[i].qh);
    for (std::size_t j = 0; j < QK8_0; ++j) y[i * QK8_0 + j] = static_cast<float>(q5_value(x[i].qs, qh, j) - 16) * d;
  }
}

void dequant_q5_1(const block_q5_1* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = half_to_f32(x[i].d), m = half_to_f32(x[i].m);
    const std::uint32_t qh = q5_high_bits(x[i].qh);
    for (std::size_t j = 0; j < QK8_0; ++j) y[i * QK8_0 + j] = static_cast<float>(q5_value(x[i].qs, qh, j)) * d + m;
  }
}

void dequant_iq4_nl(const block_iq4_nl* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = half_to_f32(x[i].d);
    for (std::size_t j = 0; j < QK8_0 / 2; ++j) {
      y[i * QK8_0 + j] = d * static_cast<float>(kvalues_iq4nl[x[i].qs[j] & 0x0F]);
      y[i * QK8_0 + j + QK8_0 / 2] = d * static_cast<float>(kvalues_iq4nl[x[i].qs[j] >> 4]);
    }
  }
}

// The 2-bit quant of value v (0..255) of a Q2_K/Q3_K super-block: half v/128 uses qs bytes
// 32·half.., and value l + 32k of a half is bits 2k..2k+1 of its byte l.
int q2_value(const std::uint8_t* qs, int v) {
  const int half = v / 128, r = v % 128;
  return (qs[32 * half + r % 32] >> (2 * (r / 32))) & 3;
}

void dequant_q2_K(const block_q2_K* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = half_to_f32(x[i].d), dmin = half_to_f32(x[i].dmin);
    for (int s = 0; s < 16; ++s) {  // ggml: dl = d·(sc & 15), ml = dmin·(sc >> 4), y = dl·q − ml
      const float dl = d * static_cast<float>(x[i].scales[s] & 0x0F), ml = dmin * static_cast<float>(x[i].scales[s] >> 4);
      for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>(q2_value(x[i].qs, 16 * s + l)) - ml;
    }
  }
}

// The signed 3-bit quant (−4..3) of value v of a Q3_K super-block: the 2 low bits as Q2_K's, minus 4
// where value v's hmask bit is clear. Value l + 32j (l 0..31, j 0..7) has bit j of hmask[l].
int q3_value(const block_q3_K& x, int v) {
  const bool high = (x.hmask[v % 32] >> (v / 32)) & 1;
  return q2_value(x.qs, v) - (high ? 0 : 4);
}

void dequant_q3_K(const block_q3_K* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = half_to_f32(x[i].d);
    int sc[16];
    q3_K_scales(x[i].scales, sc);
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(sc[s]);
      for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>(q3_value(x[i], 16 * s + l));
    }
  }
}

void dequant_q8_K(const block_q8_K* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i)
    for (std::size_t j = 0; j < QK_K; ++j) *y++ = x[i].d * static_cast<float>(x[i].qs[j]);
}

// ---- quantization ---------------------------------------------------------------------------

// ggml's quantize_row_q8_0_ref (weight files). roundf: ties away from zero.
void quant_q8_0_ref(const float* x, block_q8_0* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += QK8_0) {
    float amax = 0.0f;
    for (std::size_t j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_half(d);
    for (std::size_t j = 0; j < QK8_0; ++j) y[i].qs[j] = static_cast<std::int8_t>(std::roundf(x[j] * id));
  }
}

// ggml's quantize_row_q4_0_ref (weight files). The scale is signed: the value with the largest |x|
// (first one on ties) maps to q − 8 = −8 exactly, which uses the asymmetric range −8..7 fully.
// Rounding is (int8)(v + 8.5): truncation of a positive number, i.e. ties go up.
void quant_q4_0_ref(const float* x, block_q4_0* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += QK8_0) {
    float amax = 0.0f, max = 0.0f;
    for (std::size_t j = 0; j < QK8_0; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_half(d);
    for (std::size_t j = 0; j < QK8_0 / 2; ++j) {
      const auto q0 = static_cast<std::uint8_t>(std::min<int>(15, static_cast<std::int8_t>(x[j] * id + 8.5f)));
      const auto q1 = static_cast<std::uint8_t>(std::min<int>(15, static_cast<std::int8_t>(x[j + 16] * id + 8.5f)));
      y[i].qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
    }
  }
}

// ggml's quantize_row_q4_1_ref: d = (max − min)/15, m = min, q = min(15, (int8)((x − min)·(1/d) + 0.5)).
void quant_q4_1_ref(const float* x, block_q4_1* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += QK8_0) {
    float min = std::numeric_limits<float>::max(), max = -std::numeric_limits<float>::max();
    for (std::size_t j = 0; j < QK8_0; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_half(d);
    y[i].m = f32_to_half(min);
    for (std::size_t j = 0; j < QK8_0 / 2; ++j) {
      const auto q0 = static_cast<std::uint8_t>(std::min<int>(15, static_cast<std::int8_t>((x[j] - min) * id + 0.5f)));
      const auto q1 = static_cast<std::uint8_t>(std::min<int>(15, static_cast<std::int8_t>((x[j + 16] - min) * id + 0.5f)));
      y[i].qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
    }
  }
}

// ggml's quantize_row_q5_0_ref: Q4_0's recipe with 5 bits: d = m/−16, q = min(31, (int8)(x·(1/d) + 16.5));
// the fifth bits go to qh (bit j for value j).
void quant_q5_0_ref(const float* x, block_q5_0* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += QK8_0) {
    float amax = 0.0f, max = 0.0f;
    for (std::size_t j = 0; j < QK8_0; ++j)
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_half(d);
    std::uint32_t qh = 0;
    for (std::size_t j = 0; j < QK8_0 / 2; ++j) {
      const auto q0 = static_cast<std::uint8_t>(std::min<int>(31, static_cast<std::int8_t>(x[j] * id + 16.5f)));
      const auto q1 = static_cast<std::uint8_t>(std::min<int>(31, static_cast<std::int8_t>(x[j + 16] * id + 16.5f)));
      y[i].qs[j] = static_cast<std::uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= ((q0 & 0x10u) >> 4) << j;
      qh |= ((q1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

// ggml's quantize_row_q5_1_ref: Q4_1's recipe with 5 bits: d = (max − min)/31, q = (uint8)((x − min)·(1/d) + 0.5).
void quant_q5_1_ref(const float* x, block_q5_1* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += QK8_0) {
    float min = std::numeric_limits<float>::max(), max = -std::numeric_limits<float>::max();
    for (std::size_t j = 0; j < QK8_0; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_half(d);
    y[i].m = f32_to_half(min);
    std::uint32_t qh = 0;
    for (std::size_t j = 0; j < QK8_0 / 2; ++j) {
      const auto q0 = static_cast<std::uint8_t>((x[j] - min) * id + 0.5f);
      const auto q1 = static_cast<std::uint8_t>((x[j + 16] - min) * id + 0.5f);
      y[i].qs[j] = static_cast<std::uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= ((q0 & 0x10u) >> 4) << j;
      qh |= ((q1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

// ---- k-quant weight quantizers (ggml-quants.c's *_ref functions, without an imatrix) ----------
// The float arithmetic is written in ggml's order on purpose (a·b·l is (a·b)·l, sums run left to
// right, no fused multiply-add: quant.cpp is built with -ffp-contract=off), so the bytes come out
// identical to llama-quantize's.

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: a group this small counts as all zero

// ggml's make_qx_quants: symmetric levels −nmax..nmax−1 (stored + nmax) for n values. Starts from the
// scale that maps the signed extreme to −nmax, then tries 18 nearby scales −(nmax ± 0.1·is)/max and
// keeps the one with the best weighted least-squares fit (Σw·x·l)²/Σw·l². Weights: qw if given, else by
// rmse_type (1: x², 2: 1, 3: |x|, other: √|x|); rmse_type 0 just rounds; a negative one returns early
// with the mean of the first fit and the plain scale. Returns the scale (level → value).
float make_qx_quants(int n, int nmax, const float* x, std::int8_t* L, int rmse_type, const float* qw) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i) {
      const int l = nearest_int(iscale * x[i]);
      L[i] = static_cast<std::int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
    }
    return 1 / iscale;
  }
  bool return_early = false;
  if (rmse_type < 0) {
    rmse_type = -rmse_type;
    return_early = true;
  }
  auto weight = [&](int i) -> float {
    return qw ? qw[i] : rmse_type == 1 ? x[i] * x[i] : rmse_type == 2 ? 1.0f : rmse_type == 3 ? std::fabs(x[i]) : std::sqrt(std::fabs(x[i]));
  };
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<std::int8_t>(l + nmax);
    const float w = weight(i);
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = weight(i);
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<std::int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// ggml's make_q3_quants: levels −nmax..nmax−1 (stored + nmax). With do_rmse it starts from the
// extreme's scale and then, for up to 5 passes, moves single values to the level that improves the
// x²-weighted fit (Σw·x·l)²/Σw·l²; returns Σw·x·l / Σw·l².
float make_q3_quants(int n, int nmax, const float* x, std::int8_t* L, bool do_rmse) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / max;
  if (do_rmse) {
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      L[i] = static_cast<std::int8_t>(l);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    for (int itry = 0; itry < 5; ++itry) {
      int n_changed = 0;
      for (int i = 0; i < n; ++i) {
        const float w = x[i] * x[i];
        float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
        if (slx > 0) {
          float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
          int new_l = nearest_int(x[i] * sl2 / slx);
          new_l = std::max(-nmax, std::min(nmax - 1, new_l));
          if (new_l != L[i]) {
            slx += w * x[i] * static_cast<float>(new_l);
            sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
              L[i] = static_cast<std::int8_t>(new_l);
              sumlx = slx;
              suml2 = sl2;
              ++n_changed;
            }
          }
        }
      }
      if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
  }
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<std::int8_t>(l + nmax);
  }
  return 1 / iscale;
}

// ggml's make_qkx2_quants: levels 0..nmax with a scale and a min (value ≈ scale·l − the_min, the min
// never above 0). Starts from (max − min)/nmax, then tries nstep+1 scales (rmin + rdelta·is + nmax)/(max − min),
// each with the weighted least-squares scale and min for its levels, and keeps the lowest weighted
// error (|diff| if use_mad, else diff²). Returns the scale; *the_min = −min ≥ 0.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L, float* the_min,
                       std::uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<std::uint8_t>(l);
      const float w = weights[i];
      sum_l += w * static_cast<float>(l);
      sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
      sum_xl += w * static_cast<float>(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Packs 8 six-bit scales and 8 six-bit mins into Q4_K/Q5_K's 12 bytes (the inverse of get_scale_min_k4).
void pack_scale_min_k4(std::uint8_t* scales, int j, std::uint8_t ls, std::uint8_t lm) {
  if (j < 4) {
    scales[j] = ls;
    scales[j + 4] = lm;
  } else {
    scales[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
    scales[j - 4] |= static_cast<std::uint8_t>((ls >> 4) << 6);
    scales[j - 0] |= static_cast<std::uint8_t>((lm >> 4) << 6);
  }
}

// The shared part of ggml's quantize_row_q4_K_ref and quantize_row_q5_K_ref (nmax 15 or 31): per
// sub-block of 32, make_qkx2_quants with weights av_x + |x| (av_x the sub-block's RMS); the 8 scales
// and 8 mins are then rounded to 6 bits against their maxima (d = max_scale/63, dmin = max_min/63), and
// every value re-rounded with the stored (rounded) scale and min. Leaves the levels 0..nmax in L.
template <class Block>
void quant_qk_scale_min(const float* x, Block& y, std::uint8_t* L, int nmax, float rmin, float rdelta, int nstep) {
  std::uint8_t Laux[32];
  float weights[32], mins[QK_K / 32], scales[QK_K / 32];
  float max_scale = 0, max_min = 0;  // as the min is deducted, scales are never negative
  for (int j = 0; j < static_cast<int>(QK_K / 32); ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < static_cast<int>(QK_K / 32); ++j) {
    auto ls = static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j]));  // ggml stores the int in a uint8_t
    auto lm = static_cast<std::uint8_t>(nearest_int(inv_min * mins[j]));
    ls = std::min<std::uint8_t>(63, ls);
    lm = std::min<std::uint8_t>(63, lm);
    pack_scale_min_k4(y.scales, j, ls, lm);
  }
  y.d = f32_to_half(max_scale / 63.f);
  y.dmin = f32_to_half(max_min / 63.f);
  for (int j = 0; j < static_cast<int>(QK_K / 32); ++j) {
    std::uint8_t sc, m;
    get_scale_min_k4(j, y.scales, sc, m);
    const float d = half_to_f32(y.d) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = half_to_f32(y.dmin) * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

// ggml's quantize_row_q4_K_ref: make_qkx2_quants(32, 15, …, rmin −1, rdelta 0.1, 20 steps), 4-bit levels.
void quant_q4_K_ref(const float* x, block_q4_K* y, std::size_t nb) {
  std::uint8_t L[QK_K];
  for (std::size_t i = 0; i < nb; ++i, x += QK_K) {
    quant_qk_scale_min(x, y[i], L, 15, -1.f, 0.1f, 20);
    std::uint8_t* q = y[i].qs;
    for (std::size_t j = 0; j < QK_K; j += 64, q += 32)
      for (std::size_t l = 0; l < 32; ++l) q[l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

// ggml's quantize_row_q5_K_ref: make_qkx2_quants(32, 31, …, rmin −0.5, rdelta 0.1, 15 steps), 5-bit
// levels: low nibbles as Q4_K, the fifth bit of value n + l (n = 64k, l < 32) in bit 2k of qh[l], of
// value n + 32 + l in bit 2k + 1.
void quant_q5_K_ref(const float* x, block_q5_K* y, std::size_t nb) {
  std::uint8_t L[QK_K];
  for (std::size_t i = 0; i < nb; ++i, x += QK_K) {
    quant_qk_scale_min(x, y[i], L, 31, -0.5f, 0.1f, 15);
    std::uint8_t* qh = y[i].qh;
    std::uint8_t* ql = y[i].qs;
    std::memset(qh, 0, QK_K / 8);
    std::uint8_t m1 = 1, m2 = 2;
    for (std::size_t n = 0; n < QK_K; n += 64, ql += 32) {
      for (std::size_t j = 0; j < 32; ++j) {
        int l1 = L[n + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[n + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<std::uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<std::uint8_t>(m1 << 2);
      m2 = static_cast<std::uint8_t>(m2 << 2);
    }
  }
}

// ggml's quantize_row_q6_K_ref: per sub-block of 16, make_qx_quants(16, 32, …, rmse_type 1: weights x²);
// the 16 scales become signed 8-bit numbers against the signed largest one (which maps to −128;
// d = its scale/−128), then every value is re-rounded to −32..31 with d·scale and stored + 32.
void quant_q6_K_ref(const float* x, block_q6_K* y, std::size_t nb) {
  std::int8_t L[QK_K];
  float scales[QK_K / 16];
  for (std::size_t i = 0; i < nb; ++i, x += QK_K) {
    float max_scale = 0, max_abs_scale = 0;
    for (std::size_t ib = 0; ib < QK_K / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, nullptr);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(block_q6_K));
      y[i].d = f32_to_half(0.f);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = f32_to_half(1 / iscale);
    for (std::size_t ib = 0; ib < QK_K / 16; ++ib)
      y[i].scales[ib] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (std::size_t j = 0; j < QK_K / 16; ++j) {
      const float d = half_to_f32(y[i].d) * static_cast<float>(y[i].scales[j]);
      if (d == 0.0f) continue;
      for (std::size_t ii = 0; ii < 16; ++ii) {
        int l = nearest_int(x[16 * j + ii] / d);
        l = std::max(-32, std::min(31, l));
        L[16 * j + ii] = static_cast<std::int8_t>(l + 32);
      }
    }
    std::uint8_t* ql = y[i].ql;
    std::uint8_t* qh = y[i].qh;
    for (std::size_t j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
      for (std::size_t l = 0; l < 32; ++l) {
        const auto q1 = static_cast<std::uint8_t>(L[j + l + 0] & 0xF), q2 = static_cast<std::uint8_t>(L[j + l + 32] & 0xF);
        const auto q3 = static_cast<std::uint8_t>(L[j + l + 64] & 0xF), q4 = static_cast<std::uint8_t>(L[j + l + 96] & 0xF);
        ql[l + 0] = static_cast<std::uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<std::uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<std::uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                          ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

// ggml's quantize_row_q2_K_ref: per sub-block of 16, make_qkx2_quants(16, 3, …, weights |x|, rmin −0.5,
// rdelta 0.1, 15 steps, mean absolute error); the 16 scales and 16 mins rounded to 4 bits against their
// maxima (d = max_scale/15, dmin = max_min/15), then the values re-rounded to 0..3.
void quant_q2_K_ref(const float* x, block_q2_K* y, std::size_t nb) {
  std::uint8_t L[QK_K], Laux[16];
  float weights[16], mins[QK_K / 16], scales[QK_K / 16];
  const float q4scale = 15.f;
  for (std::size_t i = 0; i < nb; ++i, x += QK_K) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < static_cast<int>(QK_K / 16); ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (std::size_t j = 0; j < QK_K / 16; ++j) y[i].scales[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
      y[i].d = f32_to_half(max_scale / q4scale);
    } else {
      for (std::size_t j = 0; j < QK_K / 16; ++j) y[i].scales[j] = 0;
      y[i].d = f32_to_half(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (std::size_t j = 0; j < QK_K / 16; ++j)
        y[i].scales[j] = static_cast<std::uint8_t>(y[i].scales[j] | (nearest_int(iscale * mins[j]) << 4));
      y[i].dmin = f32_to_half(max_min / q4scale);
    } else {
      y[i].dmin = f32_to_half(0.f);
    }
    for (std::size_t j = 0; j < QK_K / 16; ++j) {
      const float d = half_to_f32(y[i].d) * static_cast<float>(y[i].scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = half_to_f32(y[i].dmin) * static_cast<float>(y[i].scales[j] >> 4);
      for (std::size_t ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = static_cast<std::uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    for (std::size_t j = 0; j < QK_K; j += 128)
      for (std::size_t l = 0; l < 32; ++l)
        y[i].qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
  }
}

// ggml's quantize_row_q3_K_ref: per sub-block of 16, make_q3_quants(16, 4, …, do_rmse); the 16 scales
// become 6-bit numbers (stored + 32) against the signed largest one (maps to −32; d = its scale/−32),
// then the values are re-rounded to −4..3: low 2 bits in qs, the high bit (set for levels ≥ 4 after
// the +4 offset) in hmask.
void quant_q3_K_ref(const float* x, block_q3_K* y, std::size_t nb) {
  std::int8_t L[QK_K];
  float scales[QK_K / 16];
  for (std::size_t i = 0; i < nb; ++i, x += QK_K) {
    float max_scale = 0, amax = 0;
    for (std::size_t j = 0; j < QK_K / 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, 12);
    if (max_scale != 0.0f) {
      const float iscale = -32.f / max_scale;
      for (std::size_t j = 0; j < QK_K / 16; ++j) {
        auto l = static_cast<std::int8_t>(nearest_int(iscale * scales[j]));
        l = static_cast<std::int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
        if (j < 8) y[i].scales[j] = static_cast<std::uint8_t>(l & 0xF);
        else y[i].scales[j - 8] = static_cast<std::uint8_t>(y[i].scales[j - 8] | ((l & 0xF) << 4));
        l = static_cast<std::int8_t>(l >> 4);
        y[i].scales[j % 4 + 8] = static_cast<std::uint8_t>(y[i].scales[j % 4 + 8] | (l << (2 * (j / 4))));
      }
      y[i].d = f32_to_half(1 / iscale);
    } else {
      y[i].d = f32_to_half(0.f);
    }
    for (std::size_t j = 0; j < QK_K / 16; ++j) {
      auto sc = static_cast<std::int8_t>(j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4);
      sc = static_cast<std::int8_t>((sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
      const float d = half_to_f32(y[i].d) * static_cast<float>(sc);
      if (d == 0.0f) continue;
      for (std::size_t ii = 0; ii < 16; ++ii) {
        int l = nearest_int(x[16 * j + ii] / d);
        l = std::max(-4, std::min(3, l));
        L[16 * j + ii] = static_cast<std::int8_t>(l + 4);
      }
    }
    std::memset(y[i].hmask, 0, QK_K / 8);
    std::size_t m = 0;
    std::uint8_t hm = 1;
    for (std::size_t j = 0; j < QK_K; ++j) {  // the high bit of values 0..31 goes to bit 0, of 32..63 to bit 1, ...
      if (L[j] > 3) {
        y[i].hmask[m] |= hm;
        L[j] = static_cast<std::int8_t>(L[j] - 4);
      }
      if (++m == QK_K / 8) {
        m = 0;
        hm = static_cast<std::uint8_t>(hm << 1);
      }
    }
    for (std::size_t j = 0; j < QK_K; j += 128)
      for (std::size_t l = 0; l < 32; ++l)
        y[i].qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
  }
}

// ggml's best_index_int8 (the version at the reference commit): the index of the level of the sorted
// table val nearest to x, by bisection; an exact midpoint goes to the upper level.
int best_index_int8(int n, const std::int8_t* val, float x) {
  if (x <= val[0]) return 0;
  if (x >= val[n - 1]) return n - 1;
  int ml = 0, mu = n - 1;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) mu = mav;
    else ml = mav;
  }
  return x - static_cast<float>(val[mu - 1]) < static_cast<float>(val[mu]) - x ? mu - 1 : mu;
}

// ggml's quantize_row_iq4_nl_ref, i.e. quantize_iq4_nl without an imatrix, which runs
// quantize_row_iq4_nl_impl(32, 32, …, ntry 7) per block: weights x²; a first scale that maps the signed
// extreme onto the table's −127 end, its least-squares refit, then 15 more trial scales
// (itry + values[0])/max, itry −7..7, each refit and kept if it fits better; finally every value is
// mapped to the nearest table level with the kept scale, and the scale is stored as fp16.
void quant_iq4_nl_ref(const float* x, block_iq4_nl* y, std::size_t nb) {
  const std::int8_t* values = kvalues_iq4nl;
  const int ntry = 7;
  std::uint8_t L[QK8_0];
  float weight[QK8_0];
  for (std::size_t ib = 0; ib < nb; ++ib, x += QK8_0) {
    std::memset(y[ib].qs, 0, QK8_0 / 2);
    y[ib].d = f32_to_half(0.f);
    for (std::size_t j = 0; j < QK8_0; ++j) weight[j] = x[j] * x[j];
    float amax = 0, max = 0;
    for (std::size_t j = 0; j < QK8_0; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    float scale = 0;
    if (!(amax < kGroupMaxEps)) {
      float d = -max / values[0];  // ntry > 0
      float id = 1 / d;
      float sumqx = 0, sumq2 = 0;
      for (std::size_t j = 0; j < QK8_0; ++j) {
        const float al = id * x[j];
        const int l = best_index_int8(16, values, al);
        L[j] = static_cast<std::uint8_t>(l);
        const float q = values[l];
        const float w = weight[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
      }
      d = sumqx / sumq2;
      float best = d * sumqx;
      for (int itry = -ntry; itry <= ntry; ++itry) {
        id = static_cast<float>(itry + values[0]) / max;
        sumqx = sumq2 = 0;
        for (std::size_t j = 0; j < QK8_0; ++j) {
          const float al = id * x[j];
          const int l = best_index_int8(16, values, al);
          const float q = values[l];
          const float w = weight[j];
          sumqx += w * q * x[j];
          sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          d = sumqx / sumq2;
          best = d * sumqx;
        }
      }
      scale = d;
    }
    y[ib].d = f32_to_half(scale);
    const float id = scale != 0.0f ? 1 / scale : 0;
    for (std::size_t j = 0; j < QK8_0; ++j) L[j] = static_cast<std::uint8_t>(best_index_int8(16, values, id * x[j]));
    for (std::size_t j = 0; j < 16; ++j) y[ib].qs[j] = static_cast<std::uint8_t>(L[j] | (L[16 + j] << 4));
  }
}

// ggml-cpu's quantize_row_q8_0 and quantize_row_q8_1 as their x86 SIMD paths compute them:
// id = 127/amax (not 1/d), and _mm256_round_ps(_MM_ROUND_NEAREST): ties to even; the conversion
// saturates to int8. Q8_1 adds s = fp16(d · Σq), the sum taken over the rounded integers.
template <class Block>
void quant_q8_act(const float* x, Block* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += QK8_0) {
    float amax = 0.0f;
    for (std::size_t j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = f32_to_half(d);
    int sum = 0;
    for (std::size_t j = 0; j < QK8_0; ++j) {
      const float q = std::nearbyint(x[j] * id);  // default rounding mode: nearest, ties to even
      y[i].qs[j] = static_cast<std::int8_t>(std::clamp(q, -128.0f, 127.0f));
      sum += y[i].qs[j];
    }
    if constexpr (std::is_same_v<Block, block_q8_1>) y[i].s = f32_to_half(d * static_cast<float>(sum));
  }
}

// ggml's quantize_row_q8_K_ref, which is also what the x86 CPU backend runs for activations.
// The signed extreme m maps to −127 exactly; +127 is clipped (a value of −m would give +127 too).
void quant_q8_K(const float* x, block_q8_K* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += QK_K) {
    float max = 0.0f, amax = 0.0f;
    for (std::size_t j = 0; j < QK_K; ++j)
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    if (amax == 0.0f) {
      y[i].d = 0.0f;
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      std::memset(y[i].bsums, 0, sizeof y[i].bsums);  // ggml leaves them unset; they multiply d = 0
      continue;
    }
    const float iscale = -127.0f / max;
    for (std::size_t j = 0; j < QK_K; ++j) y[i].qs[j] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (std::size_t j = 0; j < QK_K / 16; ++j) {
      int sum = 0;
      for (std::size_t l = 0; l < 16; ++l) sum += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<std::int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

// ---- scalar dot products (ggml's ggml_vec_dot_*_generic formulas) ----------------------------

float dot_f32_scalar(const float* a, const float* b, std::size_t n) {
  float s = 0.0f;
  for (std::size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

float dot_f16_scalar(const std::uint16_t* a, const std::uint16_t* b, std::size_t n) {
  float s = 0.0f;
  for (std::size_t i = 0; i < n; ++i) s += half_to_f32(a[i]) * half_to_f32(b[i]);
  return s;
}

float dot_bf16_scalar(const std::uint16_t* a, const std::uint16_t* b, std::size_t n) {
  float s = 0.0f;
  for (std::size_t i = 0; i < n; ++i) s += bf16_to_f32(a[i]) * bf16_to_f32(b[i]);
  return s;
}

float dot_q8_0_scalar(const block_q8_0* x, const block_q8_0* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (std::size_t j = 0; j < QK8_0; ++j) sumi += x[i].qs[j] * y[i].qs[j];
    s += static_cast<float>(sumi) * (half_to_f32(x[i].d) * half_to_f32(y[i].d));
  }
  return s;
}

float dot_q4_0_scalar(const block_q4_0* x, const block_q8_0* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (std::size_t j = 0; j < QK8_0 / 2; ++j) {
      sumi += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
      sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
    }
    s += static_cast<float>(sumi) * half_to_f32(x[i].d) * half_to_f32(y[i].d);
  }
  return s;
}

// Q4_1/Q5_1 against Q8_1 (ggml_vec_dot_q4_1_q8_1): the minimum m enters through the activation
// block's s = d_x·Σq_x, so Σ (d_w·q + m)·d_x·q_x = d_w·d_x·Σ q·q_x + m·s.
float dot_q4_1_scalar(const block_q4_1* x, const block_q8_1* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (std::size_t j = 0; j < QK8_0 / 2; ++j) sumi += (x[i].qs[j] & 0x0F) * y[i].qs[j] + (x[i].qs[j] >> 4) * y[i].qs[j + 16];
    s += half_to_f32(x[i].d) * half_to_f32(y[i].d) * static_cast<float>(sumi) + half_to_f32(x[i].m) * half_to_f32(y[i].s);
  }
  return s;
}

float dot_q5_0_scalar(const block_q5_0* x, const block_q8_0* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    const std::uint32_t qh = q5_high_bits(x[i].qh);
    int sumi = 0;
    for (std::size_t j = 0; j < QK8_0; ++j) sumi += (q5_value(x[i].qs, qh, j) - 16) * y[i].qs[j];
    s += static_cast<float>(sumi) * (half_to_f32(x[i].d) * half_to_f32(y[i].d));
  }
  return s;
}

float dot_q5_1_scalar(const block_q5_1* x, const block_q8_1* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    const std::uint32_t qh = q5_high_bits(x[i].qh);
    int sumi = 0;
    for (std::size_t j = 0; j < QK8_0; ++j) sumi += q5_value(x[i].qs, qh, j) * y[i].qs[j];
    s += half_to_f32(x[i].d) * half_to_f32(y[i].d) * static_cast<float>(sumi) + half_to_f32(x[i].m) * half_to_f32(y[i].s);
  }
  return s;
}

float dot_iq4_nl_scalar(const block_iq4_nl* x, const block_q8_0* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (std::size_t j = 0; j < QK8_0 / 2; ++j)
      sumi += kvalues_iq4nl[x[i].qs[j] & 0x0F] * y[i].qs[j] + kvalues_iq4nl[x[i].qs[j] >> 4] * y[i].qs[j + 16];
    s += static_cast<float>(sumi) * (half_to_f32(x[i].d) * half_to_f32(y[i].d));
  }
  return s;
}

// Q2_K (ggml_vec_dot_q2_K_q8_K): Σ x·y = d_w·d_x·Σ_s sc[s]·Σ_{l∈s} q·y − dmin_w·d_x·Σ_s m[s]·bsums[s]
// (a Q2_K sub-block is 16 values, exactly one bsum).
float dot_q2_K_scalar(const block_q2_K* x, const block_q8_K* y, std::size_t nb) {
  float sum = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int isum = 0, imin = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += q2_value(x[i].qs, 16 * s + l) * y[i].qs[16 * s + l];
      isum += (x[i].scales[s] & 0x0F) * dot;
      imin += (x[i].scales[s] >> 4) * y[i].bsums[s];
    }
    const float dall = y[i].d * half_to_f32(x[i].d), dmin = y[i].d * half_to_f32(x[i].dmin);
    sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(imin);
  }
  return sum;
}

// Q3_K: signed quants and signed scales, no mins: Σ x·y = d_w·d_x·Σ_s (sc[s] − 32)·Σ_{l∈s} q·y.
float dot_q3_K_scalar(const block_q3_K* x, const block_q8_K* y, std::size_t nb) {
  float sum = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int sc[16];
    q3_K_scales(x[i].scales, sc);
    int isum = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += q3_value(x[i], 16 * s + l) * y[i].qs[16 * s + l];
      isum += sc[s] * dot;
    }
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(isum);
  }
  return sum;
}

// Shared by Q4_K and Q5_K: q[256] are the unsigned quants (0..15 or 0..31) in value order.
// Σ x·y = d_w·d_x·Σ_s sc[s]·Σ_{l∈s} q·y  −  dmin_w·d_x·Σ_s m[s]·Σ_{l∈s} y, and Σ_{l∈s} y comes
// from the two bsums of sub-block s.
void kquant_sums(const std::uint8_t* q, const std::uint8_t* scales, const block_q8_K& y, int& isum, int& imin) {
  isum = imin = 0;
  for (int s = 0; s < 8; ++s) {
    std::uint8_t sc, m;
    get_scale_min_k4(s, scales, sc, m);
    int dot = 0;
    for (int l = 0; l < 32; ++l) dot += q[32 * s + l] * y.qs[32 * s + l];
    isum += sc * dot;
    imin += m * (y.bsums[2 * s] + y.bsums[2 * s + 1]);
  }
}

// Q4_K and Q5_K: the quants unpacked to value order (Q5_K's with their fifth bit), then kquant_sums.
template <class Block>
float dot_q45_K_scalar(const Block* x, const block_q8_K* y, std::size_t nb) {
  float sum = 0.0f, sum_min = 0.0f;
  std::uint8_t q[QK_K];
  for (std::size_t i = 0; i < nb; ++i) {
    // Bit b of qh[l] as the fifth bit (16) of a quant (always 0 for Q4_K).
    auto fifth = [&](int l, int b) {
      if constexpr (std::is_same_v<Block, block_q5_K>) return ((x[i].qh[l] >> b) & 1) << 4;
      else return 0;
    };
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) {
        q[64 * g + l] = static_cast<std::uint8_t>((x[i].qs[32 * g + l] & 0x0F) | fifth(l, 2 * g));
        q[64 * g + 32 + l] = static_cast<std::uint8_t>((x[i].qs[32 * g + l] >> 4) | fifth(l, 2 * g + 1));
      }
    int isum, imin;
    kquant_sums(q, x[i].scales, y[i], isum, imin);
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(isum);
    sum_min += half_to_f32(x[i].dmin) * y[i].d * static_cast<float>(imin);
  }
  return sum - sum_min;
}

float dot_q6_K_scalar(const block_q6_K* x, const block_q8_K* y, std::size_t nb) {
  float sum = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int half = 0; half < 2; ++half) {
      const std::uint8_t* ql = x[i].ql + 64 * half;
      const std::uint8_t* qh = x[i].qh + 32 * half;
      const std::int8_t* qy = y[i].qs + 128 * half;
      for (int k = 0; k < 4; ++k)
        for (int c = 0; c < 2; ++c) {  // 16 values of one sub-block share a scale
          int dot = 0;
          for (int l = 16 * c; l < 16 * c + 16; ++l) dot += q6_value(ql, qh, l, k) * qy[l + 32 * k];
          isum += x[i].scales[8 * half + 2 * k + c] * dot;
        }
    }
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(isum);
  }
  return sum;
}

template <class T>
const T* as(const void* p) {
  return static_cast<const T*>(p);
}

// ---- One row per type (ggml's type traits): what every entry point below looks up ----------------------
// Each column is a plain function over a row of n values (nb blocks); adapters below turn the typed
// block functions above into them. A new weight type is one row here (and one in dtype.cpp's kTypes), plus
// its block functions and kernels.
using ToFloat = void (*)(const void* src, float* dst, std::size_t n, std::size_t nb);
using FromFloat = void (*)(const float* src, void* dst, std::size_t n, std::size_t nb);
using ScalarDot = float (*)(const void* w, const void* x, std::size_t n, std::size_t nb);

// Where a block keeps its fp16 scales (byte offsets; −1: none), for first_nonfinite_scale.
struct ScaleFields {
  int d = -1, second = -1;
  const char* second_name = nullptr;
  std::uint16_t exp_mask = 0x7C00;  // fp16: an all-ones exponent is inf or NaN (bf16: 0x7F80)
};

struct QuantTraits {
  DType type;
  ToFloat to_float;
  FromFloat from_float;     // quantize_row: the reference quantizer (a float type: its conversion)
  FromFloat to_activation;  // quantize_activation: an activation type's quantizer (null: not one)
  DType dot_type;           // vec_dot_type: the type of the row a weight row is dotted with
  ScalarDot dot;            // vec_dot_scalar, the twin every kernel set is tested against (null: no dot)
  ScaleFields scales;       // d < 0: no scales to check (F32)
};

template <class B, void (*F)(const B*, float*, std::size_t)>
void blocks_to_float(const void* src, float* dst, std::size_t, std::size_t nb) { F(static_cast<const B*>(src), dst, nb); }
template <class B, void (*F)(const float*, B*, std::size_t)>
void blocks_from_float(const float* src, void* dst, std::size_t, std::size_t nb) { F(src, static_cast<B*>(dst), nb); }
template <class W, class X, float (*F)(const W*, const X*, std::size_t)>
float blocks_dot(const void* w, const void* x, std::size_t, std::size_t nb) { return F(as<W>(w), as<X>(x), nb); }

void f32_to_float(const void* src, float* dst, std::size_t n, std::size_t) { std::memcpy(dst, src, n * sizeof(float)); }
void f32_from_float(const float* src, void* dst, std::size_t n, std::size_t) { std::memcpy(dst, src, n * sizeof(float)); }
void f16_to_float(const void* src, float* dst, std::size_t n, std::size_t) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = half_to_f32(as<std::uint16_t>(src)[i]);
}
void f16_from_float(const float* src, void* dst, std::size_t n, std::size_t) {
  for (std::size_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(dst)[i] = f32_to_half(src[i]);
}
void bf16_to_float(const void* src, float* dst, std::size_t n, std::size_t) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(as<std::uint16_t>(src)[i]);
}
void bf16_from_float(const float* src, void* dst, std::size_t n, std::size_t) {
  for (std::size_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
}
float f32_dot(const void* w, const void* x, std::size_t n, std::size_t) { return dot_f32_scalar(as<float>(w), as<float>(x), n); }
float f16_dot(const void* w, const void* x, std::size_t n, std::size_t) {
  return dot_f16_scalar(as<std::uint16_t>(w), as<std::uint16_t>(x), n);
}
float bf16_dot(const void* w, const void* x, std::size_t n, std::size_t) {
  return dot_bf16_scalar(as<std::uint16_t>(w), as<std::uint16_t>(x), n);
}

constexpr int at(std::size_t offset) { return static_cast<int>(offset); }
constexpr ScaleFields kNoScales{};
constexpr ScaleFields kD{0, -1, nullptr};  // one fp16 scale first in the block

// clang-format off
constexpr QuantTraits kTraits[] = {
  // type          to_float                                                from_float (reference)                                    to_activation                                          dot_type        scalar dot                                                      scales
  {DType::F32,    f32_to_float,                                            f32_from_float,                                           f32_from_float,                                        DType::F32,     f32_dot,                                                       kNoScales},
  {DType::F16,    f16_to_float,                                            f16_from_float,                                           f16_from_float,                                        DType::F16,     f16_dot,                                                       kD},
  {DType::BF16,   bf16_to_float,                                           bf16_from_float,                                          bf16_from_float,                                       DType::BF16,    bf16_dot,                                                      {0, -1, nullptr, 0x7F80}},
  {DType::Q8_0,   blocks_to_float<block_q8_0, dequant_q8<block_q8_0>>,     blocks_from_float<block_q8_0, quant_q8_0_ref>,            blocks_from_float<block_q8_0, quant_q8_act<block_q8_0>>, DType::Q8_0, blocks_dot<block_q8_0, block_q8_0, dot_q8_0_scalar>,       kD},
  {DType::Q4_0,   blocks_to_float<block_q4_0, dequant_q4_0>,               blocks_from_float<block_q4_0, quant_q4_0_ref>,            nullptr,                                               DType::Q8_0,    blocks_dot<block_q4_0, block_q8_0, dot_q4_0_scalar>,           kD},
  {DType::Q4_1,   blocks_to_float<block_q4_1, dequant_q4_1>,               blocks_from_float<block_q4_1, quant_q4_1_ref>,            nullptr,                                               DType::Q8_1,    blocks_dot<block_q4_1, block_q8_1, dot_q4_1_scalar>,           {0, 2, "m"}},
  {DType::Q5_0,   blocks_to_float<block_q5_0, dequant_q5_0>,               blocks_from_float<block_q5_0, quant_q5_0_ref>,            nullptr,                                               DType::Q8_0,    blocks_dot<block_q5_0, block_q8_0, dot_q5_0_scalar>,           kD},
  {DType::Q5_1,   blocks_to_float<block_q5_1, dequant_q5_1>,               blocks_from_float<block_q5_1, quant_q5_1_ref>,            nullptr,                                               DType::Q8_1,    blocks_dot<block_q5_1, block_q8_1, dot_q5_1_scalar>,           {0, 2, "m"}},
  {DType::IQ4_NL, blocks_to_float<block_iq4_nl, dequant_iq4_nl>,           blocks_from_float<block_iq4_nl, quant_iq4_nl_ref>,        nullptr,                                               DType::Q8_0,    blocks_dot<block_iq4_nl, block_q8_0, dot_iq4_nl_scalar>,       kD},
  {DType::Q2_K,   blocks_to_float<block_q2_K, dequant_q2_K>,               blocks_from_float<block_q2_K, quant_q2_K_ref>,            nullptr,                                               DType::Q8_K,    blocks_dot<block_q2_K, block_q8_K, dot_q2_K_scalar>,
                  {at(offsetof(block_q2_K, d)), at(offsetof(block_q2_K, dmin)), "dmin"}},
  {DType::Q3_K,   blocks_to_float<block_q3_K, dequant_q3_K>,               blocks_from_float<block_q3_K, quant_q3_K_ref>,            nullptr,                                               DType::Q8_K,    blocks_dot<block_q3_K, block_q8_K, dot_q3_K_scalar>,
                  {at(offsetof(block_q3_K, d)), -1, nullptr}},
  {DType::Q4_K,   blocks_to_float<block_q4_K, dequant_q45_K<block_q4_K>>,  blocks_from_float<block_q4_K, quant_q4_K_ref>,            nullptr,                                               DType::Q8_K,    blocks_dot<block_q4_K, block_q8_K, dot_q45_K_scalar<block_q4_K>>, {0, 2, "dmin"}},
  {DType::Q5_K,   blocks_to_float<block_q5_K, dequant_q45_K<block_q5_K>>,  blocks_from_float<block_q5_K, quant_q5_K_ref>,            nullptr,                                               DType::Q8_K,    blocks_dot<block_q5_K, block_q8_K, dot_q45_K_scalar<block_q5_K>>, {0, 2, "dmin"}},
  {DType::Q6_K,   blocks_to_float<block_q6_K, dequant_q6_K>,               blocks_from_float<block_q6_K, quant_q6_K_ref>,            nullptr,                                               DType::Q8_K,    blocks_dot<block_q6_K, block_q8_K, dot_q6_K_scalar>,
                  {at(offsetof(block_q6_K, d)), -1, nullptr}},
  // activation-only types: the other side of some weight types' dots (never a file's weights)
  {DType::Q8_1,   blocks_to_float<block_q8_1, dequant_q8<block_q8_1>>,     blocks_from_float<block_q8_1, quant_q8_act<block_q8_1>>,  blocks_from_float<block_q8_1, quant_q8_act<block_q8_1>>, DType::Q8_1, nullptr,                                                     kNoScales},
  {DType::Q8_K,   blocks_to_float<block_q8_K, dequant_q8_K>,               blocks_from_float<block_q8_K, quant_q8_K>,                blocks_from_float<block_q8_K, quant_q8_K>,             DType::Q8_K,    nullptr,                                                       kNoScales},
};
// clang-format on

const QuantTraits& traits(const char* fn, DType t) {
  for (const auto& r : kTraits)
    if (r.type == t) return r;
  unsupported(fn, t);
}

}  // namespace

// ---- public API -----------------------------------------------------------------------------------

float fp16_to_fp32(std::uint16_t h) { return half_to_f32(h); }
std::uint16_t fp32_to_fp16(float f) { return f32_to_half(f); }
float bf16_to_fp32(std::uint16_t h) { return bf16_to_f32(h); }
std::uint16_t fp32_to_bf16(float f) { return f32_to_bf16(f); }

void dequantize_row(DType t, const void* src, float* dst, std::size_t n) {
  check_row("dequantize_row", t, n);
  traits("dequantize_row", t).to_float(src, dst, n, n / dtype_info(t).block_values);
}

void quantize_row(DType t, const float* src, void* dst, std::size_t n) {
  check_row("quantize_row", t, n);
  traits("quantize_row", t).from_float(src, dst, n, n / dtype_info(t).block_values);
}

DType vec_dot_type(DType w) {
  const QuantTraits& r = traits("vec_dot_type", w);
  if (!r.dot) unsupported("vec_dot_type", w);
  return r.dot_type;
}

void quantize_activation(DType t, const float* src, void* dst, std::size_t n) {
  check_row("quantize_activation", t, n);
  const QuantTraits& r = traits("quantize_activation", t);
  if (!r.to_activation) unsupported("quantize_activation", t);
  r.to_activation(src, dst, n, n / dtype_info(t).block_values);
}

float vec_dot_scalar(DType w, std::size_t n, const void* w_row, const void* x_row) {
  check_row("vec_dot", w, n);
  const QuantTraits& r = traits("vec_dot", w);
  if (!r.dot) unsupported("vec_dot", w);
  return r.dot(w_row, x_row, n, n / dtype_info(w).block_values);
}

std::size_t first_nonfinite_scale(DType t, const void* data, std::size_t count, const char** field) {
  const ScaleFields at = traits("first_nonfinite_scale", t).scales;
  if (at.d < 0) unsupported("first_nonfinite_scale", t);
  const std::uint16_t exp_mask = at.exp_mask;
  const std::size_t stride = dtype_info(t).block_bytes;
  const auto* p = static_cast<const unsigned char*>(data);
  auto bad = [&](std::size_t i, int off) {
    if (off < 0) return false;
    std::uint16_t h;
    std::memcpy(&h, p + i * stride + static_cast<std::size_t>(off), 2);
    return (h & exp_mask) == exp_mask;
  };
  // Runs of blocks with one test at the end of each (no branch per block); the run with a bad one is
  // searched again for the first.
  constexpr std::size_t kRun = 1024;
  for (std::size_t i0 = 0; i0 < count; i0 += kRun) {
    const std::size_t i1 = std::min(count, i0 + kRun);
    bool any = false;
    for (std::size_t i = i0; i < i1; ++i) any |= bad(i, at.d) | bad(i, at.second);
    if (!any) continue;
    for (std::size_t i = i0; i < i1; ++i) {
      if (bad(i, at.d)) {
        *field = t == DType::F16 || t == DType::BF16 ? "value" : "d";
        return i;
      }
      if (bad(i, at.second)) {
        *field = at.second_name;
        return i;
      }
    }
  }
  return count;
}

float vec_dot(DType w, std::size_t n, const void* w_row, const void* x_row) {
  check_row("vec_dot", w, n);
  if (!traits("vec_dot", w).dot) unsupported("vec_dot", w);
  return kernels::active_set().vec_dot(w, n, w_row, x_row);
}

}  // namespace glassbox::quant
