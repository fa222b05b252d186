// The NEON kernel sets (aarch64), compiled once per level (core/CMakeLists.txt: -march=armv8-a for
// "neon", +dotprod for "neon-dotprod" (SDOT), +dotprod+i8mm for "neon-i8mm" (SMMLA); GB_ISA_TABLE names
// the table each build defines). kernels.cpp picks one at run time (platform/cpu_arm.cpp).
//
// What each entry does, and the bits it keeps (tests/test_kernels.cpp, tests/test_quant.cpp):
//  - the quantized dots of the 32-value types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): each block's
//    integer Σ w·y in vectors (exact in any order: widening multiplies, SDOT or SMMLA), then the floats
//    combined block by block exactly as quant.cpp's scalar twin does: vec_dot_scalar's bits, so an
//    arm64 machine gives the same numbers as the scalar set on any machine;
//  - prefill's quantized products (qmatmul_rows): with i8mm two weight rows by two activation rows
//    per SMMLA, the same integers and the same float steps per output, so vec_dot's bits;
//  - F32 dot, matrix products and attention scores: four accumulators of four lanes with FMA (as the
//    x86 sets, another summation order than the scalar twin: tested to a tolerance);
//  - axpy / axpys: one FMA per element, lanes and tail alike, so every set's element chains agree;
//  - Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: each sub-block's integer dot in vectors, the scales, minimums and
//    floats as the scalar twin: vec_dot_scalar's bits;
//  - F16 and BF16 dots (and so their matrix products): the halves widened in registers (exact), then
//    the F32 dot's lanes and order: nk::dot of the widened rows bit for bit, the scalar twin to a
//    tolerance (as the x86 sets' widen-then-dot);
//  - RMSNorm, softmax, exp and the rest: the scalar set's entries (not yet written in NEON;
//    docs/performance.md).
#include <arm_neon.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "glassbox/kernels.hpp"
#include "glassbox/quant.hpp"
#include "kernel_set.hpp"
#include "quant_bits.hpp"

#ifndef GB_ISA_TABLE
#error "build with -DGB_ISA_TABLE=kernel_set_<isa> -DGB_ISA_NAME=\"<isa>\""
#endif

