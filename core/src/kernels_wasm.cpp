// The WebAssembly SIMD128 kernel set ("simd128", issue #43): compiled with emscripten's -msimd128 into the
// web build (core/CMakeLists.txt, GLASSBOX_ARCH wasm32); kernels.cpp lists it before the scalar set, which
// GLASSBOX_KERNELS=scalar still picks.
//
// Every entry keeps its scalar twin's bits (tests/test_kernels.cpp, run under node by tests/web/):
//  - F32 matrix products (matmul_rows) and attention scores (dots): the scalar dot is one chain
//    s += a[j]·b[j] in order of j, which no vector can shorten; so the lanes hold four *outputs* (four
//    weight rows) instead, each lane that very chain: a 4×4 block of w transposed in registers, then four
//    multiply-then-add steps. WebAssembly has no fused multiply-add (and the build says -ffp-contract=off),
//    so each step rounds twice, as the scalar twin's. Bit for bit, and decode runs 16 rows' chains at once
//    (prefill 8 rows by 4 activation rows) instead of one.
//  - the lone dot (dot): the scalar twin itself (one chain; nothing to run beside it).
//  - axpy, axpys: element-wise y += a·x, the same two roundings per element in the same order of rows.
//  - RMSNorm: the sum of squares in order (the scalar chain), the scaling in vectors.
//  - Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (its nibbles looked up by one byte swizzle): each block's
//    integer Σ w·y in vectors (i16 widening, i32x4.dot_i16x8: exact in any order), then each block's
//    float step exactly as quant.cpp's scalar twin, in block order.
//    Prefill and decode (qmatmul_rows) run four weight rows' steps as the lanes of one vector.
//  - Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: each sub-block's integer dot in vectors, the scales, minimums and floats as the scalar
//    twin (as kernels_neon.cpp): vec_dot_scalar's bits.
//  - F16, BF16 matrix products (qmatmul_rows): x and each group of 16 weight rows widened into floats
//    exactly (half_to_f32's steps lane by lane), then the F32 product above over them: each output the
//    twin's chain over the same values. The lone F16/BF16 dot is the twin.
//  - softmax, exp, quantize_q8_0 and the rest: the scalar set's entries.
#include <wasm_simd128.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "glassbox/kernels.hpp"
#include "glassbox/quant.hpp"
#include "kernel_set.hpp"
#include "quant_bits.hpp"

#ifndef GB_ISA_TABLE
#error "build with -DGB_ISA_TABLE=kernel_set_<isa> -DGB_ISA_NAME=\"<isa>\""
#endif

