// ggml's weight types: fp16/bf16 conversion, (de)quantization of rows, and per-type dot products
// (plain reference versions plus SSE4.1/AVX2 + xsimd versions), following ggml's formulas.
#include "glassbox/quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include <xsimd/xsimd.hpp>

#include "glassbox/error.hpp"

#if defined(__SSE4_1__)
#include <immintrin.h>
#endif

namespace glassbox::quant {

namespace {

std::uint32_t f32_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float f32_from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The rows handed to us come from model files, so a wrong length is a bad file, not a crash.
void check_row(const char* fn, DType t, std::size_t n) {
  const auto& info = dtype_info(t);
  if (n % info.block_values != 0)
    throw ModelError(std::string(fn) + ": row of " + std::to_string(n) + " values is not a multiple of the " +
                     std::string(info.name) + " block size " + std::to_string(info.block_values));
}

// The conversions, inline here: the public functions are exported, so calls to them from inside
// the shared library would go through the PLT and could not be inlined into the block loops.
inline float half_to_f32(std::uint16_t h) {
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

inline float bf16_to_f32(std::uint16_t h) { return f32_from_bits(static_cast<std::uint32_t>(h) << 16); }

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

// The 8 six-bit scales and 8 six-bit mins of a Q4_K/Q5_K super-block, packed in 12 bytes:
//   bytes 0..3:  low 6 bits = scale of sub-blocks 0..3, top 2 bits = high bits of scale 4..7
//   bytes 4..7:  low 6 bits = min   of sub-blocks 0..3, top 2 bits = high bits of min   4..7
//   bytes 8..11: low nibble = low 4 bits of scale 4..7, high nibble = low 4 bits of min 4..7
void get_scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& sc, std::uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<std::uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// ---- dequantization (ggml's dequantize_row_*, same operation order, so bit-identical) ---------

void dequant_q8_0(const block_q8_0* x, float* y, std::size_t nb) {
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

void dequant_q4_K(const block_q4_K* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const std::uint8_t* q = x[i].qs;
    const float d = half_to_f32(x[i].d);
    const float dmin = half_to_f32(x[i].dmin);
    for (int is = 0; is < 8; is += 2, q += 32) {  // 64 values: two sub-blocks share 32 bytes
      std::uint8_t sc, m;
      get_scale_min_k4(is, x[i].scales, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(is + 1, x[i].scales, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0x0F) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void dequant_q5_K(const block_q5_K* x, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) {
    const std::uint8_t* ql = x[i].qs;
    const std::uint8_t* qh = x[i].qh;
    const float d = half_to_f32(x[i].d);
    const float dmin = half_to_f32(x[i].dmin);
    std::uint8_t u1 = 1, u2 = 2;  // the qh bits of the current pair of sub-blocks
    for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      std::uint8_t sc, m;
      get_scale_min_k4(is, x[i].scales, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(is + 1, x[i].scales, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0x0F) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
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

// ggml-cpu's quantize_row_q8_0 as its x86 SIMD path computes it: id = 127/amax (not 1/d), and
// _mm256_round_ps(_MM_ROUND_NEAREST): ties to even. The conversion saturates to int8.
void quant_q8_0_act(const float* x, block_q8_0* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, x += QK8_0) {
    float amax = 0.0f;
    for (std::size_t j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = f32_to_half(d);
    for (std::size_t j = 0; j < QK8_0; ++j) {
      const float q = std::nearbyint(x[j] * id);  // default rounding mode: nearest, ties to even
      y[i].qs[j] = static_cast<std::int8_t>(std::clamp(q, -128.0f, 127.0f));
    }
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

float dot_q4_K_scalar(const block_q4_K* x, const block_q8_K* y, std::size_t nb) {
  float sum = 0.0f, sum_min = 0.0f;
  std::uint8_t q[QK_K];
  for (std::size_t i = 0; i < nb; ++i) {
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) {
        q[64 * g + l] = x[i].qs[32 * g + l] & 0x0F;
        q[64 * g + 32 + l] = x[i].qs[32 * g + l] >> 4;
      }
    int isum, imin;
    kquant_sums(q, x[i].scales, y[i], isum, imin);
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(isum);
    sum_min += half_to_f32(x[i].dmin) * y[i].d * static_cast<float>(imin);
  }
  return sum - sum_min;
}

float dot_q5_K_scalar(const block_q5_K* x, const block_q8_K* y, std::size_t nb) {
  float sum = 0.0f, sum_min = 0.0f;
  std::uint8_t q[QK_K];
  for (std::size_t i = 0; i < nb; ++i) {
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) {
        q[64 * g + l] = static_cast<std::uint8_t>((x[i].qs[32 * g + l] & 0x0F) | (((x[i].qh[l] >> (2 * g)) & 1) << 4));
        q[64 * g + 32 + l] = static_cast<std::uint8_t>((x[i].qs[32 * g + l] >> 4) | (((x[i].qh[l] >> (2 * g + 1)) & 1) << 4));
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

// ---- vectorized dot products --------------------------------------------------------------------

using fbatch = xsimd::batch<float>;
constexpr std::size_t FW = fbatch::size;

// Four independent accumulators hide the FMA latency.
float dot_f32_simd(const float* a, const float* b, std::size_t n) {
  fbatch s0(0.0f), s1(0.0f), s2(0.0f), s3(0.0f);
  std::size_t i = 0;
  for (; i + 4 * FW <= n; i += 4 * FW) {
    s0 = xsimd::fma(fbatch::load_unaligned(a + i), fbatch::load_unaligned(b + i), s0);
    s1 = xsimd::fma(fbatch::load_unaligned(a + i + FW), fbatch::load_unaligned(b + i + FW), s1);
    s2 = xsimd::fma(fbatch::load_unaligned(a + i + 2 * FW), fbatch::load_unaligned(b + i + 2 * FW), s2);
    s3 = xsimd::fma(fbatch::load_unaligned(a + i + 3 * FW), fbatch::load_unaligned(b + i + 3 * FW), s3);
  }
  for (; i + FW <= n; i += FW) s0 = xsimd::fma(fbatch::load_unaligned(a + i), fbatch::load_unaligned(b + i), s0);
  float s = xsimd::hadd((s0 + s1) + (s2 + s3));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Widens up to kChunk halves into floats (F16C when the build has it), then runs the f32 kernel:
// the conversion is exact, so only the summation order differs from the scalar version.
constexpr std::size_t kChunk = 256;

void widen_f16(const std::uint16_t* h, float* f, std::size_t n) {
  std::size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
#elif defined(__SSE4_1__)
  // half_to_f32 on 4 lanes at once, the branches turned into masks.
  const __m128i zero = _mm_setzero_si128(), exp_mask = _mm_set1_epi32(0x0F800000);
  const __m128i rebias = _mm_set1_epi32((127 - 15) << 23), one_exp = _mm_set1_epi32(1 << 23);
  const __m128 magic = _mm_castsi128_ps(_mm_set1_epi32(113 << 23));
  for (; i + 4 <= n; i += 4) {
    const __m128i v = _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(h + i)), zero);
    __m128i o = _mm_slli_epi32(_mm_and_si128(v, _mm_set1_epi32(0x7FFF)), 13);
    const __m128i exp = _mm_and_si128(o, exp_mask);
    o = _mm_add_epi32(o, rebias);
    o = _mm_add_epi32(o, _mm_and_si128(_mm_cmpeq_epi32(exp, exp_mask), rebias));  // inf/NaN
    const __m128i sub = _mm_cmpeq_epi32(exp, zero);                                // subnormal/zero
    const __m128 renorm = _mm_sub_ps(_mm_castsi128_ps(_mm_add_epi32(o, one_exp)), magic);
    const __m128 r = _mm_blendv_ps(_mm_castsi128_ps(o), renorm, _mm_castsi128_ps(sub));
    const __m128i sign = _mm_slli_epi32(_mm_and_si128(v, _mm_set1_epi32(0x8000)), 16);
    _mm_storeu_ps(f + i, _mm_or_ps(r, _mm_castsi128_ps(sign)));
  }
#endif
  for (; i < n; ++i) f[i] = half_to_f32(h[i]);
}

void widen_bf16(const std::uint16_t* h, float* f, std::size_t n) {
  std::size_t i = 0;
#if defined(__SSE4_1__)
  for (; i + 8 <= n; i += 8) {  // interleaving zeros below each half is the shift by 16
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i));
    _mm_storeu_ps(f + i, _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), v)));
    _mm_storeu_ps(f + i + 4, _mm_castsi128_ps(_mm_unpackhi_epi16(_mm_setzero_si128(), v)));
  }
#endif
  for (; i < n; ++i) f[i] = bf16_to_f32(h[i]);
}

template <void (*Widen)(const std::uint16_t*, float*, std::size_t)>
float dot_half_simd(const std::uint16_t* a, const std::uint16_t* b, std::size_t n) {
  alignas(64) float fa[kChunk], fb[kChunk];
  float s = 0.0f;
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t m = std::min(kChunk, n - i);
    Widen(a + i, fa, m);
    Widen(b + i, fb, m);
    s += dot_f32_simd(fa, fb, m);
  }
  return s;
}

#if defined(__SSE4_1__)
// Integer block dots. Every int8·int8 product fits int16 and every pair sum fits int32, so
// sign-extending to 16 bits and using madd (pairwise multiply-add) is exact for any input bytes.
// (ggml's maddubs trick is faster but saturates for a −128 weight byte.)
#if defined(__AVX2__)
using ivec = __m256i;
ivec izero() { return _mm256_setzero_si256(); }
ivec iadd(ivec a, ivec b) { return _mm256_add_epi32(a, b); }
ivec iscale(ivec a, int s) { return _mm256_mullo_epi32(a, _mm256_set1_epi32(s)); }
// Σ a·b over 16 signed bytes, as int32 partial sums.
ivec dot16(__m128i a, __m128i b) { return _mm256_madd_epi16(_mm256_cvtepi8_epi16(a), _mm256_cvtepi8_epi16(b)); }
int hsum128(__m128i s) {
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
int hsum(ivec v) { return hsum128(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1))); }
#else
using ivec = __m128i;
ivec izero() { return _mm_setzero_si128(); }
ivec iadd(ivec a, ivec b) { return _mm_add_epi32(a, b); }
ivec iscale(ivec a, int s) { return _mm_mullo_epi32(a, _mm_set1_epi32(s)); }
ivec dot16(__m128i a, __m128i b) {
  const __m128i lo = _mm_madd_epi16(_mm_cvtepi8_epi16(a), _mm_cvtepi8_epi16(b));
  const __m128i hi = _mm_madd_epi16(_mm_cvtepi8_epi16(_mm_srli_si128(a, 8)), _mm_cvtepi8_epi16(_mm_srli_si128(b, 8)));
  return _mm_add_epi32(lo, hi);
}
int hsum(ivec s) {
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
#endif

__m128i load16(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
// Bytes → their low / high nibbles (a 16-bit shift moves bits across bytes, the mask removes them).
__m128i lo_nibbles(__m128i v) { return _mm_and_si128(v, _mm_set1_epi8(0x0F)); }
__m128i hi_nibbles(__m128i v) { return _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F)); }

// Blocks are independent; four float accumulators, picked round-robin, keep the adds independent.
float dot_q8_0_simd(const block_q8_0* x, const block_q8_0* y, std::size_t nb) {
  float acc[4] = {0, 0, 0, 0};
  for (std::size_t i = 0; i < nb; ++i) {
    const int sumi = hsum(iadd(dot16(load16(x[i].qs), load16(y[i].qs)), dot16(load16(x[i].qs + 16), load16(y[i].qs + 16))));
    acc[i & 3] += static_cast<float>(sumi) * (half_to_f32(x[i].d) * half_to_f32(y[i].d));
  }
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

float dot_q4_0_simd(const block_q4_0* x, const block_q8_0* y, std::size_t nb) {
  const __m128i eight = _mm_set1_epi8(8);
  float acc[4] = {0, 0, 0, 0};
  for (std::size_t i = 0; i < nb; ++i) {
    const __m128i q = load16(x[i].qs);
    const __m128i lo = _mm_sub_epi8(lo_nibbles(q), eight);  // values 0..15
    const __m128i hi = _mm_sub_epi8(hi_nibbles(q), eight);  // values 16..31
    const int sumi = hsum(iadd(dot16(lo, load16(y[i].qs)), dot16(hi, load16(y[i].qs + 16))));
    acc[i & 3] += static_cast<float>(sumi) * half_to_f32(x[i].d) * half_to_f32(y[i].d);
  }
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// Σ_s m[s]·(bsums[2s] + bsums[2s+1]) for Q4_K/Q5_K, and the 8 sub-block scales.
int kquant_mins(const std::uint8_t* scales, const block_q8_K& y, int sc[8]) {
  int imin = 0;
  for (int s = 0; s < 8; ++s) {
    std::uint8_t a, m;
    get_scale_min_k4(s, scales, a, m);
    sc[s] = a;
    imin += m * (y.bsums[2 * s] + y.bsums[2 * s + 1]);
  }
  return imin;
}

float dot_q4_K_simd(const block_q4_K* x, const block_q8_K* y, std::size_t nb) {
  float sum = 0.0f, sum_min = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int sc[8];
    const int imin = kquant_mins(x[i].scales, y[i], sc);
    ivec acc = izero();
    for (int g = 0; g < 4; ++g) {  // 32 bytes → sub-blocks 2g (low nibbles) and 2g+1 (high nibbles)
      const __m128i q0 = load16(x[i].qs + 32 * g), q1 = load16(x[i].qs + 32 * g + 16);
      const std::int8_t* qy = y[i].qs + 64 * g;
      const ivec lo = iadd(dot16(lo_nibbles(q0), load16(qy)), dot16(lo_nibbles(q1), load16(qy + 16)));
      const ivec hi = iadd(dot16(hi_nibbles(q0), load16(qy + 32)), dot16(hi_nibbles(q1), load16(qy + 48)));
      acc = iadd(acc, iadd(iscale(lo, sc[2 * g]), iscale(hi, sc[2 * g + 1])));
    }
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(hsum(acc));
    sum_min += half_to_f32(x[i].dmin) * y[i].d * static_cast<float>(imin);
  }
  return sum - sum_min;
}

float dot_q5_K_simd(const block_q5_K* x, const block_q8_K* y, std::size_t nb) {
  const __m128i sixteen = _mm_set1_epi8(16);
  float sum = 0.0f, sum_min = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int sc[8];
    const int imin = kquant_mins(x[i].scales, y[i], sc);
    const __m128i h0 = load16(x[i].qh), h1 = load16(x[i].qh + 16);
    // 16 where bit `bit` of the qh byte is set, else 0.
    auto fifth = [&](__m128i h, int bit) {
      const __m128i m = _mm_set1_epi8(static_cast<char>(1 << bit));
      return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(h, m), m), sixteen);
    };
    ivec acc = izero();
    for (int g = 0; g < 4; ++g) {
      const __m128i q0 = load16(x[i].qs + 32 * g), q1 = load16(x[i].qs + 32 * g + 16);
      const std::int8_t* qy = y[i].qs + 64 * g;
      const __m128i lo0 = _mm_or_si128(lo_nibbles(q0), fifth(h0, 2 * g));
      const __m128i lo1 = _mm_or_si128(lo_nibbles(q1), fifth(h1, 2 * g));
      const __m128i hi0 = _mm_or_si128(hi_nibbles(q0), fifth(h0, 2 * g + 1));
      const __m128i hi1 = _mm_or_si128(hi_nibbles(q1), fifth(h1, 2 * g + 1));
      const ivec lo = iadd(dot16(lo0, load16(qy)), dot16(lo1, load16(qy + 16)));
      const ivec hi = iadd(dot16(hi0, load16(qy + 32)), dot16(hi1, load16(qy + 48)));
      acc = iadd(acc, iadd(iscale(lo, sc[2 * g]), iscale(hi, sc[2 * g + 1])));
    }
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(hsum(acc));
    sum_min += half_to_f32(x[i].dmin) * y[i].d * static_cast<float>(imin);
  }
  return sum - sum_min;
}

float dot_q6_K_simd(const block_q6_K* x, const block_q8_K* y, std::size_t nb) {
  const __m128i m03 = _mm_set1_epi8(3), m32 = _mm_set1_epi8(32);
  // (low 4 bits) | (2 high bits << 4), minus 32. The bits of h are already shifted into place 0..1.
  auto q6 = [&](__m128i nib, __m128i h) {
    return _mm_sub_epi8(_mm_or_si128(nib, _mm_slli_epi16(_mm_and_si128(h, m03), 4)), m32);
  };
  float sum = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    ivec acc = izero();
    for (int half = 0; half < 2; ++half) {
      const std::uint8_t* ql = x[i].ql + 64 * half;
      const std::uint8_t* qh = x[i].qh + 32 * half;
      const std::int8_t* sc = x[i].scales + 8 * half;
      const std::int8_t* qy = y[i].qs + 128 * half;
      for (int c = 0; c < 2; ++c) {  // values 16c..16c+15 of each of the four 32-value rows
        const __m128i l0 = load16(ql + 16 * c), l1 = load16(ql + 32 + 16 * c), h = load16(qh + 16 * c);
        const __m128i v0 = q6(lo_nibbles(l0), h);
        const __m128i v1 = q6(lo_nibbles(l1), _mm_srli_epi16(h, 2));
        const __m128i v2 = q6(hi_nibbles(l0), _mm_srli_epi16(h, 4));
        const __m128i v3 = q6(hi_nibbles(l1), _mm_srli_epi16(h, 6));
        acc = iadd(acc, iscale(dot16(v0, load16(qy + 16 * c)), sc[c]));
        acc = iadd(acc, iscale(dot16(v1, load16(qy + 32 + 16 * c)), sc[c + 2]));
        acc = iadd(acc, iscale(dot16(v2, load16(qy + 64 + 16 * c)), sc[c + 4]));
        acc = iadd(acc, iscale(dot16(v3, load16(qy + 96 + 16 * c)), sc[c + 6]));
      }
    }
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(hsum(acc));
  }
  return sum;
}
#else
// No SSE4.1: the integer parts run as the plain loops.
float dot_q8_0_simd(const block_q8_0* x, const block_q8_0* y, std::size_t nb) { return dot_q8_0_scalar(x, y, nb); }
float dot_q4_0_simd(const block_q4_0* x, const block_q8_0* y, std::size_t nb) { return dot_q4_0_scalar(x, y, nb); }
float dot_q4_K_simd(const block_q4_K* x, const block_q8_K* y, std::size_t nb) { return dot_q4_K_scalar(x, y, nb); }
float dot_q5_K_simd(const block_q5_K* x, const block_q8_K* y, std::size_t nb) { return dot_q5_K_scalar(x, y, nb); }
float dot_q6_K_simd(const block_q6_K* x, const block_q8_K* y, std::size_t nb) { return dot_q6_K_scalar(x, y, nb); }
#endif

template <class T>
const T* as(const void* p) {
  return static_cast<const T*>(p);
}

}  // namespace