namespace glassbox::kernels {

// Everything but the table has internal linkage: a function compiled here with +i8mm must not be
// merged by the linker with the plain build's copy and run on a CPU without it.
// (Named inside: kernels.hpp's public dot, axpy, ... would otherwise make the names ambiguous.)
namespace {
namespace nk {

using namespace glassbox::quant;

// ---- float32 -------------------------------------------------------------------------------------

// Four independent accumulators of 4 lanes hide the FMA latency; the lanes are summed pairwise, then
// the scalar tail in order.
float dot(const float* a, const float* b, std::size_t n) {
  float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
    s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
  }
  for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Every output is dot's number whatever the rows or blocking (the contract of kernel_set.hpp).
void matmul_rows(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d, std::size_t i0,
                 std::size_t i1, const Blocking&) {
  for (std::size_t i = i0; i < i1; ++i)
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = dot(x + t * k, w + i * k, k);
}

void dots(float* out, const float* q, const float* rows, std::size_t stride, std::size_t count, std::size_t n, float scale) {
  for (std::size_t s = 0; s < count; ++s) out[s] = dot(q, rows + s * stride, n) * scale;
}

// y = fma(a, x, y) element by element (std::fma is one FMADD here), the same in lanes and tail.
void axpy(float* y, float a, const float* x, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
  for (; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

// axpy's arithmetic for each row in order, y kept in registers 16 values at a time.
void axpys(float* y, const float* a, const float* rows, std::size_t stride, std::size_t count, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    float32x4_t y0 = vld1q_f32(y + i), y1 = vld1q_f32(y + i + 4), y2 = vld1q_f32(y + i + 8), y3 = vld1q_f32(y + i + 12);
    for (std::size_t s = 0; s < count; ++s) {
      const float* r = rows + s * stride + i;
      y0 = vfmaq_n_f32(y0, vld1q_f32(r), a[s]);
      y1 = vfmaq_n_f32(y1, vld1q_f32(r + 4), a[s]);
      y2 = vfmaq_n_f32(y2, vld1q_f32(r + 8), a[s]);
      y3 = vfmaq_n_f32(y3, vld1q_f32(r + 12), a[s]);
    }
    vst1q_f32(y + i, y0);
    vst1q_f32(y + i + 4, y1);
    vst1q_f32(y + i + 8, y2);
    vst1q_f32(y + i + 12, y3);
  }
  for (; i < n; ++i)
    for (std::size_t s = 0; s < count; ++s) y[i] = std::fma(a[s], rows[s * stride + i], y[i]);
}

void axpys_rows(float* y, std::size_t y_stride, const float* a, std::size_t a_stride, std::size_t nq, const float* rows,
                std::size_t stride, std::size_t count, std::size_t n) {
  for (std::size_t r = 0; r < nq; ++r) axpys(y + r * y_stride, a + r * a_stride, rows, stride, count, n);
}

std::size_t fma_probe(std::size_t iters, float* sink) {
  float32x4_t acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = vdupq_n_f32(1.0f + 0.01f * static_cast<float>(j));
  const float32x4_t m = vdupq_n_f32(0.9999999f), c = vdupq_n_f32(1e-7f);
  for (std::size_t it = 0; it < iters; ++it)
    for (int j = 0; j < 12; ++j) acc[j] = vfmaq_f32(c, acc[j], m);
  float32x4_t s = acc[0];
  for (int j = 1; j < 12; ++j) s = vaddq_f32(s, acc[j]);
  *sink = vaddvq_f32(s);
  return 4;
}

// ---- F16 and BF16: widened in registers, then dot's arithmetic ------------------------------------

// Four halves as floats: FCVTL (exact for every finite half, subnormals included) or, for BF16, the
// 16 bits shifted into the top of a float (the definition). The tails use quant_bits.hpp's conversions.
struct WidenF16 {
  static float32x4_t four(const std::uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static float one(std::uint16_t h) { return half_to_f32(h); }
};
struct WidenBF16 {
  static float32x4_t four(const std::uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  static float one(std::uint16_t h) { return bf16_to_f32(h); }
};

// dot's accumulators, lanes and tail over the widened values: nk::dot of the two rows as floats, bit
// for bit (tests/test_kernels.cpp), so another order than the scalar twin (tested to a tolerance, as
// the x86 sets' widen-then-dot). No buffer: each 16 halves are widened and multiplied in registers.
template <class W>
float dot_half(const std::uint16_t* a, const std::uint16_t* b, std::size_t n) {
  float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = vfmaq_f32(s0, W::four(a + i), W::four(b + i));
    s1 = vfmaq_f32(s1, W::four(a + i + 4), W::four(b + i + 4));
    s2 = vfmaq_f32(s2, W::four(a + i + 8), W::four(b + i + 8));
    s3 = vfmaq_f32(s3, W::four(a + i + 12), W::four(b + i + 12));
  }
  for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, W::four(a + i), W::four(b + i));
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
  for (; i < n; ++i) s += W::one(a[i]) * W::one(b[i]);
  return s;
}

// ---- the 32-value quantized types: integers in vectors, floats as the scalar twin ------------------

// A weight block's 32 values as signed bytes, values 0..15 in `lo` and 16..31 in `hi` (the order of
// the activation block's qs), and the block's float step: the scalar twin's (quant.cpp) expression.
struct Q8_0 {
  using W = block_q8_0;
  using Y = block_q8_0;
  static void unpack(const W& x, int8x16_t& lo, int8x16_t& hi) {
    lo = vld1q_s8(x.qs);
    hi = vld1q_s8(x.qs + 16);
  }
  static float step(float s, int sumi, const W& x, const Y& y) {
    return s + static_cast<float>(sumi) * (half_to_f32(x.d) * half_to_f32(y.d));
  }
};
inline void nibbles(const std::uint8_t* qs, uint8x16_t& lo, uint8x16_t& hi) {
  const uint8x16_t q = vld1q_u8(qs);
  lo = vandq_u8(q, vdupq_n_u8(0x0F));
  hi = vshrq_n_u8(q, 4);
}
struct Q4_0 {
  using W = block_q4_0;
  using Y = block_q8_0;
  static void unpack(const W& x, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t l, h;
    nibbles(x.qs, l, h);
    lo = vsubq_s8(vreinterpretq_s8_u8(l), vdupq_n_s8(8));
    hi = vsubq_s8(vreinterpretq_s8_u8(h), vdupq_n_s8(8));
  }
  static float step(float s, int sumi, const W& x, const Y& y) {
    return s + static_cast<float>(sumi) * half_to_f32(x.d) * half_to_f32(y.d);
  }
};
struct Q4_1 {
  using W = block_q4_1;
  using Y = block_q8_1;
  static void unpack(const W& x, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t l, h;
    nibbles(x.qs, l, h);
    lo = vreinterpretq_s8_u8(l);
    hi = vreinterpretq_s8_u8(h);
  }
  static float step(float s, int sumi, const W& x, const Y& y) {
    return s + (half_to_f32(x.d) * half_to_f32(y.d) * static_cast<float>(sumi) + half_to_f32(x.m) * half_to_f32(y.s));
  }
};
// The fifth bits of a Q5 block as 16 (bit j of qh → value j).
inline void fifth_bits(const std::uint8_t* qh4, uint8x16_t& lo, uint8x16_t& hi) {
  std::uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  static constexpr std::uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bit = vld1q_u8(kBit);
  const uint8x16_t b01 = vcombine_u8(vdup_n_u8(static_cast<std::uint8_t>(qh)), vdup_n_u8(static_cast<std::uint8_t>(qh >> 8)));
  const uint8x16_t b23 = vcombine_u8(vdup_n_u8(static_cast<std::uint8_t>(qh >> 16)), vdup_n_u8(static_cast<std::uint8_t>(qh >> 24)));
  lo = vandq_u8(vtstq_u8(b01, bit), vdupq_n_u8(16));
  hi = vandq_u8(vtstq_u8(b23, bit), vdupq_n_u8(16));
}
template <class Blk, int Bias>
void unpack_q5(const Blk& x, int8x16_t& lo, int8x16_t& hi) {
  uint8x16_t l, h, fl, fh;
  nibbles(x.qs, l, h);
  fifth_bits(x.qh, fl, fh);
  lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l, fl)), vdupq_n_s8(Bias));
  hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(h, fh)), vdupq_n_s8(Bias));
}
struct Q5_0 {
  using W = block_q5_0;
  using Y = block_q8_0;
  static void unpack(const W& x, int8x16_t& lo, int8x16_t& hi) { unpack_q5<W, 16>(x, lo, hi); }
  static float step(float s, int sumi, const W& x, const Y& y) {
    return s + static_cast<float>(sumi) * (half_to_f32(x.d) * half_to_f32(y.d));
  }
};
struct Q5_1 {
  using W = block_q5_1;
  using Y = block_q8_1;
  static void unpack(const W& x, int8x16_t& lo, int8x16_t& hi) { unpack_q5<W, 0>(x, lo, hi); }
  static float step(float s, int sumi, const W& x, const Y& y) {
    return s + (half_to_f32(x.d) * half_to_f32(y.d) * static_cast<float>(sumi) + half_to_f32(x.m) * half_to_f32(y.s));
  }
};
struct IQ4_NL {
  using W = block_iq4_nl;
  using Y = block_q8_0;
  static void unpack(const W& x, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t l, h;
    nibbles(x.qs, l, h);
    const int8x16_t table = vld1q_s8(kvalues_iq4nl);
    lo = vqtbl1q_s8(table, l);
    hi = vqtbl1q_s8(table, h);
  }
  static float step(float s, int sumi, const W& x, const Y& y) {
    return s + static_cast<float>(sumi) * (half_to_f32(x.d) * half_to_f32(y.d));
  }
};