namespace glassbox::kernels {
namespace {
namespace wk {

using namespace glassbox::quant;

// ---- float32: four outputs per vector, each lane the scalar chain ---------------------------------------

inline v128_t load(const float* p) { return wasm_v128_load(p); }
inline v128_t load_s(const void* p) { return wasm_v128_load(p); }
// The scalar twin's step s += a·b (two roundings), four lanes at once.
inline v128_t step(v128_t s, v128_t a, v128_t b) { return wasm_f32x4_add(s, wasm_f32x4_mul(a, b)); }

// The columns j..j+3 of four rows (r0..r3 each 4 floats at j): c[m] = [r0[j+m], r1[j+m], r2[j+m], r3[j+m]].
inline void transpose4(v128_t r0, v128_t r1, v128_t r2, v128_t r3, v128_t c[4]) {
  const v128_t t0 = wasm_i32x4_shuffle(r0, r1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r2, r3, 0, 4, 1, 5);
  const v128_t t2 = wasm_i32x4_shuffle(r0, r1, 2, 6, 3, 7), t3 = wasm_i32x4_shuffle(r2, r3, 2, 6, 3, 7);
  c[0] = wasm_i32x4_shuffle(t0, t1, 0, 1, 4, 5);
  c[1] = wasm_i32x4_shuffle(t0, t1, 2, 3, 6, 7);
  c[2] = wasm_i32x4_shuffle(t2, t3, 0, 1, 4, 5);
  c[3] = wasm_i32x4_shuffle(t2, t3, 2, 3, 6, 7);
}

// acc[t][v] lane l = dot_scalar(x + t·xs, w + (4v + l)·ws, k): RV groups of four weight rows (ws apart)
// against T activation rows (xs apart). The chains of RV·T vectors are independent, so they overlap.
template <int RV, int T>
inline void chains(v128_t acc[T][RV], const float* x, std::size_t xs, const float* w, std::size_t ws, std::size_t k) {
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < RV; ++v) acc[t][v] = wasm_f32x4_splat(0.0f);
  std::size_t j = 0;
  if constexpr (T == 1)  // decode: the four columns' x once, then each group of rows transposed and consumed
    for (; j + 4 <= k; j += 4) {
      const v128_t x0 = wasm_v128_load32_splat(x + j), x1 = wasm_v128_load32_splat(x + j + 1);
      const v128_t x2 = wasm_v128_load32_splat(x + j + 2), x3 = wasm_v128_load32_splat(x + j + 3);
      for (int v = 0; v < RV; ++v) {
        const float* r = w + 4 * v * ws + j;
        v128_t c[4];
        transpose4(load(r), load(r + ws), load(r + 2 * ws), load(r + 3 * ws), c);
        acc[0][v] = step(step(step(step(acc[0][v], x0, c[0]), x1, c[1]), x2, c[2]), x3, c[3]);
      }
    }
  for (; j + 4 <= k; j += 4) {
    v128_t c[RV][4];
    for (int v = 0; v < RV; ++v) {
      const float* r = w + 4 * v * ws + j;
      transpose4(load(r), load(r + ws), load(r + 2 * ws), load(r + 3 * ws), c[v]);
    }
    for (int m = 0; m < 4; ++m)
      for (int t = 0; t < T; ++t) {
        const v128_t xv = wasm_v128_load32_splat(x + t * xs + j + m);
        for (int v = 0; v < RV; ++v) acc[t][v] = step(acc[t][v], xv, c[v][m]);
      }
  }
  for (; j < k; ++j) {
    v128_t c[RV];
    for (int v = 0; v < RV; ++v) {
      const float* r = w + 4 * v * ws + j;
      c[v] = wasm_f32x4_make(r[0], r[ws], r[2 * ws], r[3 * ws]);
    }
    for (int t = 0; t < T; ++t) {
      const v128_t xv = wasm_f32x4_splat(x[t * xs + j]);
      for (int v = 0; v < RV; ++v) acc[t][v] = step(acc[t][v], xv, c[v]);
    }
  }
}

// out[t·d + i] for 4·RV rows from i and T tokens from t.
template <int RV, int T>
inline void block(float* out, const float* x, const float* w, std::size_t k, std::size_t d, std::size_t i, std::size_t t) {
  v128_t acc[T][RV];
  chains<RV, T>(acc, x + t * k, k, w + i * k, k, k);
  for (int a = 0; a < T; ++a)
    for (int v = 0; v < RV; ++v) {
      float lanes[4];
      wasm_v128_store(lanes, acc[a][v]);
      std::memcpy(out + (t + a) * d + i + 4 * v, lanes, sizeof lanes);
    }
}

// Every output is dot_scalar's number, whatever n, the rows or the blocking (kernel_set.hpp's contract).
void matmul_rows(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d, std::size_t i0,
                 std::size_t i1, const Blocking&) {
  std::size_t i = i0;
  if (n < 4)  // decode: 16 rows' chains at once hide the adds' latency
    for (; i + 16 <= i1; i += 16)
      for (std::size_t t = 0; t < n; ++t) block<4, 1>(out, x, w, k, d, i, t);
  for (; i + 8 <= i1; i += 8) {
    std::size_t t = 0;
    for (; t + 4 <= n; t += 4) block<2, 4>(out, x, w, k, d, i, t);
    for (; t < n; ++t) block<2, 1>(out, x, w, k, d, i, t);
  }
  for (; i + 4 <= i1; i += 4) {
    std::size_t t = 0;
    for (; t + 4 <= n; t += 4) block<1, 4>(out, x, w, k, d, i, t);
    for (; t < n; ++t) block<1, 1>(out, x, w, k, d, i, t);
  }
  for (; i < i1; ++i)
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = dot_scalar(x + t * k, w + i * k, k);
}

// out[s] = dot_scalar(q, row s, n)·scale, four rows per vector.
void dots(float* out, const float* q, const float* rows, std::size_t stride, std::size_t count, std::size_t n, float scale) {
  std::size_t s = 0;
  const v128_t sc = wasm_f32x4_splat(scale);
  for (; s + 4 <= count; s += 4) {
    v128_t acc[1][1];
    chains<1, 1>(acc, q, 0, rows + s * stride, stride, n);
    wasm_v128_store(out + s, wasm_f32x4_mul(acc[0][0], sc));
  }
  for (; s < count; ++s) out[s] = dot_scalar(q, rows + s * stride, n) * scale;
}

// y[i] += a·x[i] (the product, then the sum: the scalar twin's two roundings).
void axpy(float* y, float a, const float* x, std::size_t n) {
  const v128_t av = wasm_f32x4_splat(a);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, step(load(y + i), av, load(x + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

// axpy of each row in order, y kept in registers 16 values at a time.
void axpys(float* y, const float* a, const float* rows, std::size_t stride, std::size_t count, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v128_t y0 = load(y + i), y1 = load(y + i + 4), y2 = load(y + i + 8), y3 = load(y + i + 12);
    for (std::size_t s = 0; s < count; ++s) {
      const float* r = rows + s * stride + i;
      const v128_t av = wasm_f32x4_splat(a[s]);
      y0 = step(y0, av, load(r));
      y1 = step(y1, av, load(r + 4));
      y2 = step(y2, av, load(r + 8));
      y3 = step(y3, av, load(r + 12));
    }
    wasm_v128_store(y + i, y0);
    wasm_v128_store(y + i + 4, y1);
    wasm_v128_store(y + i + 8, y2);
    wasm_v128_store(y + i + 12, y3);
  }
  for (; i < n; ++i)
    for (std::size_t s = 0; s < count; ++s) y[i] += a[s] * rows[s * stride + i];
}

void axpys_rows(float* y, std::size_t y_stride, const float* a, std::size_t a_stride, std::size_t nq, const float* rows,
                std::size_t stride, std::size_t count, std::size_t n) {
  for (std::size_t r = 0; r < nq; ++r) axpys(y + r * y_stride, a + r * a_stride, rows, stride, count, n);
}

// rmsnorm_scalar: the sum of squares is its chain; out[i] = weight[i]·(scale·x[i]) in vectors.
void rmsnorm(float* out, const float* x, const float* weight, std::size_t n, float eps) {
  float ss = 0.0f;
  for (std::size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const v128_t sv = wasm_f32x4_splat(scale);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(out + i, wasm_f32x4_mul(load(weight + i), wasm_f32x4_mul(sv, load(x + i))));
  for (; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}

// Twelve independent multiply-add chains (SIMD128 has no fused multiply-add: two operations a step).
std::size_t fma_probe(std::size_t iters, float* sink) {
  v128_t acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = wasm_f32x4_splat(1.0f + 0.01f * static_cast<float>(j));
  const v128_t m = wasm_f32x4_splat(0.9999999f), c = wasm_f32x4_splat(1e-7f);
  for (std::size_t it = 0; it < iters; ++it)
    for (int j = 0; j < 12; ++j) acc[j] = wasm_f32x4_add(wasm_f32x4_mul(acc[j], m), c);
  v128_t s = acc[0];
  for (int j = 1; j < 12; ++j) s = wasm_f32x4_add(s, acc[j]);
  *sink = wasm_f32x4_extract_lane(s, 0) + wasm_f32x4_extract_lane(s, 1) + wasm_f32x4_extract_lane(s, 2) +
          wasm_f32x4_extract_lane(s, 3);
  return 4;
}

// ---- F16, BF16: four weight rows' chains as lanes, the halves widened in registers -----------------------

// Four halves widened to floats exactly (quant_bits.hpp's half_to_f32 / bf16_to_f32, lane by lane).
struct WidenF16 {
  static v128_t widen(const std::uint16_t* p) {
    const v128_t h = wasm_u32x4_load16x4(p);
    v128_t o = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x7FFF)), 13);
    const v128_t e = wasm_v128_and(o, wasm_i32x4_splat(0x0F800000));
    o = wasm_i32x4_add(o, wasm_i32x4_splat((127 - 15) << 23));
    // Inf and NaN: the all-ones exponent. Zeros and subnormals: 2^−14·(1 + m/1024) − 2^−14, exact.
    o = wasm_i32x4_add(o, wasm_v128_and(wasm_i32x4_eq(e, wasm_i32x4_splat(0x0F800000)), wasm_i32x4_splat((128 - 16) << 23)));
    const v128_t sub = wasm_f32x4_sub(wasm_i32x4_add(o, wasm_i32x4_splat(1 << 23)), wasm_i32x4_splat(113 << 23));
    o = wasm_v128_bitselect(sub, o, wasm_i32x4_eq(e, wasm_i32x4_splat(0)));
    return wasm_v128_or(o, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
  }
  static float one(std::uint16_t h) { return half_to_f32(h); }
};
struct WidenBF16 {
  static v128_t widen(const std::uint16_t* p) { return wasm_i32x4_shl(wasm_u32x4_load16x4(p), 16); }
  static float one(std::uint16_t h) { return bf16_to_f32(h); }
};

// Rows of halves widened into floats (exact), 4 at a time.
template <class H>
inline void widen_row(float* dst, const std::uint16_t* src, std::size_t k) {
  std::size_t j = 0;
  for (; j + 4 <= k; j += 4) wasm_v128_store(dst + j, H::widen(src + j));
  for (; j < k; ++j) dst[j] = H::one(src[j]);
}

// F16/BF16 products: x's rows and each group of 16 weight rows widened into floats, then the F32 product
// over them (matmul_rows above: each output dot_scalar's chain over the widened values, which is
// dot_f16_scalar's / dot_bf16_scalar's: the same products in the same order, two roundings a step).
// Widening in registers inside the chains was tried: as slow as the scalar twin (too many live vectors).
template <class H>
void half_rows(float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb, std::size_t n, std::size_t k,
               std::size_t d, std::size_t i0, std::size_t i1) {
  constexpr std::size_t G = 16;
  thread_local std::vector<float> xw, ww;
  xw.resize(n * k);
  ww.resize(G * k);
  for (std::size_t t = 0; t < n; ++t) widen_row<H>(xw.data() + t * k, reinterpret_cast<const std::uint16_t*>(xq + t * xrb), k);
  for (std::size_t i = i0; i < i1; i += G) {
    const std::size_t rows = std::min(G, i1 - i);
    for (std::size_t r = 0; r < rows; ++r) widen_row<H>(ww.data() + r * k, reinterpret_cast<const std::uint16_t*>(w + (i + r) * wrb), k);
    matmul_rows(out + i, xw.data(), ww.data(), n, k, d, 0, rows, Blocking{});
  }
}

// ---- the 32-value quantized types: integers in vectors, floats as the scalar twin -----------------------

// Σ a·b over 16 signed bytes as four int32 partial sums: each byte widened to 16 bits (int8·int8 fits
// int16 and a pair sum int32), so exact for any bytes, −128 included.
inline v128_t dot16(v128_t a, v128_t b) {
  return wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(a), wasm_i16x8_extend_low_i8x16(b)),
                        wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(a), wasm_i16x8_extend_high_i8x16(b)));
}
inline int hsum(v128_t v) {
  return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
         wasm_i32x4_extract_lane(v, 3);
}
// [Σ p0, Σ p1, Σ p2, Σ p3]: four rows' partial sums added across lanes (integers: exact in any order).
inline v128_t hsum4(v128_t p0, v128_t p1, v128_t p2, v128_t p3) {
  const v128_t a = wasm_i32x4_add(wasm_i32x4_shuffle(p0, p1, 0, 4, 1, 5), wasm_i32x4_shuffle(p0, p1, 2, 6, 3, 7));
  const v128_t b = wasm_i32x4_add(wasm_i32x4_shuffle(p2, p3, 0, 4, 1, 5), wasm_i32x4_shuffle(p2, p3, 2, 6, 3, 7));
  return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 1, 4, 5), wasm_i32x4_shuffle(a, b, 2, 3, 6, 7));
}
inline void nibbles(const std::uint8_t* qs, v128_t& lo, v128_t& hi) {
  const v128_t q = load_s(qs);
  lo = wasm_v128_and(q, wasm_i8x16_splat(0x0F));
  hi = wasm_u8x16_shr(q, 4);
}
// The fifth bits of a Q5 block as 16 where set (bit j of qh → value j): bytes 0..15 and 16..31.
inline void fifth_bits(const std::uint8_t* qh4, v128_t& lo, v128_t& hi) {
  std::uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  const v128_t bit = wasm_u8x16_make(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
  const v128_t b01 = wasm_u8x16_make(qh & 0xFF, qh & 0xFF, qh & 0xFF, qh & 0xFF, qh & 0xFF, qh & 0xFF, qh & 0xFF, qh & 0xFF,
                                     (qh >> 8) & 0xFF, (qh >> 8) & 0xFF, (qh >> 8) & 0xFF, (qh >> 8) & 0xFF, (qh >> 8) & 0xFF,
                                     (qh >> 8) & 0xFF, (qh >> 8) & 0xFF, (qh >> 8) & 0xFF);
  const v128_t b23 = wasm_u8x16_make((qh >> 16) & 0xFF, (qh >> 16) & 0xFF, (qh >> 16) & 0xFF, (qh >> 16) & 0xFF,
                                     (qh >> 16) & 0xFF, (qh >> 16) & 0xFF, (qh >> 16) & 0xFF, (qh >> 16) & 0xFF, qh >> 24, qh >> 24,
                                     qh >> 24, qh >> 24, qh >> 24, qh >> 24, qh >> 24, qh >> 24);
  const v128_t sixteen = wasm_i8x16_splat(16);
  lo = wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(b01, bit), wasm_i8x16_splat(0)), sixteen);
  hi = wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(b23, bit), wasm_i8x16_splat(0)), sixteen);
}