// ---- public API -----------------------------------------------------------------------------------

float fp16_to_fp32(std::uint16_t h) { return half_to_f32(h); }
std::uint16_t fp32_to_fp16(float f) { return f32_to_half(f); }
float bf16_to_fp32(std::uint16_t h) { return bf16_to_f32(h); }
std::uint16_t fp32_to_bf16(float f) { return f32_to_bf16(f); }

void dequantize_row(DType t, const void* src, float* dst, std::size_t n) {
  check_row("dequantize_row", t, n);
  const std::size_t nb = n / dtype_info(t).block_values;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::F16:
      for (std::size_t i = 0; i < n; ++i) dst[i] = half_to_f32(as<std::uint16_t>(src)[i]);
      return;
    case DType::BF16:
      for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(as<std::uint16_t>(src)[i]);
      return;
    case DType::Q8_0: dequant_q8_0(as<block_q8_0>(src), dst, nb); return;
    case DType::Q4_0: dequant_q4_0(as<block_q4_0>(src), dst, nb); return;
    case DType::Q4_K: dequant_q4_K(as<block_q4_K>(src), dst, nb); return;
    case DType::Q5_K: dequant_q5_K(as<block_q5_K>(src), dst, nb); return;
    case DType::Q6_K: dequant_q6_K(as<block_q6_K>(src), dst, nb); return;
    case DType::Q8_K: dequant_q8_K(as<block_q8_K>(src), dst, nb); return;
  }
  unsupported("dequantize_row", t);
}