// Σ a·b over 16 signed bytes into int32 lanes: SDOT where the CPU has it, else widening multiplies
// (int8·int8 fits int16) and pairwise widening adds; exact for any bytes, −128 included.
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
  return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

template <class T>
float vec_dot_blocks(const typename T::W* x, const typename T::Y* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int8x16_t lo, hi;
    T::unpack(x[i], lo, hi);
    const int32x4_t acc = dot16(dot16(vdupq_n_s32(0), lo, vld1q_s8(y[i].qs)), hi, vld1q_s8(y[i].qs + 16));
    s = T::step(s, vaddvq_s32(acc), x[i], y[i]);
  }
  return s;
}

// ---- K-quants: each sub-block's integer dot in vectors, the rest as the scalar twin ----------------
// quant.cpp's dot_q45_K_scalar / dot_q6_K_scalar: per super-block the integers isum (Σ_s sc[s]·dot_s) and
// imin (Σ_s m[s]·bsums), exact in any order, then the same float expressions in the same order.

inline int dot32(uint8x16_t q0, uint8x16_t q1, const std::int8_t* y) {
  return vaddvq_s32(dot16(dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(q0), vld1q_s8(y)), vreinterpretq_s8_u8(q1), vld1q_s8(y + 16)));
}

// Q4_K (Q5 = false) and Q5_K (Q5 = true): group g of 32 qs bytes holds sub-block 2g in its low nibbles
// and 2g+1 in its high ones; Q5_K's fifth bit of value l of sub-block b is bit b of qh[l].
template <class Block, bool Q5>
float dot_q45_K(const Block* x, const block_q8_K* y, std::size_t nb) {
  float sum = 0.0f, sum_min = 0.0f;
  const uint8x16_t m4 = vdupq_n_u8(0x0F), sixteen = vdupq_n_u8(16);
  for (std::size_t i = 0; i < nb; ++i) {
    uint8x16_t h0 = vdupq_n_u8(0), h1 = h0;
    if constexpr (Q5) {
      h0 = vld1q_u8(x[i].qh);
      h1 = vld1q_u8(x[i].qh + 16);
    }
    int isum = 0, imin = 0;
    for (int g = 0; g < 4; ++g) {
      const uint8x16_t a = vld1q_u8(x[i].qs + 32 * g), b = vld1q_u8(x[i].qs + 32 * g + 16);
      uint8x16_t lo0 = vandq_u8(a, m4), lo1 = vandq_u8(b, m4), hi0 = vshrq_n_u8(a, 4), hi1 = vshrq_n_u8(b, 4);
      if constexpr (Q5) {
        const uint8x16_t bl = vdupq_n_u8(static_cast<std::uint8_t>(1u << (2 * g))), bh = vdupq_n_u8(static_cast<std::uint8_t>(2u << (2 * g)));
        lo0 = vorrq_u8(lo0, vandq_u8(vtstq_u8(h0, bl), sixteen));
        lo1 = vorrq_u8(lo1, vandq_u8(vtstq_u8(h1, bl), sixteen));
        hi0 = vorrq_u8(hi0, vandq_u8(vtstq_u8(h0, bh), sixteen));
        hi1 = vorrq_u8(hi1, vandq_u8(vtstq_u8(h1, bh), sixteen));
      }
      for (int half = 0; half < 2; ++half) {
        const int s = 2 * g + half;
        std::uint8_t sc, m;
        get_scale_min_k4(s, x[i].scales, sc, m);
        const int dot = half == 0 ? dot32(lo0, lo1, y[i].qs + 32 * s) : dot32(hi0, hi1, y[i].qs + 32 * s);
        isum += sc * dot;
        imin += m * (y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
      }
    }
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(isum);
    sum_min += half_to_f32(x[i].dmin) * y[i].d * static_cast<float>(imin);
  }
  return sum - sum_min;
}

// Q6_K: per 128-value half, value l + 32k is nibble (k < 2: low, else high) of ql[l + 32·(k mod 2)] with
// bits 2k..2k+1 of qh[l] above it, minus 32; 16 values share a scale.
float dot_q6_K(const block_q6_K* x, const block_q8_K* y, std::size_t nb) {
  float sum = 0.0f;
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(3);
  const int8x16_t off = vdupq_n_s8(32);
  for (std::size_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int half = 0; half < 2; ++half) {
      const std::uint8_t* ql = x[i].ql + 64 * half;
      const std::uint8_t* qh = x[i].qh + 32 * half;
      const std::int8_t* qy = y[i].qs + 128 * half;
      const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
      const uint8x16_t q0 = vld1q_u8(qh), q1 = vld1q_u8(qh + 16);
      for (int k = 0; k < 4; ++k) {
        const uint8x16_t n0 = k == 0 ? vandq_u8(l0, m4) : k == 1 ? vandq_u8(l2, m4) : k == 2 ? vshrq_n_u8(l0, 4) : vshrq_n_u8(l2, 4);
        const uint8x16_t n1 = k == 0 ? vandq_u8(l1, m4) : k == 1 ? vandq_u8(l3, m4) : k == 2 ? vshrq_n_u8(l1, 4) : vshrq_n_u8(l3, 4);
        const int8x16_t shift = vdupq_n_s8(static_cast<std::int8_t>(-2 * k));
        const uint8x16_t hb0 = vandq_u8(vshlq_u8(q0, shift), m3), hb1 = vandq_u8(vshlq_u8(q1, shift), m3);
        const int8x16_t v0 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(n0, vshlq_n_u8(hb0, 4))), off);
        const int8x16_t v1 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(n1, vshlq_n_u8(hb1, 4))), off);
        const int d0 = vaddvq_s32(dot16(vdupq_n_s32(0), v0, vld1q_s8(qy + 32 * k)));
        const int d1 = vaddvq_s32(dot16(vdupq_n_s32(0), v1, vld1q_s8(qy + 32 * k + 16)));
        isum += x[i].scales[8 * half + 2 * k] * d0 + x[i].scales[8 * half + 2 * k + 1] * d1;
      }
    }
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(isum);
  }
  return sum;
}