// A weight block's 32 values as signed bytes (values 0..15 in lo, 16..31 in hi: the activation block's
// order) and the block's float step: quant.cpp's scalar expression; Step4 the same for four lanes.
struct Q8_0 {
  using W = block_q8_0;
  using Y = block_q8_0;
  static void unpack(const W& x, v128_t& lo, v128_t& hi) {
    lo = load_s(x.qs);
    hi = load_s(x.qs + 16);
  }
  static float step(float s, int sumi, const W& x, const Y& y) { return s + static_cast<float>(sumi) * (half_to_f32(x.d) * half_to_f32(y.d)); }
  static v128_t step4(v128_t s, v128_t sumi, const W* const x[4], const Y& y) {
    const float dy = half_to_f32(y.d);
    const v128_t dd = wasm_f32x4_make(half_to_f32(x[0]->d) * dy, half_to_f32(x[1]->d) * dy, half_to_f32(x[2]->d) * dy, half_to_f32(x[3]->d) * dy);
    return wasm_f32x4_add(s, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sumi), dd));
  }
};
struct Q4_0 {
  using W = block_q4_0;
  using Y = block_q8_0;
  static void unpack(const W& x, v128_t& lo, v128_t& hi) {
    nibbles(x.qs, lo, hi);
    lo = wasm_i8x16_sub(lo, wasm_i8x16_splat(8));
    hi = wasm_i8x16_sub(hi, wasm_i8x16_splat(8));
  }
  static float step(float s, int sumi, const W& x, const Y& y) { return s + static_cast<float>(sumi) * half_to_f32(x.d) * half_to_f32(y.d); }
  static v128_t step4(v128_t s, v128_t sumi, const W* const x[4], const Y& y) {
    const v128_t dx = wasm_f32x4_make(half_to_f32(x[0]->d), half_to_f32(x[1]->d), half_to_f32(x[2]->d), half_to_f32(x[3]->d));
    return wasm_f32x4_add(s, wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sumi), dx), wasm_f32x4_splat(half_to_f32(y.d))));
  }
};
// Q4_1 / Q5_1 against Q8_1: s + (d_x·d_y·sumi + m_x·s_y).
template <class Blk>
struct Min1 {
  using W = Blk;
  using Y = block_q8_1;
  static float step(float s, int sumi, const W& x, const Y& y) {
    return s + (half_to_f32(x.d) * half_to_f32(y.d) * static_cast<float>(sumi) + half_to_f32(x.m) * half_to_f32(y.s));
  }
  static v128_t step4(v128_t s, v128_t sumi, const W* const x[4], const Y& y) {
    const float dy = half_to_f32(y.d), sy = half_to_f32(y.s);
    const v128_t dd = wasm_f32x4_make(half_to_f32(x[0]->d) * dy, half_to_f32(x[1]->d) * dy, half_to_f32(x[2]->d) * dy, half_to_f32(x[3]->d) * dy);
    const v128_t ms = wasm_f32x4_make(half_to_f32(x[0]->m) * sy, half_to_f32(x[1]->m) * sy, half_to_f32(x[2]->m) * sy, half_to_f32(x[3]->m) * sy);
    return wasm_f32x4_add(s, wasm_f32x4_add(wasm_f32x4_mul(dd, wasm_f32x4_convert_i32x4(sumi)), ms));
  }
};
struct Q4_1 : Min1<block_q4_1> {
  static void unpack(const W& x, v128_t& lo, v128_t& hi) { nibbles(x.qs, lo, hi); }
};
struct Q5_1 : Min1<block_q5_1> {
  static void unpack(const W& x, v128_t& lo, v128_t& hi) {
    v128_t fl, fh;
    nibbles(x.qs, lo, hi);
    fifth_bits(x.qh, fl, fh);
    lo = wasm_v128_or(lo, fl);
    hi = wasm_v128_or(hi, fh);
  }
};
struct Q5_0 : Q8_0 {
  using W = block_q5_0;
  using Y = block_q8_0;
  static void unpack(const W& x, v128_t& lo, v128_t& hi) {
    v128_t fl, fh;
    nibbles(x.qs, lo, hi);
    fifth_bits(x.qh, fl, fh);
    lo = wasm_i8x16_sub(wasm_v128_or(lo, fl), wasm_i8x16_splat(16));
    hi = wasm_i8x16_sub(wasm_v128_or(hi, fh), wasm_i8x16_splat(16));
  }
  static float step(float s, int sumi, const W& x, const Y& y) { return s + static_cast<float>(sumi) * (half_to_f32(x.d) * half_to_f32(y.d)); }
  static v128_t step4(v128_t s, v128_t sumi, const W* const x[4], const Y& y) {
    const float dy = half_to_f32(y.d);
    const v128_t dd = wasm_f32x4_make(half_to_f32(x[0]->d) * dy, half_to_f32(x[1]->d) * dy, half_to_f32(x[2]->d) * dy, half_to_f32(x[3]->d) * dy);
    return wasm_f32x4_add(s, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sumi), dd));
  }
};