void quantize_row(DType t, const float* src, void* dst, std::size_t n) {
  check_row("quantize_row", t, n);
  const std::size_t nb = n / dtype_info(t).block_values;
  switch (t) {
    case DType::Q8_0: quant_q8_0_ref(src, static_cast<block_q8_0*>(dst), nb); return;
    case DType::Q4_0: quant_q4_0_ref(src, static_cast<block_q4_0*>(dst), nb); return;
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_K: quantize_activation(t, src, dst, n); return;
    default: unsupported("quantize_row", t);
  }
}

DType vec_dot_type(DType w) {
  switch (w) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return w;
    case DType::Q8_0:
    case DType::Q4_0: return DType::Q8_0;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return DType::Q8_K;
    default: unsupported("vec_dot_type", w);
  }
}

void quantize_activation(DType t, const float* src, void* dst, std::size_t n) {
  check_row("quantize_activation", t, n);
  const std::size_t nb = n / dtype_info(t).block_values;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::F16:
      for (std::size_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(dst)[i] = f32_to_half(src[i]);
      return;
    case DType::BF16:
      for (std::size_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
      return;
    case DType::Q8_0: quant_q8_0_act(src, static_cast<block_q8_0*>(dst), nb); return;
    case DType::Q8_K: quant_q8_K(src, static_cast<block_q8_K*>(dst), nb); return;
    default: unsupported("quantize_activation", t);
  }
}

float vec_dot_scalar(DType w, std::size_t n, const void* w_row, const void* x_row) {
  check_row("vec_dot", w, n);
  const std::size_t nb = n / dtype_info(w).block_values;
  switch (w) {
    case DType::F32: return dot_f32_scalar(as<float>(w_row), as<float>(x_row), n);
    case DType::F16: return dot_f16_scalar(as<std::uint16_t>(w_row), as<std::uint16_t>(x_row), n);
    case DType::BF16: return dot_bf16_scalar(as<std::uint16_t>(w_row), as<std::uint16_t>(x_row), n);
    case DType::Q8_0: return dot_q8_0_scalar(as<block_q8_0>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q4_0: return dot_q4_0_scalar(as<block_q4_0>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q4_K: return dot_q4_K_scalar(as<block_q4_K>(w_row), as<block_q8_K>(x_row), nb);
    case DType::Q5_K: return dot_q5_K_scalar(as<block_q5_K>(w_row), as<block_q8_K>(x_row), nb);
    case DType::Q6_K: return dot_q6_K_scalar(as<block_q6_K>(w_row), as<block_q8_K>(x_row), nb);
    default: unsupported("vec_dot", w);
  }
}

float vec_dot(DType w, std::size_t n, const void* w_row, const void* x_row) {
  check_row("vec_dot", w, n);
  const std::size_t nb = n / dtype_info(w).block_values;
  switch (w) {
    case DType::F32: return dot_f32_simd(as<float>(w_row), as<float>(x_row), n);
    case DType::F16: return dot_half_simd<widen_f16>(as<std::uint16_t>(w_row), as<std::uint16_t>(x_row), n);
    case DType::BF16: return dot_half_simd<widen_bf16>(as<std::uint16_t>(w_row), as<std::uint16_t>(x_row), n);
    case DType::Q8_0: return dot_q8_0_simd(as<block_q8_0>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q4_0: return dot_q4_0_simd(as<block_q4_0>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q4_K: return dot_q4_K_simd(as<block_q4_K>(w_row), as<block_q8_K>(x_row), nb);
    case DType::Q5_K: return dot_q5_K_simd(as<block_q5_K>(w_row), as<block_q8_K>(x_row), nb);
    case DType::Q6_K: return dot_q6_K_simd(as<block_q6_K>(w_row), as<block_q8_K>(x_row), nb);
    default: unsupported("vec_dot", w);
  }
}

}  // namespace glassbox::quant