// Q2_K and Q3_K (quant.cpp's dot_q2_K_scalar / dot_q3_K_scalar): row k (0..3) of a 128-value half h is
// bits 2k..2k+1 of its 32 qs bytes, values 0..15 of the row one 16-value sub-block (8h + 2k) and 16..31
// the next. Each sub-block's integer dot in vectors, isum (and Q2_K's imin from the bsums) exact in any
// order, then the scalar twin's float expression: its bits.
inline int dot16_sum(int8x16_t a, const std::int8_t* y) { return vaddvq_s32(dot16(vdupq_n_s32(0), a, vld1q_s8(y))); }

float dot_q2_K(const block_q2_K* x, const block_q8_K* y, std::size_t nb) {
  const uint8x16_t m3 = vdupq_n_u8(3);
  float sum = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int isum = 0, imin = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * h), q1 = vld1q_u8(x[i].qs + 32 * h + 16);
      for (int k = 0; k < 4; ++k) {
        const int sb = 8 * h + 2 * k;
        const std::int8_t* qy = y[i].qs + 128 * h + 32 * k;
        const int8x16_t shift = vdupq_n_s8(static_cast<std::int8_t>(-2 * k));
        const int8x16_t v0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q0, shift), m3));
        const int8x16_t v1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q1, shift), m3));
        isum += (x[i].scales[sb] & 0x0F) * dot16_sum(v0, qy) + (x[i].scales[sb + 1] & 0x0F) * dot16_sum(v1, qy + 16);
      }
    }
    for (int s = 0; s < 16; ++s) imin += (x[i].scales[s] >> 4) * y[i].bsums[s];
    const float dall = y[i].d * half_to_f32(x[i].d), dmin = y[i].d * half_to_f32(x[i].dmin);
    sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(imin);
  }
  return sum;
}