// IQ4_NL: each nibble an index into the 16 signed values of kvalues_iq4nl (one byte swizzle), the float
// step Q8_0's (the scalar twin's s + sumi·(d_x·d_y)).
struct IQ4_NL : Q8_0 {
  using W = block_iq4_nl;
  using Y = block_q8_0;
  static void unpack(const W& x, v128_t& lo, v128_t& hi) {
    v128_t l, h;
    nibbles(x.qs, l, h);
    const v128_t table = load_s(kvalues_iq4nl);
    lo = wasm_i8x16_swizzle(table, l);
    hi = wasm_i8x16_swizzle(table, h);
  }
  static float step(float s, int sumi, const W& x, const Y& y) { return s + static_cast<float>(sumi) * (half_to_f32(x.d) * half_to_f32(y.d)); }
  static v128_t step4(v128_t s, v128_t sumi, const W* const x[4], const Y& y) {
    const float dy = half_to_f32(y.d);
    const v128_t dd = wasm_f32x4_make(half_to_f32(x[0]->d) * dy, half_to_f32(x[1]->d) * dy, half_to_f32(x[2]->d) * dy, half_to_f32(x[3]->d) * dy);
    return wasm_f32x4_add(s, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sumi), dd));
  }
};

template <class T>
inline v128_t block_partials(const typename T::W& x, const typename T::Y& y) {
  v128_t lo, hi;
  T::unpack(x, lo, hi);
  return wasm_i32x4_add(dot16(lo, load_s(y.qs)), dot16(hi, load_s(y.qs + 16)));
}

template <class T>
float vec_dot_blocks(const typename T::W* x, const typename T::Y* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t b = 0; b < nb; ++b) s = T::step(s, hsum(block_partials<T>(x[b], y[b])), x[b], y[b]);
  return s;
}

// Four weight rows against one activation row: lane r is row r's vec_dot_blocks, bit for bit.
template <class T>
v128_t rows4(const std::byte* w, std::size_t wrb, const typename T::Y* y, std::size_t nb) {
  using W = typename T::W;
  const W* r[4] = {reinterpret_cast<const W*>(w), reinterpret_cast<const W*>(w + wrb), reinterpret_cast<const W*>(w + 2 * wrb),
                   reinterpret_cast<const W*>(w + 3 * wrb)};
  v128_t s = wasm_f32x4_splat(0.0f);
  for (std::size_t b = 0; b < nb; ++b) {
    const W* xb[4] = {r[0] + b, r[1] + b, r[2] + b, r[3] + b};
    const v128_t sumi = hsum4(block_partials<T>(*xb[0], y[b]), block_partials<T>(*xb[1], y[b]), block_partials<T>(*xb[2], y[b]),
                              block_partials<T>(*xb[3], y[b]));
    s = T::step4(s, sumi, xb, y[b]);
  }
  return s;
}

// ---- K-quants (kernels_neon.cpp's arithmetic): each sub-block's integers in vectors ------------------------