// Q3_K: the 2 low bits as Q2_K's, minus 4 where the value's hmask bit is clear (value l + 32·row of the
// super-block has bit `row` of hmask[l]); signed scales, no minimums.
float dot_q3_K(const block_q3_K* x, const block_q8_K* y, std::size_t nb) {
  const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
  float sum = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int sc[16];
    q3_K_scales(x[i].scales, sc);
    const uint8x16_t hm0 = vld1q_u8(x[i].hmask), hm1 = vld1q_u8(x[i].hmask + 16);
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * h), q1 = vld1q_u8(x[i].qs + 32 * h + 16);
      for (int k = 0; k < 4; ++k) {
        const int row = 4 * h + k, sb = 2 * row;
        const std::int8_t* qy = y[i].qs + 32 * row;
        const uint8x16_t bit = vdupq_n_u8(static_cast<std::uint8_t>(1u << row));
        const int8x16_t shift = vdupq_n_s8(static_cast<std::int8_t>(-2 * k));
        // 4 where the row's hmask bit is clear (vtst: all ones where it is set).
        const uint8x16_t sub0 = vbicq_u8(four, vtstq_u8(hm0, bit)), sub1 = vbicq_u8(four, vtstq_u8(hm1, bit));
        const int8x16_t v0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q0, shift), m3)), vreinterpretq_s8_u8(sub0));
        const int8x16_t v1 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q1, shift), m3)), vreinterpretq_s8_u8(sub1));
        isum += sc[sb] * dot16_sum(v0, qy) + sc[sb + 1] * dot16_sum(v1, qy + 16);
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