inline int dot32(v128_t q0, v128_t q1, const std::int8_t* y) { return hsum(wasm_i32x4_add(dot16(q0, load_s(y)), dot16(q1, load_s(y + 16)))); }

// Q4_K (Q5 = false) and Q5_K (Q5 = true): group g of 32 qs bytes holds sub-block 2g in its low nibbles
// and 2g+1 in its high ones; Q5_K's fifth bit of value l of sub-block b is bit b of qh[l] (16 where set).
template <class Block, bool Q5>
float dot_q45_K(const Block* x, const block_q8_K* y, std::size_t nb) {
  float sum = 0.0f, sum_min = 0.0f;
  const v128_t m4 = wasm_i8x16_splat(0x0F), zero = wasm_i8x16_splat(0), sixteen = wasm_i8x16_splat(16);
  for (std::size_t i = 0; i < nb; ++i) {
    v128_t h0 = zero, h1 = zero;
    if constexpr (Q5) {
      h0 = load_s(x[i].qh);
      h1 = load_s(x[i].qh + 16);
    }
    int isum = 0, imin = 0;
    for (int g = 0; g < 4; ++g) {
      const v128_t a = load_s(x[i].qs + 32 * g), b = load_s(x[i].qs + 32 * g + 16);
      v128_t lo0 = wasm_v128_and(a, m4), lo1 = wasm_v128_and(b, m4), hi0 = wasm_u8x16_shr(a, 4), hi1 = wasm_u8x16_shr(b, 4);
      if constexpr (Q5) {
        const v128_t bl = wasm_i8x16_splat(static_cast<std::int8_t>(1u << (2 * g))), bh = wasm_i8x16_splat(static_cast<std::int8_t>(2u << (2 * g)));
        auto fifth = [&](v128_t h, v128_t bit) { return wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(h, bit), zero), sixteen); };
        lo0 = wasm_v128_or(lo0, fifth(h0, bl));
        lo1 = wasm_v128_or(lo1, fifth(h1, bl));
        hi0 = wasm_v128_or(hi0, fifth(h0, bh));
        hi1 = wasm_v128_or(hi1, fifth(h1, bh));
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
  const v128_t m4 = wasm_i8x16_splat(0x0F), m3 = wasm_i8x16_splat(3), off = wasm_i8x16_splat(32);
  for (std::size_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int half = 0; half < 2; ++half) {
      const std::uint8_t* ql = x[i].ql + 64 * half;
      const std::uint8_t* qh = x[i].qh + 32 * half;
      const std::int8_t* qy = y[i].qs + 128 * half;
      const v128_t l0 = load_s(ql), l1 = load_s(ql + 16), l2 = load_s(ql + 32), l3 = load_s(ql + 48);
      const v128_t q0 = load_s(qh), q1 = load_s(qh + 16);
      for (int k = 0; k < 4; ++k) {
        const v128_t n0 = k == 0 ? wasm_v128_and(l0, m4) : k == 1 ? wasm_v128_and(l2, m4) : k == 2 ? wasm_u8x16_shr(l0, 4) : wasm_u8x16_shr(l2, 4);
        const v128_t n1 = k == 0 ? wasm_v128_and(l1, m4) : k == 1 ? wasm_v128_and(l3, m4) : k == 2 ? wasm_u8x16_shr(l1, 4) : wasm_u8x16_shr(l3, 4);
        const v128_t hb0 = wasm_v128_and(wasm_u8x16_shr(q0, 2 * k), m3), hb1 = wasm_v128_and(wasm_u8x16_shr(q1, 2 * k), m3);
        const v128_t v0 = wasm_i8x16_sub(wasm_v128_or(n0, wasm_i8x16_shl(hb0, 4)), off);
        const v128_t v1 = wasm_i8x16_sub(wasm_v128_or(n1, wasm_i8x16_shl(hb1, 4)), off);
        const int d0 = hsum(dot16(v0, load_s(qy + 32 * k)));
        const int d1 = hsum(dot16(v1, load_s(qy + 32 * k + 16)));
        isum += x[i].scales[8 * half + 2 * k] * d0 + x[i].scales[8 * half + 2 * k + 1] * d1;
      }
    }
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(isum);
  }
  return sum;
}