float vec_dot(DType w, std::size_t n, const void* w_row, const void* x_row) {
  const std::size_t nb = n / QK8_0;
  switch (w) {
    case DType::F32: return dot(as<float>(w_row), as<float>(x_row), n);
    case DType::F16: return dot_half<WidenF16>(as<std::uint16_t>(w_row), as<std::uint16_t>(x_row), n);
    case DType::BF16: return dot_half<WidenBF16>(as<std::uint16_t>(w_row), as<std::uint16_t>(x_row), n);
    case DType::Q8_0: return vec_dot_blocks<Q8_0>(as<block_q8_0>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q4_0: return vec_dot_blocks<Q4_0>(as<block_q4_0>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q4_1: return vec_dot_blocks<Q4_1>(as<block_q4_1>(w_row), as<block_q8_1>(x_row), nb);
    case DType::Q5_0: return vec_dot_blocks<Q5_0>(as<block_q5_0>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q5_1: return vec_dot_blocks<Q5_1>(as<block_q5_1>(w_row), as<block_q8_1>(x_row), nb);
    case DType::IQ4_NL: return vec_dot_blocks<IQ4_NL>(as<block_iq4_nl>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q4_K: return dot_q45_K<block_q4_K, false>(as<block_q4_K>(w_row), as<block_q8_K>(x_row), n / QK_K);
    case DType::Q5_K: return dot_q45_K<block_q5_K, true>(as<block_q5_K>(w_row), as<block_q8_K>(x_row), n / QK_K);
    case DType::Q6_K: return dot_q6_K(as<block_q6_K>(w_row), as<block_q8_K>(x_row), n / QK_K);
    case DType::Q2_K: return dot_q2_K(as<block_q2_K>(w_row), as<block_q8_K>(x_row), n / QK_K);
    case DType::Q3_K: return dot_q3_K(as<block_q3_K>(w_row), as<block_q8_K>(x_row), n / QK_K);
    default: return quant::vec_dot_scalar(w, n, w_row, x_row);
  }
}

#if defined(__ARM_FEATURE_MATMUL_INT8)
// SMMLA: two weight rows by two activation rows per instruction. vmmlaq_s32(acc, a, b) adds
// [a0·b0, a0·b1, a1·b0, a1·b1] where a0, a1 are a's 8-byte halves and b0, b1 b's; a block's 32 bytes
// take four. Each of the four outputs gets its block's exact integer sum, then the scalar twin's
// float step in block order: vec_dot's bits.
inline int8x16_t halves_lo(int8x16_t p, int8x16_t q) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(p), vreinterpretq_s64_s8(q)));
}
inline int8x16_t halves_hi(int8x16_t p, int8x16_t q) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(p), vreinterpretq_s64_s8(q)));
}
template <class T>
void tile2x2(float* out, std::size_t d, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb, std::size_t nb) {
  const auto* w0 = reinterpret_cast<const typename T::W*>(w);
  const auto* w1 = reinterpret_cast<const typename T::W*>(w + wrb);
  const auto* y0 = reinterpret_cast<const typename T::Y*>(xq);
  const auto* y1 = reinterpret_cast<const typename T::Y*>(xq + xrb);
  float s00 = 0.0f, s01 = 0.0f, s10 = 0.0f, s11 = 0.0f;  // s[weight row][activation row]
  for (std::size_t b = 0; b < nb; ++b) {
    int8x16_t a0l, a0h, a1l, a1h;
    T::unpack(w0[b], a0l, a0h);
    T::unpack(w1[b], a1l, a1h);
    const int8x16_t x0l = vld1q_s8(y0[b].qs), x0h = vld1q_s8(y0[b].qs + 16);
    const int8x16_t x1l = vld1q_s8(y1[b].qs), x1h = vld1q_s8(y1[b].qs + 16);
    int32x4_t acc = vdupq_n_s32(0);
    acc = vmmlaq_s32(acc, halves_lo(a0l, a1l), halves_lo(x0l, x1l));
    acc = vmmlaq_s32(acc, halves_hi(a0l, a1l), halves_hi(x0l, x1l));
    acc = vmmlaq_s32(acc, halves_lo(a0h, a1h), halves_lo(x0h, x1h));
    acc = vmmlaq_s32(acc, halves_hi(a0h, a1h), halves_hi(x0h, x1h));
    s00 = T::step(s00, vgetq_lane_s32(acc, 0), w0[b], y0[b]);
    s01 = T::step(s01, vgetq_lane_s32(acc, 1), w0[b], y1[b]);
    s10 = T::step(s10, vgetq_lane_s32(acc, 2), w1[b], y0[b]);
    s11 = T::step(s11, vgetq_lane_s32(acc, 3), w1[b], y1[b]);
  }
  out[0] = s00;
  out[d] = s01;
  out[1] = s10;
  out[d + 1] = s11;
}