// Q2_K and Q3_K (quant.cpp's dot_q2_K_scalar / dot_q3_K_scalar, as kernels_neon.cpp): row k (0..3) of a
// 128-value half h is bits 2k..2k+1 of its 32 qs bytes, values 0..15 of the row one 16-value sub-block
// (8h + 2k) and 16..31 the next. Each sub-block's integer dot in vectors, isum (and Q2_K's imin from the
// bsums) exact in any order, then the scalar twin's float expression: its bits.
inline int dot16_sum(v128_t a, const std::int8_t* y) { return hsum(dot16(a, load_s(y))); }

float dot_q2_K(const block_q2_K* x, const block_q8_K* y, std::size_t nb) {
  const v128_t m3 = wasm_i8x16_splat(3);
  float sum = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int isum = 0, imin = 0;
    for (int h = 0; h < 2; ++h) {
      const v128_t q0 = load_s(x[i].qs + 32 * h), q1 = load_s(x[i].qs + 32 * h + 16);
      for (int k = 0; k < 4; ++k) {
        const int sb = 8 * h + 2 * k;
        const std::int8_t* qy = y[i].qs + 128 * h + 32 * k;
        const v128_t v0 = wasm_v128_and(wasm_u8x16_shr(q0, 2 * k), m3), v1 = wasm_v128_and(wasm_u8x16_shr(q1, 2 * k), m3);
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
  const v128_t m3 = wasm_i8x16_splat(3), four = wasm_i8x16_splat(4), zero = wasm_i8x16_splat(0);
  float sum = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int sc[16];
    q3_K_scales(x[i].scales, sc);
    const v128_t hm0 = load_s(x[i].hmask), hm1 = load_s(x[i].hmask + 16);
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const v128_t q0 = load_s(x[i].qs + 32 * h), q1 = load_s(x[i].qs + 32 * h + 16);
      for (int k = 0; k < 4; ++k) {
        const int row = 4 * h + k, sb = 2 * row;
        const std::int8_t* qy = y[i].qs + 32 * row;
        const v128_t bit = wasm_i8x16_splat(static_cast<std::int8_t>(1u << row));
        // 4 where the row's hmask bit is clear.
        const v128_t sub0 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(hm0, bit), zero), four);
        const v128_t sub1 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(hm1, bit), zero), four);
        const v128_t v0 = wasm_i8x16_sub(wasm_v128_and(wasm_u8x16_shr(q0, 2 * k), m3), sub0);
        const v128_t v1 = wasm_i8x16_sub(wasm_v128_and(wasm_u8x16_shr(q1, 2 * k), m3), sub1);
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
    case DType::F32: return dot_scalar(as<float>(w_row), as<float>(x_row), n);
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

template <class T>
void q_rows(DType wt, float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb, std::size_t n,
            std::size_t k, std::size_t d, std::size_t i0, std::size_t i1) {
  const std::size_t nb = k / QK8_0;
  std::size_t i = i0;
  for (; i + 4 <= i1; i += 4)
    for (std::size_t t = 0; t < n; ++t) {
      float lanes[4];
      wasm_v128_store(lanes, rows4<T>(w + i * wrb, wrb, reinterpret_cast<const typename T::Y*>(xq + t * xrb), nb));
      std::memcpy(out + t * d + i, lanes, sizeof lanes);
    }
  for (; i < i1; ++i)
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = vec_dot(wt, k, w + i * wrb, xq + t * xrb);
}

void qmatmul_rows(DType wt, float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb,
                  std::size_t n, std::size_t k, std::size_t d, std::size_t i0, std::size_t i1) {
  switch (wt) {
    case DType::F16: return half_rows<WidenF16>(out, w, wrb, xq, xrb, n, k, d, i0, i1);
    case DType::BF16: return half_rows<WidenBF16>(out, w, wrb, xq, xrb, n, k, d, i0, i1);
    case DType::Q8_0: return q_rows<Q8_0>(wt, out, w, wrb, xq, xrb, n, k, d, i0, i1);
    case DType::Q4_0: return q_rows<Q4_0>(wt, out, w, wrb, xq, xrb, n, k, d, i0, i1);
    case DType::Q4_1: return q_rows<Q4_1>(wt, out, w, wrb, xq, xrb, n, k, d, i0, i1);
    case DType::Q5_0: return q_rows<Q5_0>(wt, out, w, wrb, xq, xrb, n, k, d, i0, i1);
    case DType::Q5_1: return q_rows<Q5_1>(wt, out, w, wrb, xq, xrb, n, k, d, i0, i1);
    case DType::IQ4_NL: return q_rows<IQ4_NL>(wt, out, w, wrb, xq, xrb, n, k, d, i0, i1);
    default: break;
  }
  for (std::size_t i = i0; i < i1; ++i)
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = vec_dot(wt, k, w + i * wrb, xq + t * xrb);
}

}  // namespace wk
}  // namespace

extern const KernelSet GB_ISA_TABLE = {GB_ISA_NAME, dot_scalar, wk::matmul_rows, wk::rmsnorm, wk::axpy, wk::dots, wk::axpys,
                                       wk::vec_dot, scalar_entries::quantize_q8_0, wk::qmatmul_rows, wk::fma_probe, exp_weights_scalar,
                                       scalar_entries::packed_x_floats, scalar_entries::pack_x_groups, 0, scalar_entries::pack_keys,
                                       scalar_entries::dots_packed<wk::dots>, wk::axpys_rows,
                                       softmax_scalar, first_nonfinite_scalar, scalar_entries::exp_floats, scalar_entries::exp_in_vectors};

}  // namespace glassbox::kernels