template <class T>
void q_tiles(float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb, std::size_t n, std::size_t k,
             std::size_t d, std::size_t i0, std::size_t i1, DType wt) {
  const std::size_t nb = k / QK8_0;
  std::size_t i = i0;
  for (; i + 2 <= i1; i += 2) {
    std::size_t t = 0;
    for (; t + 2 <= n; t += 2) tile2x2<T>(out + t * d + i, d, w + i * wrb, wrb, xq + t * xrb, xrb, nb);
    for (; t < n; ++t)
      for (std::size_t r = i; r < i + 2; ++r) out[t * d + r] = vec_dot(wt, k, w + r * wrb, xq + t * xrb);
  }
  for (; i < i1; ++i)
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = vec_dot(wt, k, w + i * wrb, xq + t * xrb);
}
#endif

void qmatmul_rows(DType wt, float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb,
                  std::size_t n, std::size_t k, std::size_t d, std::size_t i0, std::size_t i1) {
#if defined(__ARM_FEATURE_MATMUL_INT8)
  if (n >= 2) switch (wt) {
      case DType::Q8_0: return q_tiles<Q8_0>(out, w, wrb, xq, xrb, n, k, d, i0, i1, wt);
      case DType::Q4_0: return q_tiles<Q4_0>(out, w, wrb, xq, xrb, n, k, d, i0, i1, wt);
      case DType::Q4_1: return q_tiles<Q4_1>(out, w, wrb, xq, xrb, n, k, d, i0, i1, wt);
      case DType::Q5_0: return q_tiles<Q5_0>(out, w, wrb, xq, xrb, n, k, d, i0, i1, wt);
      case DType::Q5_1: return q_tiles<Q5_1>(out, w, wrb, xq, xrb, n, k, d, i0, i1, wt);
      case DType::IQ4_NL: return q_tiles<IQ4_NL>(out, w, wrb, xq, xrb, n, k, d, i0, i1, wt);
      default: break;
    }
#endif
  for (std::size_t i = i0; i < i1; ++i)
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = vec_dot(wt, k, w + i * wrb, xq + t * xrb);
}

}  // namespace nk
}  // namespace

extern const KernelSet GB_ISA_TABLE = {GB_ISA_NAME, nk::dot, nk::matmul_rows, rmsnorm_scalar, nk::axpy, nk::dots, nk::axpys,
                                       nk::vec_dot, scalar_entries::quantize_q8_0, nk::qmatmul_rows, nk::fma_probe, exp_weights_scalar,
                                       scalar_entries::packed_x_floats, scalar_entries::pack_x_groups, 0, scalar_entries::pack_keys,
                                       scalar_entries::dots_packed<nk::dots>, nk::axpys_rows,
                                       softmax_scalar, first_nonfinite_scalar, scalar_entries::exp_floats, scalar_entries::exp_in_vectors};

}  // namespace glassbox::kernels
