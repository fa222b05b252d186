// The SIMD kernels, compiled once per instruction set (CMake builds this file with -msse4.2,
// -mavx2 -mfma -mf16c and -mavx512*; GB_ISA_TABLE names the table each build defines). kernels.cpp
// picks one table at run time for the CPU it runs on.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include "glassbox/quant.hpp"
#include "kernel_set.hpp"
#include "quant_bits.hpp"

#ifndef GB_ISA_TABLE
#error "build with -DGB_ISA_TABLE=kernel_set_<isa> -DGB_ISA_NAME=\"<isa>\""
#endif

namespace glassbox::kernels {
// Everything but the table has internal linkage: a function with external linkage compiled here
// with -mavx512f could be merged by the linker with its baseline twin and run on a CPU without it.
namespace {

using namespace glassbox::quant;
using batch = xsimd::batch<float>;
constexpr std::size_t W = batch::size;

// ---- float32 -------------------------------------------------------------------------------------

// Four independent accumulators hide the FMA latency; the tail is scalar. dot_lanes returns the
// lanes before their sum (and sets i to where the scalar tail starts), shared with dots.
[[gnu::always_inline]] inline batch dot_lanes(const float* a, const float* b, std::size_t n, std::size_t& i) {
  batch s0(0.0f), s1(0.0f), s2(0.0f), s3(0.0f);
  i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    s0 = xsimd::fma(batch::load_unaligned(a + i), batch::load_unaligned(b + i), s0);
    s1 = xsimd::fma(batch::load_unaligned(a + i + W), batch::load_unaligned(b + i + W), s1);
    s2 = xsimd::fma(batch::load_unaligned(a + i + 2 * W), batch::load_unaligned(b + i + 2 * W), s2);
    s3 = xsimd::fma(batch::load_unaligned(a + i + 3 * W), batch::load_unaligned(b + i + 3 * W), s3);
  }
  for (; i + W <= n; i += W) s0 = xsimd::fma(batch::load_unaligned(a + i), batch::load_unaligned(b + i), s0);
  return (s0 + s1) + (s2 + s3);
}

float dot(const float* a, const float* b, std::size_t n) {
  std::size_t i;
  float s = xsimd::hadd(dot_lanes(a, b, n, i));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// The register tile: RT rows of x against RI rows of w, one vector accumulator per output, all of
// k in one pass. Every output is summed the same way whatever the tile (lane-wise in order of j,
// then the lanes, then the scalar tail), so prefill and decode give identical numbers.
// The tile loops must be unrolled completely, or the accumulators live on the stack (measured:
// a load and a store around every FMA).
#define GB_UNROLL _Pragma("GCC unroll 16")

template <int RT, int RI>
void tile(float* out, const float* x, const float* w, std::size_t k, std::size_t d) {
  batch acc[RT][RI];
  GB_UNROLL for (int a = 0; a < RT; ++a)
    GB_UNROLL for (int b = 0; b < RI; ++b) acc[a][b] = batch(0.0f);
  std::size_t j = 0;
  for (; j + W <= k; j += W) {
    batch xv[RT];
    GB_UNROLL for (int a = 0; a < RT; ++a) xv[a] = batch::load_unaligned(x + a * k + j);
    GB_UNROLL for (int b = 0; b < RI; ++b) {
      const batch wv = batch::load_unaligned(w + b * k + j);
      GB_UNROLL for (int a = 0; a < RT; ++a) acc[a][b] = xsimd::fma(xv[a], wv, acc[a][b]);
    }
  }
  GB_UNROLL for (int a = 0; a < RT; ++a)
    GB_UNROLL for (int b = 0; b < RI; ++b) {
      float s = xsimd::hadd(acc[a][b]);
      for (std::size_t jj = j; jj < k; ++jj) s += x[a * k + jj] * w[b * k + jj];
      out[a * d + b] = s;
    }
}

// Tile shape: RT·RI accumulators + RT x vectors + 1 w vector must fit the register file
// (32 vector registers with AVX-512, 16 below it; a 6x4 tile measured no faster).
#if defined(__AVX512F__)
constexpr int kRT = 4, kRI = 4, kDecodeRI = 8;
#else
constexpr int kRT = 3, kRI = 4, kDecodeRI = 6;
#endif

// ---- prefill: the same sums, as W independent matrix products ---------------------------------
// Lane l of output (t, i)'s accumulator is a chain of FMAs over j = l, l+W, l+2W, ... in order, so
// for each lane the n×d lane-l accumulators form an ordinary matrix product of inner size k/W. Each
// is computed with an outer-product micro-kernel: kMR x rows (one scalar broadcast each) against kNV
// vectors of W weight rows, so a step needs kNV vector loads and kMR broadcasts for kMR·kNV FMAs,
// where the dot-product tile above needs RT+RI vector loads for RT·RI FMAs (at best 1 load per 2 FMAs,
// which holds only while both operands sit in L1). The weights are packed lane-major per panel of
// kNR rows, w[i][l + W·m] at panel[(l·kv + m)·kNR + (i − i0)], so a step reads kNV contiguous vectors.
// The W lane results are then added across lanes vertically, W outputs at a time, in the tree
// xsimd::hadd uses, and the scalar tail is added as in tile(): every output is bit-identical to decode's.
#if defined(__AVX512F__)
constexpr int kMR = 14;  // 28 accumulators + 2 weight vectors + 1 broadcast of 32 registers (12: ~5% slower)
#else
constexpr int kMR = 6;   // 12 + 2 + 1 of 16
#endif
constexpr int kNV = 2;
constexpr std::size_t kNR = kNV * W;
// Packing a chunk of weights pays off from about 32 rows of x (measured, 110M shapes: at 24 rows
// the tiles ran 54 GFLOP/s and the lane products 42, at 32 rows 54 and 72; at 4 rows 46 and 15).
constexpr std::size_t kLaneMinRows = 32;
#if defined(__FMA__)
constexpr bool kHaveFma = true;
#else
constexpr bool kHaveFma = false;
#endif
// Packed x: the values of up to kMR rows for one step of one lane lie together, kXS floats apart.
#if defined(__AVX512F__)
constexpr std::size_t kXS = 16;  // a whole 16×16 transpose
#else
constexpr std::size_t kXS = kMR;
#endif

// Lane l's product for MR rows of x against NV·W weight rows, over all kv steps: xp is the rows'
// values of lane l, packed (xp[m·kXS + r] = x[r][l + W·m]), bp the weights' (bp[m·kNR + c]).
// Weight vectors come from L2 (the packed chunk); measured: prefetching 16 steps ahead, ~12% faster.
constexpr std::size_t kAhead = 16;
template <int MR, int NV>
void lane_tile(float* c, const float* xp, const float* bp, std::size_t kv) {
  batch acc[MR][NV];
  GB_UNROLL for (int r = 0; r < MR; ++r)
    GB_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = batch(0.0f);
  for (std::size_t m = 0; m < kv; ++m) {
    batch wv[NV];
    GB_UNROLL for (int v = 0; v < NV; ++v) {
      _mm_prefetch(reinterpret_cast<const char*>(bp + (m + kAhead) * kNR + v * W), _MM_HINT_T0);
      wv[v] = batch::load_aligned(bp + m * kNR + v * W);
    }
    GB_UNROLL for (int r = 0; r < MR; ++r) {
      const batch xv(xp[m * kXS + r]);
      GB_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(xv, wv[v], acc[r][v]);
    }
  }
  GB_UNROLL for (int r = 0; r < MR; ++r)
    GB_UNROLL for (int v = 0; v < NV; ++v) acc[r][v].store_aligned(c + r * kNR + v * W);
}

// xsimd::hadd's tree, W outputs at once: halves are added while more than 4 lanes remain, then
// (l0 + l1) + (l2 + l3) (xsimd 8: avx512f → avx, avx, sse3).
batch lanes_sum(const float* c, std::size_t lane_stride) {
  batch v[W];
  GB_UNROLL for (std::size_t l = 0; l < W; ++l) v[l] = batch::load_aligned(c + l * lane_stride);
  GB_UNROLL for (std::size_t h = W / 2; h >= 4; h /= 2)
    GB_UNROLL for (std::size_t l = 0; l < h; ++l) v[l] = v[l] + v[l + h];
  return (v[0] + v[1]) + (v[2] + v[3]);
}

#if defined(__AVX512F__)
// GCC 12 reports the _mm512_undefined_* inside its own intrinsics' headers as uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Column l of the 16×16 block r (row c at r[c]) to dst + l·stride: unpacks pair rows, then 64-bit
// pairs, then 128-bit quarters across four vectors.
void transpose16(const __m512 r[16], float* dst, std::size_t stride) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  auto lo = [](__m512 a, __m512 b) { return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b))); };
  auto hi = [](__m512 a, __m512 b) { return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b))); };
  for (int i = 0; i < 4; ++i) {  // u[4i + j], quarter q: rows 4i..4i+3 of column 4q + j
    u[4 * i] = lo(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = hi(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = lo(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = hi(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 a = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), b = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 c = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88), e = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    _mm512_store_ps(dst + (j) * stride, _mm512_shuffle_f32x4(a, c, 0x88));
    _mm512_store_ps(dst + (4 + j) * stride, _mm512_shuffle_f32x4(b, e, 0x88));
    _mm512_store_ps(dst + (8 + j) * stride, _mm512_shuffle_f32x4(a, c, 0xDD));
    _mm512_store_ps(dst + (12 + j) * stride, _mm512_shuffle_f32x4(b, e, 0xDD));
  }
}
#pragma GCC diagnostic pop
#endif

template <int NV>
void pack_panel(float* bp, const float* w, std::size_t k) {
  const std::size_t kv = k / W;
#if defined(__AVX512F__)
  for (std::size_t m = 0; m < kv; ++m)
    for (int v = 0; v < NV; ++v) {
      __m512 r[16];
      for (std::size_t c = 0; c < 16; ++c) r[c] = _mm512_loadu_ps(w + (v * W + c) * k + W * m);
      transpose16(r, bp + m * kNR + v * W, kv * kNR);
    }
  return;
#endif
  for (std::size_t m = 0; m < kv; ++m)
    for (std::size_t l = 0; l < W; ++l)
      GB_UNROLL for (std::size_t c = 0; c < NV * W; ++c) bp[(l * kv + m) * kNR + c] = w[c * k + W * m + l];
}

// Rows x[0..rows) (rows <= kMR) to xp[(l·kv + m)·kXS + r] = x[r][l + W·m]; missing rows repeat row 0.
void pack_x(float* xp, const float* x, std::size_t rows, std::size_t k) {
  const std::size_t kv = k / W;
#if defined(__AVX512F__)
  for (std::size_t m = 0; m < kv; ++m) {
    __m512 r[16];
    for (std::size_t c = 0; c < 16; ++c) r[c] = _mm512_loadu_ps(x + (c < rows ? c : 0) * k + W * m);
    transpose16(r, xp + m * kXS, kv * kXS);
  }
#else
  for (std::size_t m = 0; m < kv; ++m)
    for (std::size_t l = 0; l < W; ++l)
      for (std::size_t r = 0; r < rows; ++r) xp[(l * kv + m) * kXS + r] = x[r * k + W * m + l];
#endif
}

// Outputs of MR rows of x (at x, out; packed at xp) against the NV·W weight rows at w (packed at
// bp): every lane's product, then the lanes added, then the scalar tail.
template <int MR, int NV>
void lane_block(float* out, const float* x, const float* xp, const float* w, const float* bp, std::size_t k,
                std::size_t d) {
  alignas(64) float c[W][MR][kNR];  // each lane's accumulators
  const std::size_t kv = k / W, kw = kv * W;
  for (std::size_t l = 0; l < W; ++l) lane_tile<MR, NV>(&c[l][0][0], xp + l * kv * kXS, bp + l * kv * kNR, kv);
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      float* o = out + r * d + v * W;
      const batch s = lanes_sum(&c[0][r][v * W], MR * kNR);
      if (kw == k) {
        s.store_unaligned(o);
        continue;
      }
      alignas(64) float lanes[W];
      s.store_aligned(lanes);
      for (std::size_t b = 0; b < W; ++b) {
        float e = lanes[b];
        const float* xr = x + r * k;
        const float* wr = w + (v * W + b) * k;
        for (std::size_t jj = kw; jj < k; ++jj) e += xr[jj] * wr[jj];
        o[b] = e;
      }
    }
}

// The groups of x rows the lane products take in turn: kMR rows at a time, then 4, then 1. Group g's
// first row and size; its packing (pack_x) lies at g·kXS·k floats of a packed x.
struct RowGroup {
  std::size_t t, rows;
};
std::size_t row_groups(std::size_t n) { return n / kMR + n % kMR / 4 + n % kMR % 4; }
RowGroup row_group(std::size_t n, std::size_t g) {
  const std::size_t full = n / kMR, fours = n % kMR / 4;
  if (g < full) return {g * kMR, kMR};
  if (g < full + fours) return {full * kMR + (g - full) * 4, 4};
  return {full * kMR + fours * 4 + (g - full - fours), 1};
}
bool lane_products(std::size_t n, std::size_t k) { return kHaveFma && n >= kLaneMinRows && k >= W; }

// The floats a packed x of n rows of k takes, and its row groups: 0 where the lane products are
// not used (the dot-product tiles read x as it is).
std::size_t packed_x_floats(std::size_t n, std::size_t k, std::size_t* groups) {
  *groups = lane_products(n, k) ? row_groups(n) : 0;
  return *groups * kXS * k;
}

void pack_x_groups(float* xp, const float* x, std::size_t n, std::size_t k, std::size_t g0, std::size_t g1) {
  for (std::size_t g = g0; g < g1; ++g) {
    const RowGroup rg = row_group(n, g);
    pack_x(xp + g * kXS * k, x + rg.t * k, rg.rows, k);
  }
}

// Prefill for weight rows [i, i1) and all n rows of x: the rows' panels are packed once (the chunk
// fits L2, kernels.cpp's blocking), then each group of kMR x rows passes over all of them, so x is
// read from memory once per chunk. x comes packed (xp, packed_x_floats' layout: packed once for all
// the chunks) or, without xp, is packed here group by group. Returns the first row left to the
// dot-product tiles.
std::size_t lane_rows(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d,
                      std::size_t i, std::size_t i1, const float* xp) {
  const std::size_t wide = (i1 - i) / kNR, narrow = (i1 - i - wide * kNR) / W, panels = wide + narrow;
  static thread_local std::vector<float, xsimd::aligned_allocator<float, 64>> packed, own;
  if (packed.size() < panels * kNR * k) packed.resize(panels * kNR * k);
  if (!xp && own.size() < kXS * k) own.resize(kXS * k);
  for (std::size_t p = 0; p < panels; ++p)
    if (p < wide) pack_panel<kNV>(packed.data() + p * kNR * k, w + (i + p * kNR) * k, k);
    else pack_panel<1>(packed.data() + p * kNR * k, w + (i + p * kNR) * k, k);
  const std::size_t groups = row_groups(n);
  for (std::size_t g = 0; g < groups; ++g) {
    const RowGroup rg = row_group(n, g);
    const float* xg = xp ? xp + g * kXS * k : own.data();
    if (!xp) pack_x(own.data(), x + rg.t * k, rg.rows, k);
    auto pass = [&]<int MR>() {
      for (std::size_t p = 0; p < panels; ++p) {
        const std::size_t ip = i + p * kNR;
        if (p < wide) lane_block<MR, kNV>(out + rg.t * d + ip, x + rg.t * k, xg, w + ip * k, packed.data() + p * kNR * k, k, d);
        else lane_block<MR, 1>(out + rg.t * d + ip, x + rg.t * k, xg, w + ip * k, packed.data() + p * kNR * k, k, d);
      }
    };
    if (rg.rows == kMR) pass.template operator()<kMR>();
    else if (rg.rows == 4) pass.template operator()<4>();
    else pass.template operator()<1>();
  }
  return i + wide * kNR + narrow * W;
}

void matmul_rows(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d,
                 std::size_t i0, std::size_t i1, const Blocking& blk) {
  if (n == 1) {
    // Decode: every weight row is read once from memory; kDecodeRI rows in flight keep enough
    // independent FMA chains and memory streams busy.
    std::size_t i = i0;
    for (; i + kDecodeRI <= i1; i += kDecodeRI) tile<1, kDecodeRI>(out + i, x, w + i * k, k, d);
    for (; i < i1; ++i) tile<1, 1>(out + i, x, w + i * k, k, d);
    return;
  }
  // A block of weight rows (half of L2, kernels.cpp's blocking) stays in cache while all of x passes it.
  for (std::size_t jb = i0; jb < i1; jb += blk.weight_rows) {
    const std::size_t je = std::min(i1, jb + blk.weight_rows);
    std::size_t ib = jb;
    // Without FMA (the SSE4.2 build) the lane products' separate multiplies and adds, their
    // broadcasts and their packing cost more than they save (measured ~20% slower): tiles only.
    if (lane_products(n, k)) ib = lane_rows(out, x, w, n, k, d, jb, je, blk.xp);
    // The rest (fewer than W weight rows, few rows of x, or no FMA): dot-product tiles, over blocks
    // of x rows of about a quarter of L2.
    const std::size_t x_rows = std::max<std::size_t>(kRT, blk.weight_rows / 2 / kRT * kRT);
    for (std::size_t tb = 0; tb < n; tb += x_rows) {
      const std::size_t te = std::min(n, tb + x_rows);
      std::size_t t = tb;
      for (; t + kRT <= te; t += kRT) {
        std::size_t i = ib;
        for (; i + kRI <= je; i += kRI) tile<kRT, kRI>(out + t * d + i, x + t * k, w + i * k, k, d);
        for (; i < je; ++i) tile<kRT, 1>(out + t * d + i, x + t * k, w + i * k, k, d);
      }
      for (; t < te; ++t) {
        std::size_t i = ib;
        for (; i + kRI <= je; i += kRI) tile<1, kRI>(out + t * d + i, x + t * k, w + i * k, k, d);
        for (; i < je; ++i) tile<1, 1>(out + t * d + i, x + t * k, w + i * k, k, d);
      }
    }
  }
}

void rmsnorm(float* out, const float* x, const float* weight, std::size_t n, float eps) {
  const float scale = 1.0f / std::sqrt(dot(x, x, n) / static_cast<float>(n) + eps);
  std::size_t i = 0;
  const batch s(scale);
  for (; i + W <= n; i += W)
    (batch::load_unaligned(weight + i) * (s * batch::load_unaligned(x + i))).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}

void axpy(float* y, float a, const float* x, std::size_t n) {
  std::size_t i = 0;
  const batch av(a);
  for (; i + W <= n; i += W)
    xsimd::fma(av, batch::load_unaligned(x + i), batch::load_unaligned(y + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] += a * x[i];
}

void dots(float* out, const float* q, const float* rows, std::size_t stride, std::size_t count, std::size_t n,
          float scale) {
  std::size_t s = 0;
#if defined(__AVX512F__)
  // 16 rows at a time: their lane vectors transposed, then summed vertically in hadd's tree.
  for (; s + 16 <= count; s += 16) {
    __m512 v[16];
    std::size_t i = 0;
    for (std::size_t r = 0; r < 16; ++r) v[r] = dot_lanes(q, rows + (s + r) * stride, n, i);
    alignas(64) float lanes[16][16], sum[16];
    transpose16(v, &lanes[0][0], 16);
    lanes_sum(&lanes[0][0], 16).store_aligned(sum);
    for (std::size_t r = 0; r < 16; ++r) {
      float e = sum[r];
      const float* b = rows + (s + r) * stride;
      for (std::size_t j = i; j < n; ++j) e += q[j] * b[j];
      out[s + r] = e * scale;
    }
  }
#elif defined(__AVX2__)
  // 8 rows at a time: xsimd's hadd on 256 bits sums a lane vector x as ((x0+x4)+(x1+x5))+((x2+x6)+(x3+x7));
  // the same sums for 8 rows come from 4 cross-lane adds and 2 rounds of hadd over row pairs, without a
  // horizontal sum per key (the hot spot of decode attention with one query: a hadd per 64-value key).
  for (; s + 8 <= count; s += 8) {
    __m256 v[8];
    std::size_t i = 0;
    for (std::size_t r = 0; r < 8; ++r) v[r] = dot_lanes(q, rows + (s + r) * stride, n, i);
    __m256 u[4];  // u_p = (a0+a4, a1+a5, a2+a6, a3+a7, b0+b4, …) for rows a = 2p, b = 2p+1
    for (int p = 0; p < 4; ++p)
      u[p] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x20), _mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x31));
    // hadd(u0, u1) = (r0: (0+4)+(1+5), r0: (2+6)+(3+7), r2: …, r2: …, r1, r1, r3, r3); once more: r0 r2 r4 r6 r1 r3 r5 r7
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(u[0], u[1]), _mm256_hadd_ps(u[2], u[3]));
    alignas(32) float sum[8];
    _mm256_store_ps(sum, _mm256_permutevar8x32_ps(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    for (std::size_t r = 0; r < 8; ++r) {
      float e = sum[r];
      const float* b = rows + (s + r) * stride;
      for (std::size_t j = i; j < n; ++j) e += q[j] * b[j];
      out[s + r] = e * scale;
    }
  }
#endif
  for (; s < count; ++s) out[s] = dot(q, rows + s * stride, n) * scale;
}

// axpy's arithmetic element by element (lane-wise FMAs, then the scalar tail), rows in order.
void axpys(float* y, const float* a, const float* rows, std::size_t stride, std::size_t count, std::size_t n) {
  // vectors of y kept in registers: a 64-value attention head in one pass with AVX-512 (4) and AVX2 (8)
  constexpr std::size_t B = W >= 16 ? 4 : 8;
  std::size_t i = 0;
  for (; i + B * W <= n; i += B * W) {
    batch acc[B];
    GB_UNROLL for (std::size_t b = 0; b < B; ++b) acc[b] = batch::load_unaligned(y + i + b * W);
    for (std::size_t s = 0; s < count; ++s) {
      const batch av(a[s]);
      GB_UNROLL for (std::size_t b = 0; b < B; ++b)
        acc[b] = xsimd::fma(av, batch::load_unaligned(rows + s * stride + i + b * W), acc[b]);
    }
    GB_UNROLL for (std::size_t b = 0; b < B; ++b) acc[b].store_unaligned(y + i + b * W);
  }
  for (; i + W <= n; i += W) {
    batch acc = batch::load_unaligned(y + i);
    for (std::size_t s = 0; s < count; ++s) acc = xsimd::fma(batch(a[s]), batch::load_unaligned(rows + s * stride + i), acc);
    acc.store_unaligned(y + i);
  }
  for (; i < n; ++i)
    for (std::size_t s = 0; s < count; ++s) y[i] += a[s] * rows[s * stride + i];
}

// ---- libm's expf in vectors ----------------------------------------------------------------------
// glibc's expf (2.36, sysdeps/ieee754/flt-32/e_expf.c, the __expf_fma build libm picks on a CPU with
// FMA): in double, x·N/ln2 = k + r with N = 32; exp(x) = 2^(k/N)·2^(r/N), 2^(k/N) from a 32-entry
// table with k/N's integer part added to its exponent, 2^(r/N) a cubic in r. The lanes run those
// operations in libm's order, each FMA where libm's has one, and give its results outside the
// range it computes (0, the least denormal, +inf, NaN), so every value is std::exp's bits (checked
// against std::exp at start-up: exp_in_vectors).
#if defined(__FMA__) && defined(__AVX2__)
constexpr std::uint64_t kExp2fTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
// The constants of glibc's __exp2f_data, as its words.
constexpr double kInvLn2N = std::bit_cast<double>(std::uint64_t{0x40471547652b82fe});  // N / ln 2
constexpr double kShift = std::bit_cast<double>(std::uint64_t{0x4338000000000000});    // 1.5·2^52: rounds to an integer in the low bits
constexpr double kExpC0 = std::bit_cast<double>(std::uint64_t{0x3ebc6af84b912394});    // the cubic's coefficients, scaled by 1/N^3,
constexpr double kExpC1 = std::bit_cast<double>(std::uint64_t{0x3f2ebfce50fac4f3});    // 1/N^2
constexpr double kExpC2 = std::bit_cast<double>(std::uint64_t{0x3f962e42ff0c52d6});    // and 1/N
// Where libm computes: from kExpLow to kExpHigh. Above, +inf; below, the least denormal (libm's
// "may underflow" case), and +0 below kExpZero.
constexpr float kExpHigh = 0x1.62e42ep6f, kExpLow = -0x1.9d1d9ep6f, kExpZero = -0x1.9fe368p6f;

// The lanes: D floats (lanes_f) and the same D as doubles (lanes_d, a full vector); converting
// between them and looking up the table are this instruction set's own.
// (GCC 12 reports the _mm512_undefined_* inside the AVX-512 conversions and gather as uninitialized,
// as above: a false positive, every lane is written.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
using lanes_d = xsimd::batch<double>;
#if defined(__AVX512F__)
using lanes_f = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
inline lanes_d widen(lanes_f x) { return _mm512_cvtps_pd(x); }
inline lanes_f narrow(lanes_d x) { return _mm512_cvtpd_ps(x); }
// T[k mod N] + (k << (52 − 5)), k in z's low bits: 2^(k/N) as the bits of a double
inline lanes_d scale(lanes_d z) {
  const __m512i k = _mm512_castpd_si512(z), t = _mm512_i64gather_epi64(_mm512_and_si512(k, _mm512_set1_epi64(31)), kExp2fTable, 8);
  return _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(k, 47)));
}
#else
using lanes_f = xsimd::batch<float, xsimd::sse4_2>;
inline lanes_d widen(lanes_f x) { return _mm256_cvtps_pd(x); }
inline lanes_f narrow(lanes_d x) { return _mm256_cvtpd_ps(x); }
inline lanes_d scale(lanes_d z) {
  const __m256i k = _mm256_castpd_si256(z);
  const __m256i t = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(kExp2fTable), _mm256_and_si256(k, _mm256_set1_epi64x(31)), 8);
  return _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(k, 47)));
}
#endif
static_assert(lanes_f::size == lanes_d::size);

// exp(x) for D floats, as __expf_fma computes each one.
inline lanes_f exp_lanes(lanes_f x) {
  using F = lanes_f;
  using D = lanes_d;
  // libm's formula, on x held inside the range where libm uses it (lanes outside are replaced below)
  const D xd = widen(xsimd::min(xsimd::max(x, F(kExpLow)), F(kExpHigh)));
  const D z = xsimd::fma(D(kInvLn2N), xd, D(kShift));  // k + 1.5·2^52
  const D kd = z - D(kShift);                          // k
  const D r = xsimd::fms(D(kInvLn2N), xd, kd);         // r = x·N/ln2 − k, |r| <= 1/2
  const D c = xsimd::fma(D(kExpC0), r, D(kExpC1));
  const D p = xsimd::fma(c, r * r, xsimd::fma(D(kExpC2), r, D(1.0)));  // 2^(r/N) ≈ C0·r³ + C1·r² + C2·r + 1
  F y = narrow(p * scale(z));                                            // · 2^(k/N)
  // libm's answers outside: underflow, overflow, NaN (x + x: the same quiet NaN)
  y = xsimd::select(x < F(kExpLow), xsimd::select(x < F(kExpZero), F(0.0f), F(0x1p-149f)), y);
  y = xsimd::select(F(kExpHigh) < x, F(std::numeric_limits<float>::infinity()), y);
  return xsimd::select(xsimd::isnan(x), x + x, y);
}

// Whether exp_lanes gives std::exp's bits here: libm is a shared library, and another glibc may
// compute expf otherwise. Checked once, over values across the whole range, its special values and
// the ends of libm's cases.
bool lanes_match_libm() {
  std::vector<float> x;
  for (int i = -2048; i <= 2048; ++i) x.push_back(static_cast<float>(i) * (110.0f / 2048.0f));
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 0x000fff7f) x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  for (float e : {kExpHigh, kExpLow, kExpZero, std::nextafter(kExpHigh, 0.0f), std::nextafter(kExpLow, 0.0f), std::nextafter(kExpZero, 0.0f),
                  88.0f, -88.0f, 0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()})
    x.push_back(e);
  constexpr std::size_t D = lanes_f::size;
  while (x.size() % D) x.push_back(1.0f);
  for (std::size_t i = 0; i < x.size(); i += D) {
    float y[D];
    exp_lanes(lanes_f::load_unaligned(x.data() + i)).store_unaligned(y);
    for (std::size_t j = 0; j < D; ++j)
      if (std::bit_cast<std::uint32_t>(y[j]) != std::bit_cast<std::uint32_t>(std::exp(x[i + j]))) return false;
  }
  return true;
}

bool exp_in_vectors() {
  static const bool ok = lanes_match_libm();
  return ok;
}

void exp_floats(const float* x, float* y, std::size_t n) {
  std::size_t i = 0;
  if (exp_in_vectors())
    for (; i + lanes_f::size <= n; i += lanes_f::size) exp_lanes(lanes_f::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}
#pragma GCC diagnostic pop
#else
// Without FMA libm's expf rounds otherwise (its SSE2 build): one std::exp per value.
bool exp_in_vectors() { return false; }
void exp_floats(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
#endif

// kernels::softmax_scalar's numbers, with the maximum and the division vectorized: a maximum of
// numbers is the same in any order (of two equal zeros either sign may win, and x − (±0) and
// exp(±0) do not tell them apart), and a division rounds the same in a vector. Each exp is libm's
// expf (exp_floats) and the sum stays one chain in order. With a NaN the maximum depends on the order:
// then std::max_element's, as the scalar version.
// (GCC 12 reports the _mm512_undefined_ps inside _mm512_max_ps as uninitialized, as above.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
void softmax(float* x, std::size_t n) {
  if (n == 0) return;
  float mx = x[0];
  std::size_t i = 0;
  if (n >= W) {
    batch m = batch::load_unaligned(x);
    xsimd::batch_bool<float> nan = xsimd::isnan(m);
    for (i = W; i + W <= n; i += W) {
      const batch v = batch::load_unaligned(x + i);
      m = xsimd::max(m, v);
      nan = nan | xsimd::isnan(v);
    }
    alignas(64) float lanes[W];
    m.store_aligned(lanes);
    for (std::size_t l = 1; l < W; ++l) mx = std::max(mx, lanes[l]);
    mx = std::max(mx, lanes[0]);
    if (xsimd::any(nan)) i = 0, mx = x[0];
  }
  for (; i < n; ++i) mx = mx < x[i] ? x[i] : mx;  // std::max_element's comparison
  const batch mv(mx);
  for (i = 0; i + W <= n; i += W) (batch::load_unaligned(x + i) - mv).store_unaligned(x + i);
  for (; i < n; ++i) x[i] -= mx;
  exp_floats(x, x, n);
  float sum = 0.0f;
  for (i = 0; i < n; ++i) sum += x[i];
  const batch sv(sum);
  for (i = 0; i + W <= n; i += W) (batch::load_unaligned(x + i) / sv).store_unaligned(x + i);
  for (; i < n; ++i) x[i] /= sum;
}
#pragma GCC diagnostic pop

// ---- attention over a block of queries (prefill) -----------------------------------------------
// Keys packed W to a block, lane-major: key s's value j at kt[(s / W)·n·W + j·W + s % W], so one
// vector holds value j of W keys and a query's scores against those keys come out as one vector.
// Only for n a multiple of W (no scalar tail) and with FMA: there lanes_sum is xsimd::hadd's tree,
// which the lane products already rely on (without FMA dots sums through xsimd::hadd, not checked
// against lanes_sum). kernels.cpp falls back to blocks of one key (plain rows) elsewhere.
#if defined(__FMA__)
constexpr std::size_t kKeyBlock = W;
#else
constexpr std::size_t kKeyBlock = 0;
#endif

void pack_keys(float* kt, const float* rows, std::size_t stride, std::size_t count, std::size_t n, std::size_t at) {
  std::size_t s = 0;
#if defined(__AVX512F__)
  // Whole blocks of 16 keys: 16×16 transposes (transpose16 stores aligned; kt is 64-byte aligned).
  if (at % W == 0)
    for (; s + W <= count; s += W) {
      float* blk = kt + (at + s) / W * n * W;
      for (std::size_t c = 0; c < n / W; ++c) {
        __m512 r[16];
        for (std::size_t i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(rows + (s + i) * stride + c * W);
        transpose16(r, blk + c * W * W, W);
      }
    }
#endif
  for (; s < count; ++s) {
    float* d = kt + (at + s) / W * n * W + (at + s) % W;
    for (std::size_t j = 0; j < n; ++j) d[j * W] = rows[s * stride + j];
  }
}

// NQ queries' scores against one block of W packed keys: dot_lanes' sums lane by lane (lane l of a
// key's lane vector is a chain over values j ≡ l mod W, 4 chains then (s0 + s1) + (s2 + s3)), here
// with the W keys across the vector, then lanes_sum's tree over l and the scale: dot()·scale bit
// for bit. One load of each key vector serves the NQ queries.
template <int NQ>
void dots_block(float* out, std::size_t out_stride, const float* q, std::size_t q_stride, const float* kb, std::size_t n,
                float scale) {
  const std::size_t chunks = n / W, full = chunks / 4 * 4;
  batch v[NQ][W];
  for (std::size_t l = 0; l < W; ++l) {
    batch s[NQ][4];
    GB_UNROLL for (int r = 0; r < NQ; ++r)
      GB_UNROLL for (int i = 0; i < 4; ++i) s[r][i] = batch(0.0f);
    for (std::size_t c = 0; c < full; c += 4)
      GB_UNROLL for (std::size_t i = 0; i < 4; ++i) {
        const batch kv = batch::load_aligned(kb + ((c + i) * W + l) * W);
        GB_UNROLL for (int r = 0; r < NQ; ++r) s[r][i] = xsimd::fma(batch(q[r * q_stride + (c + i) * W + l]), kv, s[r][i]);
      }
    for (std::size_t c = full; c < chunks; ++c) {
      const batch kv = batch::load_aligned(kb + (c * W + l) * W);
      GB_UNROLL for (int r = 0; r < NQ; ++r) s[r][0] = xsimd::fma(batch(q[r * q_stride + c * W + l]), kv, s[r][0]);
    }
    GB_UNROLL for (int r = 0; r < NQ; ++r) v[r][l] = (s[r][0] + s[r][1]) + (s[r][2] + s[r][3]);
  }
  const batch sc(scale);
  GB_UNROLL for (int r = 0; r < NQ; ++r) {
    GB_UNROLL for (std::size_t h = W / 2; h >= 4; h /= 2)
      GB_UNROLL for (std::size_t l = 0; l < h; ++l) v[r][l] = v[r][l] + v[r][l + h];
    (((v[r][0] + v[r][1]) + (v[r][2] + v[r][3])) * sc).store_unaligned(out + r * out_stride);
  }
}

// out[r·out_stride + s] = dot(q + r·q_stride, key s, n)·scale for r < nq, s < count (keys packed by
// pack_keys at 0), and garbage up to the block's end (out rows hold ⌈count/W⌉·W). Key blocks outer,
// so a block stays in L1 while every query passes it.
void dots_packed(float* out, std::size_t out_stride, const float* q, std::size_t q_stride, std::size_t nq, const float* kt,
                 std::size_t count, std::size_t n, float scale) {
  for (std::size_t b = 0; b * W < count; ++b) {
    const float* kb = kt + b * n * W;
    std::size_t r = 0;
    for (; r + 4 <= nq; r += 4) dots_block<4>(out + r * out_stride + b * W, out_stride, q + r * q_stride, q_stride, kb, n, scale);
    if (nq - r == 3) dots_block<3>(out + r * out_stride + b * W, out_stride, q + r * q_stride, q_stride, kb, n, scale);
    else if (nq - r == 2) dots_block<2>(out + r * out_stride + b * W, out_stride, q + r * q_stride, q_stride, kb, n, scale);
    else if (nq - r == 1) dots_block<1>(out + r * out_stride + b * W, out_stride, q + r * q_stride, q_stride, kb, n, scale);
  }
}

// axpys for NQ rows of y at once (each with its own weights a + r·a_stride) over the same rows:
// every element's chain of FMAs is axpys', and one load of a row's vector serves the NQ outputs.
#if defined(__AVX512F__)
constexpr std::size_t kAxpyVecs = 4;  // 4 queries × 4 vectors of y = 16 accumulators of 32 registers
#else
constexpr std::size_t kAxpyVecs = 2;  // 8 of 16
#endif
template <int NQ>
void axpys_q(float* y, std::size_t y_stride, const float* a, std::size_t a_stride, const float* rows, std::size_t stride,
             std::size_t count, std::size_t n) {
  constexpr std::size_t B = kAxpyVecs;
  std::size_t i = 0;
  for (; i + B * W <= n; i += B * W) {
    batch acc[NQ][B];
    GB_UNROLL for (int r = 0; r < NQ; ++r)
      GB_UNROLL for (std::size_t b = 0; b < B; ++b) acc[r][b] = batch::load_unaligned(y + r * y_stride + i + b * W);
    for (std::size_t s = 0; s < count; ++s) {
      batch av[NQ];
      GB_UNROLL for (int r = 0; r < NQ; ++r) av[r] = batch(a[r * a_stride + s]);
      GB_UNROLL for (std::size_t b = 0; b < B; ++b) {
        const batch x = batch::load_unaligned(rows + s * stride + i + b * W);
        GB_UNROLL for (int r = 0; r < NQ; ++r) acc[r][b] = xsimd::fma(av[r], x, acc[r][b]);
      }
    }
    GB_UNROLL for (int r = 0; r < NQ; ++r)
      GB_UNROLL for (std::size_t b = 0; b < B; ++b) acc[r][b].store_unaligned(y + r * y_stride + i + b * W);
  }
  // The rest, query by query: axpys' own code, so its scalar tail is the same.
  if (i < n)
    GB_UNROLL for (int r = 0; r < NQ; ++r) axpys(y + r * y_stride + i, a + r * a_stride, rows + i, stride, count, n - i);
}

void axpys_rows(float* y, std::size_t y_stride, const float* a, std::size_t a_stride, std::size_t nq, const float* rows,
                std::size_t stride, std::size_t count, std::size_t n) {
  std::size_t r = 0;
  for (; r + 4 <= nq; r += 4) axpys_q<4>(y + r * y_stride, y_stride, a + r * a_stride, a_stride, rows, stride, count, n);
  if (nq - r == 3) axpys_q<3>(y + r * y_stride, y_stride, a + r * a_stride, a_stride, rows, stride, count, n);
  else if (nq - r == 2) axpys_q<2>(y + r * y_stride, y_stride, a + r * a_stride, a_stride, rows, stride, count, n);
  else if (nq - r == 1) axpys_q<1>(y + r * y_stride, y_stride, a + r * a_stride, a_stride, rows, stride, count, n);
}

// ---- quantized dot products (quant::vec_dot) -------------------------------------------------------

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
    s += dot(fa, fb, m);
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

#if defined(__AVX2__)
// fp16 → f32 in one instruction (exact, like half_to_f32).
float fp16(std::uint16_t h) { return _cvtsh_ss(h); }
float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// Σ a·b over 32 signed bytes as 8 int32 lanes (sign-extended to 16 bits, so exact for any bytes).
[[maybe_unused]] __m256i dot32(const std::int8_t* a, const std::int8_t* b) {
  return _mm256_add_epi32(dot16(load16(a), load16(b)), dot16(load16(a + 16), load16(b + 16)));
}
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
// VNNI's dpbusd multiplies unsigned by signed bytes and sums each 4 into int32, with no 16-bit
// saturation. Weights are made unsigned by adding 128 (xor 0x80), and 128·Σy is subtracted
// again: exact for any bytes, −128 included.
__m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Per-block integer products Σ w·y as 8 int32 lanes. `yv` is the activation block's bytes and `yo`
// the weight offset's share (128·Σy for Q8_0, 8·Σy for Q4_0), both computed once per activation
// block however many weight rows use them.
constexpr bool kVnni = true;
__m256i q8_offset() { return _mm256_set1_epi8(static_cast<char>(0x80)); }
__m256i q4_offset() { return _mm256_set1_epi8(8); }
__m256i y_offset(__m256i offset, __m256i yv) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), offset, yv); }
__m256i prod_q8_0(const block_q8_0& x, __m256i yv, __m256i yo) {
  return _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_xor_si256(load32(x.qs), q8_offset()), yv), yo);
}
// A block's quants as the bytes pmul multiplies (Q4_0/Q5_0: unpacked once for several activation rows).
__m256i pmul(__m256i u, __m256i yv, __m256i yo) { return _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, yv), yo); }
__m256i unpack_q4_0(const block_q4_0& x) {
  const __m128i q = load16(x.qs);
  return _mm256_set_m128i(hi_nibbles(q), lo_nibbles(q));  // values 0..15, then 16..31, as 0..15 each
}
__m256i prod_q4_0(const block_q4_0& x, __m256i yv, __m256i yo) { return pmul(unpack_q4_0(x), yv, yo); }  // Σ (q − 8)·y
// Q5_0 (#32): the 5-bit quants 0..31 (fifth bits from the 32 qh bits, one masked move), minus 16·Σy.
__m256i q5_offset() { return _mm256_set1_epi8(16); }
__m256i unpack_q5_0(const block_q5_0& x) {
  std::uint32_t qh;
  std::memcpy(&qh, x.qh, 4);
  const __m128i q = load16(x.qs);
  return _mm256_or_si256(_mm256_set_m128i(hi_nibbles(q), lo_nibbles(q)), _mm256_maskz_mov_epi8(qh, _mm256_set1_epi8(16)));
}
__m256i prod_q5_0(const block_q5_0& x, __m256i yv, __m256i yo) { return pmul(unpack_q5_0(x), yv, yo); }  // Σ (q − 16)·y
#else
__m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
constexpr bool kVnni = false;
__m256i q8_offset() { return _mm256_setzero_si256(); }
__m256i q4_offset() { return _mm256_set1_epi8(8); }
// The int32 lanes pmul gives (lane i: bytes 2i, 2i+1, 16+2i, 17+2i of the block) from maddubs' int16 pairs
// (pair k: bytes 2k, 2k+1): lane i is pair i plus pair 8+i, the two 128-bit halves added.
__m128i fold_pairs(__m256i pairs) { return _mm_add_epi16(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1)); }
// Decode of Q4_0/Q5_0 (#42): the weight's unsigned quants times the activation's signed bytes in one
// maddubs, minus offset·Σy over the same bytes, computed here once per activation block (in the low half)
// for every weight row that uses it. Exact in int16: |pair| ≤ 2·31·127, a lane ≤ 2·7874 + 16·4·127 < 2^15.
__m256i y_offset(__m256i offset, __m256i yv) { return _mm256_castsi128_si256(fold_pairs(_mm256_maddubs_epi16(offset, yv))); }
// Σ (q − offset)·y as pmul's lanes, from the unsigned quants u (0..15 or 0..31): the same integers.
__m256i umul(__m256i u, __m256i yv, __m256i yo) {
  return _mm256_cvtepi16_epi32(_mm_sub_epi16(fold_pairs(_mm256_maddubs_epi16(u, yv)), _mm256_castsi256_si128(yo)));
}
__m256i nibbles_q4_0(const block_q4_0& x) {
  const __m128i q = load16(x.qs);
  return _mm256_set_m128i(hi_nibbles(q), lo_nibbles(q));  // values 0..15 (unsigned), elements 0..15 then 16..31
}
__m256i prod_q8_0(const block_q8_0& x, __m256i yv, __m256i) {
  return _mm256_add_epi32(dot16(load16(x.qs), _mm256_castsi256_si128(yv)), dot16(load16(x.qs + 16), _mm256_extracti128_si256(yv, 1)));
}
// Q4_0/Q5_0's quants as signed bytes, unpacked once for several activation rows, and their product.
__m256i pmul(__m256i v, __m256i yv, __m256i) {
  return _mm256_add_epi32(dot16(_mm256_castsi256_si128(v), _mm256_castsi256_si128(yv)), dot16(_mm256_extracti128_si256(v, 1), _mm256_extracti128_si256(yv, 1)));
}
__m256i unpack_q4_0(const block_q4_0& x) {
  const __m128i eight = _mm_set1_epi8(8);
  const __m128i q = load16(x.qs);
  return _mm256_set_m128i(_mm_sub_epi8(hi_nibbles(q), eight), _mm_sub_epi8(lo_nibbles(q), eight));  // values 0..15, then 16..31
}
__m256i prod_q4_0(const block_q4_0& x, __m256i yv, __m256i yo) { return umul(nibbles_q4_0(x), yv, yo); }
__m256i q5_offset() { return _mm256_set1_epi8(16); }
// Q5_0: the fifth bits as 0xFF bytes (ggml's bytes_from_bits_32), the quants minus 16 as signed bytes.
__m256i unpack_q5_0(const block_q5_0& x) {
  std::uint32_t qh;
  std::memcpy(&qh, x.qh, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  const __m256i bits = _mm256_cmpeq_epi8(_mm256_or_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), shuf),
                                                         _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)),
                                         _mm256_set1_epi64x(-1));
  const __m128i q = load16(x.qs);
  return _mm256_sub_epi8(_mm256_or_si256(_mm256_set_m128i(hi_nibbles(q), lo_nibbles(q)), _mm256_and_si256(bits, _mm256_set1_epi8(16))),
                         _mm256_set1_epi8(16));
}
// The same quants 0..31 unsigned, for umul.
__m256i quants_q5_0(const block_q5_0& x) { return _mm256_add_epi8(unpack_q5_0(x), _mm256_set1_epi8(16)); }
__m256i prod_q5_0(const block_q5_0& x, __m256i yv, __m256i yo) { return umul(quants_q5_0(x), yv, yo); }
#endif

// step(b, slot) for blocks b = 0..nb−1, block b into accumulator slot b mod Acc (1 or 2): the
// order q_rows (vec_dot) and q_tile keep, so that either gives the other's bits.
template <int Acc, class Step>
[[gnu::always_inline]] inline void blocks_in_slots(std::size_t nb, const Step& step) {
  std::size_t b = 0;
  if constexpr (Acc == 2)
    for (; b + 2 <= nb; b += 2) {
      step(b, 0);
      step(b + 1, 1);
    }
  for (; b < nb; ++b) step(b, 0);
}

// R weight rows against one Q8_0 activation row: each activation block is loaded (and its offset
// share computed) once for all R rows, and R rows stream from memory at once. Each row's sum is
// the one-row kernel's: block b's lanes, scaled by d_w·d_x, accumulate lane-wise into accumulator
// b mod Acc, then the accumulators are added and the lanes summed — so a row's result is the same
// bits whichever R (or thread, or chunk) computed it.
template <class Blk, int R, int Acc, __m256i (*Prod)(const Blk&, __m256i, __m256i)>
void q_rows(float* out, const std::byte* w, std::size_t wrb, const block_q8_0* y, std::size_t nb, __m256i offset,
            std::size_t ahead) {
  __m256 acc[R][2];
  GB_UNROLL for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  auto step = [&](std::size_t b, int slot) {
    const __m256i yv = load32(y[b].qs);
    // (Q8_0 without VNNI needs no offset: its product is of signed bytes.)
    const __m256i yo = kVnni || !std::is_same_v<Blk, block_q8_0> ? y_offset(offset, yv) : _mm256_setzero_si256();
    const float dy = fp16(y[b].d);
    GB_UNROLL for (int r = 0; r < R; ++r) {
      const Blk& x = reinterpret_cast<const Blk*>(w + r * wrb)[b];
      // Software prefetch `ahead` bytes on: this machine's hardware prefetchers leave the row
      // streams waiting on memory (measured: without it, 110M Q8_0 decode runs ~1.6× slower).
      _mm_prefetch(reinterpret_cast<const char*>(&x) + ahead, _MM_HINT_T0);
      acc[r][slot] = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x.d) * dy), _mm256_cvtepi32_ps(Prod(x, yv, yo)), acc[r][slot]);
    }
  };
  blocks_in_slots<Acc>(nb, step);
  GB_UNROLL for (int r = 0; r < R; ++r) out[r] = hsum8(Acc == 2 ? _mm256_add_ps(acc[r][0], acc[r][1]) : acc[r][0]);
}

float dot_q8_0_simd(const block_q8_0* x, const block_q8_0* y, std::size_t nb) {
  float out;
  q_rows<block_q8_0, 1, 2, prod_q8_0>(&out, reinterpret_cast<const std::byte*>(x), 0, y, nb, q8_offset(), 1024);
  return out;
}

float dot_q4_0_simd(const block_q4_0* x, const block_q8_0* y, std::size_t nb) {
  float out;
  q_rows<block_q4_0, 1, 1, prod_q4_0>(&out, reinterpret_cast<const std::byte*>(x), 0, y, nb, q4_offset(), 1024);
  return out;
}

// Q5_0 as Q4_0 (#32): lane-wise float sums, so several rows per pass and prefill's groups of rows.
float dot_q5_0_simd(const block_q5_0* x, const block_q8_0* y, std::size_t nb) {
  float out;
  q_rows<block_q5_0, 1, 1, prod_q5_0>(&out, reinterpret_cast<const std::byte*>(x), 0, y, nb, q5_offset(), 1024);
  return out;
}

#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
// GCC 12 reports the _mm512_undefined_* inside its own intrinsics' headers as uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Q8_0 with 512-bit vectors: rows r and r+1 share one vector (r in the low half, r+1 in the high
// half), so each instruction serves two rows, and the 8 rows' scales of a block come from one
// gather and one conversion. Lane for lane it is q_rows<block_q8_0, 8, 2>: the same products,
// scales and sums in the same order, so the same bits (tests/test_kernels.cpp).
void q8_0_rows8_512(float* out, const std::byte* w, std::size_t wrb, const block_q8_0* y, std::size_t nb,
                    const std::byte* pf, const std::byte* far) {
  constexpr int P = 4;  // pairs of rows
  __m512 acc[P][2];
  GB_UNROLL for (int p = 0; p < P; ++p) acc[p][0] = acc[p][1] = _mm512_setzero_ps();
  const __m512i off = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m256i rows = _mm256_mullo_epi32(_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7), _mm256_set1_epi32(static_cast<int>(wrb)));
  // The scales are converted as 16 halves, the 8 rows' at the even ones (the odd ones are each
  // block's first two quants, converted and never used), so pick takes row r from lane 2r.
  __m512i pick[P];
  GB_UNROLL for (int p = 0; p < P; ++p)
    pick[p] = _mm512_inserti64x4(_mm512_set1_epi32(4 * p), _mm256_set1_epi32(4 * p + 2), 1);
  auto step = [&](std::size_t b, int slot) {
    const __m512i yv = _mm512_broadcast_i64x4(load32(y[b].qs));
    // −128·Σy seeds each product's accumulator, so dpbusd leaves Σ (w+128)·y − 128·Σy = Σ w·y
    // without a subtraction per row pair (integers, so the same exact sums).
    const __m512i nyo = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, yv));
    // The 8 rows' fp16 scales of block b (the 4 bytes read at each block's start lie inside it).
    const __m256i dw = _mm256_i32gather_epi32(reinterpret_cast<const int*>(w + b * sizeof(block_q8_0)), rows, 1);
    const __m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(dw), _mm512_set1_ps(fp16(y[b].d)));
    GB_UNROLL for (int p = 0; p < P; ++p) {
      const auto* x0 = reinterpret_cast<const block_q8_0*>(w + (2 * p) * wrb) + b;
      const auto* x1 = reinterpret_cast<const block_q8_0*>(w + (2 * p + 1) * wrb) + b;
      const __m512i xv = _mm512_inserti64x4(_mm512_zextsi256_si512(load32(x0->qs)), load32(x1->qs), 1);
      const __m512i pr = _mm512_dpbusd_epi32(nyo, _mm512_xor_si512(xv, off), yv);
      acc[p][slot] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick[p], sc), _mm512_cvtepi32_ps(pr), acc[p][slot]);
    }
  };
  // Each row prefetches the same place of its row in the next pass into L1 (`pf`: that pass's
  // rows), and of its row kFarPasses passes on into the outer caches (`far`) — null when that pass
  // lies beyond the matrix. Once per cache line:
  // addresses at most 64 bytes apart touch every line between them. With the L1 prefetches alone
  // the rows streamed at ~11 GB/s where a bare read of the same pattern reaches ~14; the far ones
  // close most of that gap (measured, 768-wide rows: 8.6 against 9.6 CPU ms per 117 MB).
  // (asm statements, not _mm_prefetch: GCC 12 dropped those prefetches here, all of them.)
  auto prefetch = [&](std::size_t b, bool four) {
    const char* p = reinterpret_cast<const char*>(pf + b * sizeof(block_q8_0));
    GB_UNROLL for (int r = 0; r < 2 * P; ++r) {
      asm volatile("prefetcht0 %0" : : "m"(p[r * wrb]));
      if (four) {
        asm volatile("prefetcht0 %0" : : "m"(p[r * wrb + 64]));
        asm volatile("prefetcht0 %0" : : "m"(p[r * wrb + 128]));
      }
    }
    if (far) {
      const char* q = reinterpret_cast<const char*>(far + b * sizeof(block_q8_0));
      GB_UNROLL for (int r = 0; r < 2 * P; ++r) {
        asm volatile("prefetcht2 %0" : : "m"(q[r * wrb]));
        if (four) {
          asm volatile("prefetcht2 %0" : : "m"(q[r * wrb + 64]));
          asm volatile("prefetcht2 %0" : : "m"(q[r * wrb + 128]));
        }
      }
    }
  };
  std::size_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    if (pf) prefetch(b, true);  // 3 addresses for 4 blocks' 136 bytes
    step(b, 0);
    step(b + 1, 1);
    step(b + 2, 0);
    step(b + 3, 1);
  }
  GB_UNROLL for (int j = 0; j < 3; ++j)  // the last nb mod 4 blocks
    if (b + j < nb) {
      if (pf) prefetch(b + j, false);
      step(b + j, j % 2);
    }
  GB_UNROLL for (int p = 0; p < P; ++p) {
    const __m512 s = _mm512_add_ps(acc[p][0], acc[p][1]);
    out[2 * p] = hsum8(_mm512_castps512_ps256(s));
    out[2 * p + 1] = hsum8(_mm512_extractf32x8_ps(s, 1));
  }
}

// Q4_0 and Q5_0 decode with 512-bit vectors (#32), as q8_0_rows8_512: rows r and r+1 share one
// vector. A block's 16 quant bytes of row r fill the low 256 bits twice, r+1's the high ones; one
// shift per 16-bit word (0 in the first 128-bit quarter of each half, 4 in the second) and one mask
// leave unpack_q4_0's bytes (values 0..15, then 16..31) for both rows. Lane for lane it is
// q_rows<Blk, 8, 1>: each block's exact integer lanes Σ (q − o)·y (−o·Σy seeds dpbusd, integers
// either way), scaled by fp16(d_w)·fp16(d_y) into one accumulator per row, then the lanes summed,
// so the same bits as vec_dot (tests/test_kernels.cpp).
[[gnu::always_inline]] inline __m512i unpack2(const block_q4_0& x0, const block_q4_0& x1) {
  const __m512i v = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(load16(x0.qs)), 0xFF00, load16(x1.qs));
  const __m512i shift = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi16(v, shift), _mm512_set1_epi8(0x0F));
}
// Q5_0: the fifth bits of both rows' 32 values as one 64-bit byte mask (row r's in its low half).
[[gnu::always_inline]] inline __m512i unpack2(const block_q5_0& x0, const block_q5_0& x1) {
  std::uint32_t h0, h1;
  std::memcpy(&h0, x0.qh, 4);
  std::memcpy(&h1, x1.qh, 4);
  const __m512i v = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(load16(x0.qs)), 0xFF00, load16(x1.qs));
  const __m512i shift = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0);
  const __m512i q = _mm512_and_si512(_mm512_srlv_epi16(v, shift), _mm512_set1_epi8(0x0F));
  return _mm512_or_si512(q, _mm512_maskz_mov_epi8(_cvtu64_mask64(h0 | (std::uint64_t{h1} << 32)), _mm512_set1_epi8(16)));
}
template <class Blk>
void q4_rows8_512(float* out, const std::byte* w, std::size_t wrb, const block_q8_0* y, std::size_t nb, char offset,
                  const std::byte* pf, const std::byte* far) {
  constexpr int P = 4;  // pairs of rows
  __m512 acc[P];
  GB_UNROLL for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  const __m512i off = _mm512_set1_epi8(offset);
  const __m256i rows = _mm256_mullo_epi32(_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7), _mm256_set1_epi32(static_cast<int>(wrb)));
  __m512i pick[P];  // as in q8_0_rows8_512: row r's scale is lane 2r of the converted halves
  GB_UNROLL for (int p = 0; p < P; ++p)
    pick[p] = _mm512_inserti64x4(_mm512_set1_epi32(4 * p), _mm256_set1_epi32(4 * p + 2), 1);
  auto step = [&](std::size_t b) {
    const __m512i yv = _mm512_broadcast_i64x4(load32(y[b].qs));
    const __m512i nyo = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, yv));
    const __m256i dw = _mm256_i32gather_epi32(reinterpret_cast<const int*>(w + b * sizeof(Blk)), rows, 1);
    const __m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(dw), _mm512_set1_ps(fp16(y[b].d)));
    GB_UNROLL for (int p = 0; p < P; ++p) {
      const Blk& x0 = reinterpret_cast<const Blk*>(w + (2 * p) * wrb)[b];
      const Blk& x1 = reinterpret_cast<const Blk*>(w + (2 * p + 1) * wrb)[b];
      const __m512i pr = _mm512_dpbusd_epi32(nyo, unpack2(x0, x1), yv);
      acc[p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick[p], sc), _mm512_cvtepi32_ps(pr), acc[p]);
    }
  };
  // Prefetches as q8_0_rows8_512's: 4 blocks are 72 (Q4_0) or 88 (Q5_0) bytes, so two addresses
  // 64 bytes apart per 4 blocks keep consecutive addresses at most 64 bytes apart.
  auto prefetch = [&](std::size_t b, bool two) {
    const char* p = reinterpret_cast<const char*>(pf + b * sizeof(Blk));
    GB_UNROLL for (int r = 0; r < 2 * P; ++r) {
      asm volatile("prefetcht0 %0" : : "m"(p[r * wrb]));
      if (two) asm volatile("prefetcht0 %0" : : "m"(p[r * wrb + 64]));
    }
    if (far) {
      const char* q = reinterpret_cast<const char*>(far + b * sizeof(Blk));
      GB_UNROLL for (int r = 0; r < 2 * P; ++r) {
        asm volatile("prefetcht2 %0" : : "m"(q[r * wrb]));
        if (two) asm volatile("prefetcht2 %0" : : "m"(q[r * wrb + 64]));
      }
    }
  };
  std::size_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    if (pf) prefetch(b, true);
    step(b);
    step(b + 1);
    step(b + 2);
    step(b + 3);
  }
  GB_UNROLL for (int j = 0; j < 3; ++j)  // the last nb mod 4 blocks
    if (b + j < nb) {
      if (pf) prefetch(b + j, false);
      step(b + j);
    }
  GB_UNROLL for (int p = 0; p < P; ++p) {
    out[2 * p] = hsum8(_mm512_castps512_ps256(acc[p]));
    out[2 * p + 1] = hsum8(_mm512_extractf32x8_ps(acc[p], 1));
  }
}
#pragma GCC diagnostic pop
#define GB_HAVE_Q8_0_512 1
#endif

// Rows per pass: 2 accumulators each must fit the register file (32 vectors with AVX-512, 16 below).
// Measured on 110M Q8_0 decode, 1 thread: 1 row 12.9, 4 rows 11.2, 8 rows 10.8 CPU ms per token.
#if defined(__AVX512F__)
constexpr int kQuantRows = 8;
#else
constexpr int kQuantRows = 4;
#endif
// How many 8-row passes ahead q8_0_rows8_512 prefetches into the outer caches (2, 4 and 8
// measured within noise of each other).
constexpr std::size_t kFarPasses = 4;
// Rows i0..i1 of a Q8_0/Q4_0 matrix against n activation rows: kQuantRows rows at a time, each group of
// rows read from memory once and kept in cache while the n activation rows pass; each row
// prefetches the same place of the next group's row. The prefetches run on past the chunk's end,
// up to the matrix's: decode's last chunks are a pass or two (kernels.cpp), which would otherwise
// start and end cold, and the rows after a chunk are the next one's, which this thread often takes
// itself (when another thread takes them, those few rows are fetched into both cores' caches).
template <class Blk, int Acc, __m256i (*Prod)(const Blk&, __m256i, __m256i)>
void q_matmul(float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb, std::size_t n,
              std::size_t nb, std::size_t d, std::size_t i0, std::size_t i1, __m256i offset) {
  constexpr int R = kQuantRows;
  std::size_t i = i0;
  for (; i + R <= i1; i += R)
    for (std::size_t t = 0; t < n; ++t)
#if defined(GB_HAVE_Q8_0_512)
      if constexpr (std::is_same_v<Blk, block_q8_0> && R == 8)
        q8_0_rows8_512(out + t * d + i, w + i * wrb, wrb, reinterpret_cast<const block_q8_0*>(xq + t * xrb), nb,
                       i + 2 * R <= d ? w + (i + R) * wrb : nullptr,
                       i + (kFarPasses + 1) * R <= d ? w + (i + kFarPasses * R) * wrb : nullptr);
      else if constexpr ((std::is_same_v<Blk, block_q4_0> || std::is_same_v<Blk, block_q5_0>) && R == 8)
        q4_rows8_512<Blk>(out + t * d + i, w + i * wrb, wrb, reinterpret_cast<const block_q8_0*>(xq + t * xrb), nb,
                                             std::is_same_v<Blk, block_q4_0> ? 8 : 16, i + 2 * R <= d ? w + (i + R) * wrb : nullptr,
                                             i + (kFarPasses + 1) * R <= d ? w + (i + kFarPasses * R) * wrb : nullptr);
      else
#endif
      q_rows<Blk, R, Acc, Prod>(out + t * d + i, w + i * wrb, wrb, reinterpret_cast<const block_q8_0*>(xq + t * xrb), nb, offset, R * wrb);
  for (; i < i1; ++i)
    for (std::size_t t = 0; t < n; ++t)
      q_rows<Blk, 1, Acc, Prod>(out + t * d + i, w + i * wrb, wrb, reinterpret_cast<const block_q8_0*>(xq + t * xrb), nb, offset, wrb);
}
#define GB_HAVE_Q_MATMUL 1

// Prefill for Q4_0/Q5_0 (#32): one weight row against kQTokens activation rows at a time, each block
// unpacked once for all of them. Per output the steps are q_rows<Blk, R, 1>'s (the block's product
// scaled by d_w·d_x, one accumulator, then its lanes), so the same bits as vec_dot.
#if defined(__AVX512F__)
constexpr int kQTokens = 8;
#else
constexpr int kQTokens = 4;
#endif
template <class Blk, int T, __m256i (*Unpack)(const Blk&)>
void q_tokens(float* out, std::size_t d, const Blk* x, const std::byte* xq, std::size_t xrb, std::size_t nb, __m256i offset) {
  __m256 acc[T];
  GB_UNROLL for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nb; ++b) {
    const __m256i u = Unpack(x[b]);
    const float dx = fp16(x[b].d);
    GB_UNROLL for (int t = 0; t < T; ++t) {
      const block_q8_0& y = reinterpret_cast<const block_q8_0*>(xq + t * xrb)[b];
      const __m256i yv = load32(y.qs);
      const __m256i yo = kVnni ? y_offset(offset, yv) : _mm256_setzero_si256();
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * fp16(y.d)), _mm256_cvtepi32_ps(pmul(u, yv, yo)), acc[t]);
    }
  }
  GB_UNROLL for (int t = 0; t < T; ++t) out[t * d] = hsum8(acc[t]);
}
template <class Blk, __m256i (*Unpack)(const Blk&)>
void q_matmul_tokens(float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb, std::size_t n,
                     std::size_t nb, std::size_t d, std::size_t i0, std::size_t i1, __m256i offset) {
  for (std::size_t i = i0; i < i1; ++i) {
    const Blk* x = reinterpret_cast<const Blk*>(w + i * wrb);
    std::size_t t = 0;
    for (; t + kQTokens <= n; t += kQTokens) q_tokens<Blk, kQTokens, Unpack>(out + t * d + i, d, x, xq + t * xrb, xrb, nb, offset);
    for (; t < n; ++t) q_tokens<Blk, 1, Unpack>(out + t * d + i, d, x, xq + t * xrb, xrb, nb, offset);
  }
}

#if defined(__AVX2__) && !(defined(__AVX512VNNI__) && defined(__AVX512VL__))
// ---- several activation rows without VNNI: the widened tiles (#41) ----
// Batched decode (B sequences' next tokens) and prefill multiply each weight row by several
// activation rows. Without VNNI a block's product sign-extends both operands' 32 bytes to 16 bits
// and multiply-adds them (dot16); q_rows repeats that widening for every (row, token) pair. Here
// each activation block is widened once per call (YWide, beside its scale in 8 lanes) and each
// weight block once per tile of R rows × T tokens, so a pair costs two madds, an add, a conversion,
// a scale product and an fma. The integers are q_rows's lane for lane (exact sums of the same
// products), each scale is fp16(d_w)·fp16(d_y) as there, and block b goes into accumulator b mod
// Acc in the same order: slot 0's blocks (even b) run first, then slot 1's (odd b), and the two
// are added before the lanes are summed. So every output is its row's vec_dot, bit for bit.
struct alignas(32) YWide {
  std::int16_t lo[16];  // quants 0..15 of the activation block, sign-extended
  std::int16_t hi[16];  // quants 16..31
  float d[8];           // fp16(d_y) in every lane
};

void pack_wide(YWide* pack, const std::byte* xq, std::size_t xrb, std::size_t n, std::size_t nb) {
  for (std::size_t t = 0; t < n; ++t) {
    const auto* y = reinterpret_cast<const block_q8_0*>(xq + t * xrb);
    for (std::size_t b = 0; b < nb; ++b) {
      YWide& p = pack[t * nb + b];
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.lo), _mm256_cvtepi8_epi16(load16(y[b].qs)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.hi), _mm256_cvtepi8_epi16(load16(y[b].qs + 16)));
      _mm256_store_ps(p.d, _mm256_set1_ps(fp16(y[b].d)));
    }
  }
}

// A weight block's quants as signed bytes (Q4_0/Q5_0: their unpacked values minus the offset).
__m256i bytes_q8_0(const block_q8_0& x) { return load32(x.qs); }

// R weight rows (wrb bytes apart) × T activation rows of the pack: out[t·d + r].
template <class Blk, int R, int T, int Acc, __m256i (*Bytes)(const Blk&)>
void w_tile(float* out, std::size_t d, const std::byte* w, std::size_t wrb, const YWide* pack, std::size_t nb) {
  __m256 first[R][T];  // slot 0's sums while slot 1's blocks run
  __m256 acc[R][T];
  GB_UNROLL for (int slot = 0; slot < Acc; ++slot) {
    GB_UNROLL for (int r = 0; r < R; ++r) GB_UNROLL for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (std::size_t b = static_cast<std::size_t>(slot); b < nb; b += Acc) {
      __m256i xl[R], xh[R];
      __m256 dx[R];
      GB_UNROLL for (int r = 0; r < R; ++r) {
        const Blk& x = reinterpret_cast<const Blk*>(w + r * wrb)[b];
        const __m256i v = Bytes(x);
        xl[r] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v));
        xh[r] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1));
        dx[r] = _mm256_set1_ps(fp16(x.d));
      }
      GB_UNROLL for (int t = 0; t < T; ++t) {
        const YWide& y = pack[t * nb + b];
        const __m256 dy = _mm256_load_ps(y.d);
        GB_UNROLL for (int r = 0; r < R; ++r) {
          const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(xl[r], _mm256_load_si256(reinterpret_cast<const __m256i*>(y.lo))),
                                             _mm256_madd_epi16(xh[r], _mm256_load_si256(reinterpret_cast<const __m256i*>(y.hi))));
          acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dx[r], dy), _mm256_cvtepi32_ps(p), acc[r][t]);
        }
      }
    }
    if (Acc == 2 && slot == 0) GB_UNROLL for (int r = 0; r < R; ++r) GB_UNROLL for (int t = 0; t < T; ++t) first[r][t] = acc[r][t];
  }
  GB_UNROLL for (int r = 0; r < R; ++r) GB_UNROLL for (int t = 0; t < T; ++t)
    out[static_cast<std::size_t>(t) * d + r] = hsum8(Acc == 2 ? _mm256_add_ps(first[r][t], acc[r][t]) : acc[r][t]);
}

using WTile = void (*)(float*, std::size_t, const std::byte*, std::size_t, const YWide*, std::size_t);
// The tile for r ≤ R rows and t ≤ T tokens (the edges of the product).
template <class Blk, int Acc, __m256i (*Bytes)(const Blk&), int R, int T>
WTile pick_wide(int r, int t) {
  if constexpr (R > 1)
    if (r < R) return pick_wide<Blk, Acc, Bytes, R - 1, T>(r, t);
  if constexpr (T > 1)
    if (t < T) return pick_wide<Blk, Acc, Bytes, R, T - 1>(r, t);
  return &w_tile<Blk, R, T, Acc, Bytes>;
}

// Tile size: R·T accumulators, 2R widened weight blocks and R scales in 16 registers. Measured on
// a Zen 3 EPYC (AVX2), 1 thread, a 1376 × 512 Q8_0 matrix against 8 rows, ns per block product:
// q_rows per token 1.57, tiles 1×6 1.23, 2×3 1.18, 3×2 1.37, 2×4 1.06.
constexpr int kWideR = 2, kWideT = 4;
// Activation rows per sweep of a chunk's weight rows: their widened blocks stay in L2 while the
// chunk's rows (fixed_chunks' 24 at a time) pass.
constexpr std::size_t kWideSweep = 16;

// Rows i0..i1 against all n activation rows, widened once per call.
template <class Blk, int Acc, __m256i (*Bytes)(const Blk&)>
void w_tiles(float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb, std::size_t n, std::size_t nb,
             std::size_t d, std::size_t i0, std::size_t i1) {
  static thread_local std::vector<YWide> pack;  // grows to the largest block of activation rows, then stays
  if (pack.size() < n * nb) pack.resize(n * nb);
  pack_wide(pack.data(), xq, xrb, n, nb);
  for (std::size_t s = 0; s < n; s += kWideSweep) {
    const std::size_t s1 = std::min(n, s + kWideSweep);
    for (std::size_t i = i0; i < i1; i += kWideR) {
      const int rows = static_cast<int>(std::min<std::size_t>(kWideR, i1 - i));
      for (std::size_t t = s; t < s1; t += kWideT) {
        const int tt = static_cast<int>(std::min<std::size_t>(kWideT, s1 - t));
        pick_wide<Blk, Acc, Bytes, kWideR, kWideT>(rows, tt)(out + t * d + i, d, w + i * wrb, wrb, pack.data() + t * nb, nb);
      }
    }
  }
}

// ---- IQ4_NL, several activation rows without VNNI: one float chain per output, 8 outputs in lanes ----
// IQ4_NL's vec_dot (dot_iq4_nl_simd) sums each block's integers exactly, then adds
// float(Σ q·y)·(d_x·d_y) to one float, block after block. Here the 8 outputs of a 2-row × 4-token tile
// are the 8 lanes of one vector: each weight block is looked up (the 16-level table, one byte shuffle)
// and widened once per tile, each activation block once per call, the 8 pairs' integer lanes are summed
// across lanes together (4 cross-lane adds and 2 rounds of hadd: exact, integers), and lane k then takes
// pair k's float step with the rounding the set's vec_dot has. The x86 sets are compiled without
// -ffp-contract=off (only quant.cpp and the other architectures have it), and both GCC and clang (the
// sanitizer build's) fuse that step, s + a·b with one product, into one FMA: s = fma(Σ, d_x·d_y, s).
// Q4_1 and Q5_1 (s += d_x·d_y·Σ + m_x·s_y, two products) are left out: which product the compiler fuses
// differs between GCC (by context) and clang, so no one vector step is their vec_dot's bits everywhere.
// test_kernels' quantized_matmul_is_vec_dot_per_row holds the tiles to vec_dot, bit for bit.
// A weight block's 32 quants as bytes (elements 0..15, then 16..31), and its float step.
struct ChainIq4Nl {
  using Blk = block_iq4_nl;  // against Q8_0 activations: the widened tiles' pack (YWide, pack_wide)
  static __m256i bytes(const Blk& x) {
    const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl));
    const __m128i q = load16(x.qs);
    return _mm256_set_m128i(_mm_shuffle_epi8(table, hi_nibbles(q)), _mm_shuffle_epi8(table, lo_nibbles(q)));
  }
  static __m256 step(__m256 s, __m256 sumi, __m256 dxy) { return _mm256_fmadd_ps(sumi, dxy, s); }
};
// Lane k of the result: the sum of v[k]'s 8 int32 lanes (k = 0..7).
__m256i lane_sums8(const __m256i v[8]) {
  __m256i u[4];
  for (int p = 0; p < 4; ++p)
    u[p] = _mm256_add_epi32(_mm256_permute2x128_si256(v[2 * p], v[2 * p + 1], 0x20), _mm256_permute2x128_si256(v[2 * p], v[2 * p + 1], 0x31));
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(u[0], u[1]), _mm256_hadd_epi32(u[2], u[3]));  // v0 v2 v4 v6 v1 v3 v5 v7
  return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// R ≤ 2 weight rows × T ≤ 4 activation rows of the pack: out[t·d + r]; lane r·4 + t holds pair (r, t).
template <class K, int R, int T>
void chain_tile(float* out, std::size_t d, const std::byte* w, std::size_t wrb, const YWide* pack, std::size_t nb) {
  __m256 s = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nb; ++b) {
    __m256i v[8];
    float dx[2] = {0.0f, 0.0f}, dy[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    GB_UNROLL for (int k = 0; k < 8; ++k) v[k] = _mm256_setzero_si256();
    GB_UNROLL for (int t = 0; t < T; ++t) dy[t] = pack[t * nb + b].d[0];
    GB_UNROLL for (int r = 0; r < R; ++r) {
      const typename K::Blk& x = reinterpret_cast<const typename K::Blk*>(w + r * wrb)[b];
      const __m256i q = K::bytes(x);
      const __m256i xl = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), xh = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1));
      dx[r] = fp16(x.d);
      GB_UNROLL for (int t = 0; t < T; ++t) {
        const YWide& y = pack[t * nb + b];
        v[r * 4 + t] = _mm256_add_epi32(_mm256_madd_epi16(xl, _mm256_load_si256(reinterpret_cast<const __m256i*>(y.lo))),
                                        _mm256_madd_epi16(xh, _mm256_load_si256(reinterpret_cast<const __m256i*>(y.hi))));
      }
    }
    const __m256 sumi = _mm256_cvtepi32_ps(lane_sums8(v));
    const __m256 dxy = _mm256_mul_ps(_mm256_setr_ps(dx[0], dx[0], dx[0], dx[0], dx[1], dx[1], dx[1], dx[1]),
                                     _mm256_setr_ps(dy[0], dy[1], dy[2], dy[3], dy[0], dy[1], dy[2], dy[3]));
    s = K::step(s, sumi, dxy);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  GB_UNROLL for (int r = 0; r < R; ++r) GB_UNROLL for (int t = 0; t < T; ++t) out[static_cast<std::size_t>(t) * d + r] = lanes[r * 4 + t];
}

using ChainTile = void (*)(float*, std::size_t, const std::byte*, std::size_t, const YWide*, std::size_t);
template <class K, int R, int T>
ChainTile pick_chain(int r, int t) {
  if constexpr (R > 1)
    if (r < R) return pick_chain<K, R - 1, T>(r, t);
  if constexpr (T > 1)
    if (t < T) return pick_chain<K, R, T - 1>(r, t);
  return &chain_tile<K, R, T>;
}

template <class K>
void chain_tiles(float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb, std::size_t n, std::size_t nb,
                 std::size_t d, std::size_t i0, std::size_t i1) {
  static thread_local std::vector<YWide> pack;
  if (pack.size() < n * nb) pack.resize(n * nb);
  pack_wide(pack.data(), xq, xrb, n, nb);
  for (std::size_t s = 0; s < n; s += kWideSweep) {
    const std::size_t s1 = std::min(n, s + kWideSweep);
    for (std::size_t i = i0; i < i1; i += 2) {
      const int rows = static_cast<int>(std::min<std::size_t>(2, i1 - i));
      for (std::size_t t = s; t < s1; t += 4) {
        const int tt = static_cast<int>(std::min<std::size_t>(4, s1 - t));
        pick_chain<K, 2, 4>(rows, tt)(out + t * d + i, d, w + i * wrb, wrb, pack.data() + t * nb, nb);
      }
    }
  }
}
#define GB_HAVE_WIDE_TILES 1
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__AVX512BW__)
// GCC 12 reports the _mm512_undefined_* inside its own intrinsics' headers as uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// ---- prefill's integer tiles for Q8_0, Q4_0 and Q5_0 (#32) ----
// Activation rows go in pairs: block b of tokens t and t+1 as one 64-byte vector (t's 32 quants in
// the low half) beside their scales as 16 floats (8 lanes each). One 512-bit product then serves
// two tokens, each weight block is unpacked once (into both halves) for all the pairs of a tile,
// and R weight rows × P pairs accumulate at once (llama.cpp's tinyBLAS tiles over Q8_0 do the same
// with one token per 256-bit product). Each output's lanes are its row's vec_dot's: block b's
// int32 lanes Σ w·y, scaled by fp16(d_w)·fp16(d_y), accumulated into slot b mod Acc, the slots
// added and the 8 lanes summed. So a tile gives vec_dot's bits whatever R, P, n or thread count.
struct alignas(64) QPair {
  std::int8_t qs[64];  // token t's 32 quants of this block, then token t+1's
  float d[16];         // fp16(d_y) of token t in 8 lanes, then of token t+1
};

// Pairs of the n Q8_0 activation rows, block b of pair p at pack[p·nb + b]. A missing second token
// (n odd) is zeros: its products are 0 and its outputs are never stored.
void pack_pairs(QPair* pack, const std::byte* xq, std::size_t xrb, std::size_t n, std::size_t nb) {
  for (std::size_t p = 0; p < (n + 1) / 2; ++p) {
    const auto* y0 = reinterpret_cast<const block_q8_0*>(xq + 2 * p * xrb);
    const auto* y1 = 2 * p + 1 < n ? reinterpret_cast<const block_q8_0*>(xq + (2 * p + 1) * xrb) : nullptr;
    for (std::size_t b = 0; b < nb; ++b) {
      QPair& q = pack[p * nb + b];
      _mm256_store_si256(reinterpret_cast<__m256i*>(q.qs), load32(y0[b].qs));
      _mm256_store_si256(reinterpret_cast<__m256i*>(q.qs + 32), y1 ? load32(y1[b].qs) : _mm256_setzero_si256());
      _mm256_store_ps(q.d, _mm256_set1_ps(fp16(y0[b].d)));
      _mm256_store_ps(q.d + 8, _mm256_set1_ps(y1 ? fp16(y1[b].d) : 0.0f));
    }
  }
}

// A weight block's quants as the unsigned bytes dpbusd multiplies, the same 32 in both halves
// (prod_q8_0's and unpack_q4_0's/unpack_q5_0's bytes, lane for lane).
__m512i wide_q8_0(const block_q8_0& x) {
  return _mm512_xor_si512(_mm512_broadcast_i64x4(load32(x.qs)), _mm512_set1_epi8(static_cast<char>(0x80)));
}
// The 16 bytes in all four 128-bit lanes; lanes 1 and 3 shift the high nibbles (values 16..31) down.
__m512i wide_nibbles(const std::uint8_t* qs) {
  const __m512i shift = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i32x4(load16(qs)), shift), _mm512_set1_epi8(0x0F));
}
__m512i wide_q4_0(const block_q4_0& x) { return wide_nibbles(x.qs); }
__m512i wide_q5_0(const block_q5_0& x) {
  std::uint32_t qh;
  std::memcpy(&qh, x.qh, 4);
  const __mmask64 fifth = static_cast<__mmask64>(qh) | static_cast<__mmask64>(qh) << 32;
  return _mm512_or_si512(wide_nibbles(x.qs), _mm512_maskz_mov_epi8(fifth, _mm512_set1_epi8(16)));
}

// R weight rows (from w, wrb bytes apart) × P pairs of the pack (`tokens` of them real): outputs
// out[t·d + r]. `off` is the weight offset dpbusd's unsigned bytes carry (128, 8 or 16); its share
// −off·Σy seeds each product, once per pair and block for all R rows.
template <class Blk, int R, int P, int Acc, __m512i (*Wide)(const Blk&)>
void q_tile(float* out, std::size_t d, const std::byte* w, std::size_t wrb, const QPair* pack, std::size_t nb,
            std::size_t tokens, __m512i off) {
  __m512 acc[R][P][Acc];
  GB_UNROLL for (int r = 0; r < R; ++r) GB_UNROLL for (int p = 0; p < P; ++p) GB_UNROLL for (int s = 0; s < Acc; ++s)
    acc[r][p][s] = _mm512_setzero_ps();
  auto step = [&](std::size_t b, int slot) {
    __m512i yv[P], nyo[P];
    GB_UNROLL for (int p = 0; p < P; ++p) {
      yv[p] = _mm512_load_si512(pack[p * nb + b].qs);
      nyo[p] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, yv[p]));
    }
    GB_UNROLL for (int r = 0; r < R; ++r) {
      const Blk& x = reinterpret_cast<const Blk*>(w + r * wrb)[b];
      const __m512i u = Wide(x);
      const __m512 dw = _mm512_set1_ps(fp16(x.d));
      GB_UNROLL for (int p = 0; p < P; ++p) {
        const __m512 sc = _mm512_mul_ps(dw, _mm512_load_ps(pack[p * nb + b].d));
        acc[r][p][slot] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(nyo[p], u, yv[p])), acc[r][p][slot]);
      }
    }
  };
  blocks_in_slots<Acc>(nb, step);
  GB_UNROLL for (int r = 0; r < R; ++r) GB_UNROLL for (int p = 0; p < P; ++p) {
    const __m512 s = Acc == 2 ? _mm512_add_ps(acc[r][p][0], acc[r][p][Acc - 1]) : acc[r][p][0];
    out[2 * p * d + r] = hsum8(_mm512_castps512_ps256(s));
    if (static_cast<std::size_t>(2 * p + 1) < tokens) out[(2 * p + 1) * d + r] = hsum8(_mm512_extractf32x8_ps(s, 1));
  }
}

using QTile = void (*)(float*, std::size_t, const std::byte*, std::size_t, const QPair*, std::size_t, std::size_t, __m512i);
// The tile for r ≤ R rows and p ≤ P pairs (the edges of the matrix).
template <class Blk, int Acc, __m512i (*Wide)(const Blk&), int R, int P>
QTile pick_tile(int r, int p) {
  if constexpr (R > 1)
    if (r < R) return pick_tile<Blk, Acc, Wide, R - 1, P>(r, p);
  if constexpr (P > 1)
    if (p < P) return pick_tile<Blk, Acc, Wide, R, P - 1>(r, p);
  return &q_tile<Blk, R, P, Acc, Wide>;
}

// Rows i0..i1 against all n activation rows: the pairs packed once per call, then R-row groups of
// weights, each kept in L1 while every group of P pairs passes. R·P·Acc accumulators of 32
// registers: 3 × 3 × 2 for Q8_0 (4 × 3 × 2 spills), 4 × 4 for Q4_0/Q5_0. 110M pp128, 1 thread, on
// this AVX-512 machine: 4×2, 4×3, 3×3 and 2×4 within 5% of each other for Q8_0; 4×3, 4×4 and 3×5
// likewise for Q4_0, 6×2 ~8% slower.
template <class Blk, int Acc, __m512i (*Wide)(const Blk&)>
void q_tiles(float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb, std::size_t n,
             std::size_t nb, std::size_t d, std::size_t i0, std::size_t i1, int offset) {
  constexpr int R = Acc == 2 ? 3 : 4, P = Acc == 2 ? 3 : 4;
  const std::size_t pairs = (n + 1) / 2;
  static thread_local std::vector<QPair> pack;  // grows to the largest prefill block, then stays
  if (pack.size() < pairs * nb) pack.resize(pairs * nb);
  pack_pairs(pack.data(), xq, xrb, n, nb);
  const __m512i off = _mm512_set1_epi8(static_cast<char>(offset));
  for (std::size_t i = i0; i < i1; i += R) {
    const int rows = static_cast<int>(std::min<std::size_t>(R, i1 - i));
    for (std::size_t p = 0; p < pairs; p += P) {
      const int pp = static_cast<int>(std::min<std::size_t>(P, pairs - p));
      pick_tile<Blk, Acc, Wide, R, P>(rows, pp)(out + 2 * p * d + i, d, w + i * wrb, wrb, pack.data() + p * nb, nb,
                                                  std::min<std::size_t>(2 * P, n - 2 * p), off);
    }
  }
}
#pragma GCC diagnostic pop
#define GB_HAVE_Q_TILES 1
#endif
#else
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

#endif

#if defined(__AVX2__)
// ---- K-quants in 256-bit vectors (#32) ---------------------------------------------------------------
// ggml's AVX2 scheme: the weights' quants are unsigned (nibbles 0..15, Q5_K 0..31, Q6_K 0..63), so
// maddubs(q, y) multiplies them by the activation's signed bytes and adds pairs into int16 without
// saturating (at most 2·63·128 = 16128), and madd(scale, ·) widens into int32 with the sub-block
// scales. Every integer is exact, so a block's Σ sc·q·y is the scalar twin's number, and the floats
// are combined per block exactly as quant.cpp's scalar twin does: the same bits.
// Q6_K's −32 offset is applied afterwards through Q8_K's bsums (sums of 16 values, one per Q6_K
// sub-block): Σ sc·(q − 32)·y = Σ sc·q·y − 32·Σ_s sc[s]·bsums[s].
//
// k45_ints<T> and k6_ints<T> do one weight block against T activation blocks, unpacking the weights
// once; T = 1 is the single dot, T > 1 prefill's tile: each token's integers and floats are the same,
// so the same bits.
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
__m256i madd_acc(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(acc, a, b); }
#else
__m256i madd_acc(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
#endif
// The sum of a's 8 int32 lanes into ra and of b's 4 into rb (exact: integers).
[[gnu::always_inline]] inline void hsum2(__m256i a, __m128i b, int& ra, int& rb) {
  __m128i v = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  v = _mm_hadd_epi32(v, b);  // a0+a1, a2+a3, b0+b1, b2+b3
  v = _mm_hadd_epi32(v, v);  // A, B, A, B
  ra = _mm_cvtsi128_si32(v);
  rb = _mm_extract_epi32(v, 1);
}
// Broadcasts int16 lane k of each 128-bit half.
__m256i bcast16(__m256i v, int k) { return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<short>(((2 * k + 1) << 8) | (2 * k)))); }

// Q4_K/Q5_K's 12 scale bytes → 8 scales (bytes 0..7) and 8 mins (bytes 8..15) (ggml's utmp shuffle,
// get_scale_min_k4 for all 8 sub-blocks at once).
[[gnu::always_inline]] inline __m128i k4_scales_mins(const std::uint8_t* scales) {
  constexpr std::uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  std::uint32_t u[4];
  std::memcpy(u, scales, 12);
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const std::uint32_t uaux = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = uaux;
  u[0] &= kmask1;
  return _mm_set_epi32(static_cast<int>(u[3]), static_cast<int>(u[2]), static_cast<int>(u[1]), static_cast<int>(u[0]));
}

// Q4_K (Fifth false) and Q5_K before the horizontal sums: isum[t]'s 8 int32 lanes (Σ_s sc[s]·Σ q·y)
// in acc[t], imin[t]'s 4 (Σ_s m[s]·(bsums[2s] + bsums[2s+1])) in mn[t].
template <int T, class Blk>
[[gnu::always_inline]] inline void k45_lanes(const Blk& x, const block_q8_K* const* y, std::size_t b, __m256i* acc, __m128i* mn) {
  constexpr bool kFifth = std::is_same_v<Blk, block_q5_K>;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i sm16 = _mm256_cvtepu8_epi16(k4_scales_mins(x.scales));  // int16: 8 scales, 8 mins
  const __m128i mins = _mm256_extracti128_si256(sm16, 1);
  const __m256i scales = _mm256_permute2x128_si256(sm16, sm16, 0x00);
  [[maybe_unused]] __m256i hb;
  if constexpr (kFifth) hb = load32(x.qh);
  GB_UNROLL for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
  GB_UNROLL for (int j = 0; j < 4; ++j) {  // 32 bytes → sub-blocks 2j (low nibbles) and 2j+1 (high nibbles)
    const __m256i sl = bcast16(scales, 2 * j), sh = bcast16(scales, 2 * j + 1);
    const __m256i q = load32(x.qs + 32 * j);
    __m256i ql = _mm256_and_si256(q, m4), qh = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if constexpr (kFifth) {  // bit 2j / 2j+1 of qh[l] → 16 (shifts of at most 7 keep each byte's own bits)
      const __m256i one = _mm256_set1_epi8(1);
      ql = _mm256_or_si256(ql, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), one), 4));
      qh = _mm256_or_si256(qh, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j + 1), one), 4));
    }
    GB_UNROLL for (int t = 0; t < T; ++t) {
      const std::int8_t* qy = y[t][b].qs + 64 * j;
      acc[t] = madd_acc(acc[t], sl, _mm256_maddubs_epi16(ql, load32(qy)));
      acc[t] = madd_acc(acc[t], sh, _mm256_maddubs_epi16(qh, load32(qy + 32)));
    }
  }
  GB_UNROLL for (int t = 0; t < T; ++t) {
    const __m256i bs = load32(y[t][b].bsums);
    const __m128i s2 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));  // |·| <= 4096
    mn[t] = _mm_madd_epi16(mins, s2);
  }
}
// isum[t] = Σ_s sc[s]·Σ q·y, imin[t] = Σ_s m[s]·(bsums[2s] + bsums[2s+1]).
template <int T, class Blk>
[[gnu::always_inline]] inline void k45_ints(const Blk& x, const block_q8_K* const* y, std::size_t b, int* isum, int* imin) {
  __m256i acc[T];
  __m128i mn[T];
  k45_lanes<T>(x, y, b, acc, mn);
  GB_UNROLL for (int t = 0; t < T; ++t) hsum2(acc[t], mn[t], isum[t], imin[t]);
}

// Q6_K before the horizontal sum: isum[t]'s 8 int32 lanes (Σ_s sc[s]·Σ (q − 32)·y) in acc[t].
template <int T>
[[gnu::always_inline]] inline void k6_lanes(const block_q6_K& x, const block_q8_K* const* y, std::size_t b, __m256i* acc, __m128i*) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
  const __m128i sc8 = load16(x.scales);
  GB_UNROLL for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
  GB_UNROLL for (int h = 0; h < 2; ++h) {
    const __m256i l0 = load32(x.ql + 64 * h), l1 = load32(x.ql + 64 * h + 32), hb = load32(x.qh + 32 * h);
    __m256i v[4];
    v[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
    v[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
    v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4));
    v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4));
    GB_UNROLL for (int k = 0; k < 4; ++k) {
      // Row k's two scales (values 0..15, 16..31), each in 8 int16 lanes.
      const int s = 8 * h + 2 * k;
      const __m128i ctrl = _mm_set_epi8(s + 1, s + 1, s + 1, s + 1, s + 1, s + 1, s + 1, s + 1, s, s, s, s, s, s, s, s);
      const __m256i sk = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, ctrl));
      GB_UNROLL for (int t = 0; t < T; ++t)
        acc[t] = madd_acc(acc[t], sk, _mm256_maddubs_epi16(v[k], load32(y[t][b].qs + 128 * h + 32 * k)));
    }
  }
  const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
  GB_UNROLL for (int t = 0; t < T; ++t) {
    const __m256i corr = _mm256_madd_epi16(sc16, load32(y[t][b].bsums));  // Σ sc·bsums, |·| <= 2·128·2048
    acc[t] = _mm256_sub_epi32(acc[t], _mm256_slli_epi32(corr, 5));
  }
}
// isum[t] = Σ_s sc[s]·Σ (q − 32)·y.
template <int T>
[[gnu::always_inline]] inline void k6_ints(const block_q6_K& x, const block_q8_K* const* y, std::size_t b, int* isum, int*) {
  __m256i acc[T];
  k6_lanes<T>(x, y, b, acc, nullptr);
  int unused;
  GB_UNROLL for (int t = 0; t < T; ++t) hsum2(acc[t], _mm_setzero_si128(), isum[t], unused);
}

// A product the compiler may not fuse into the following add (GCC contracts a·b + c into an FMA
// across statements, and might do so differently in different tiles): the scalar twin's rounding.
[[gnu::always_inline]] inline float unfused(float v) {
  asm("" : "+x"(v));
  return v;
}

// out[t·stride] = the dot of weight row x with activation rows y[t], t < T, in the scalar twin's float order.
template <int T, class Blk>
[[gnu::always_inline]] inline void kq_dots(float* out, std::size_t stride, const Blk* x, const block_q8_K* const* y, std::size_t nb) {
  constexpr bool kMins = !std::is_same_v<Blk, block_q6_K>;
  float sum[T], sum_min[T];
  GB_UNROLL for (int t = 0; t < T; ++t) sum[t] = sum_min[t] = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int isum[T], imin[T];
    if constexpr (kMins) k45_ints<T>(x[i], y, i, isum, imin);
    else k6_ints<T>(x[i], y, i, isum, imin);
    const float d = fp16(x[i].d);
    GB_UNROLL for (int t = 0; t < T; ++t) sum[t] += unfused(d * y[t][i].d * static_cast<float>(isum[t]));
    if constexpr (kMins) {
      const float dmin = fp16(x[i].dmin);
      GB_UNROLL for (int t = 0; t < T; ++t) sum_min[t] += unfused(dmin * y[t][i].d * static_cast<float>(imin[t]));
    }
  }
  GB_UNROLL for (int t = 0; t < T; ++t) out[t * stride] = kMins ? sum[t] - sum_min[t] : sum[t];
}

template <class Blk>
float kq_dot(const Blk* x, const block_q8_K* y, std::size_t nb) {
  float out;
  kq_dots<1>(&out, 0, x, &y, nb);
  return out;
}
// The same product the other way round (#32): a 4-lane float vector for the product's float part.
[[gnu::always_inline]] inline __m128 unfused4(__m128 v) {
  asm("" : "+x"(v));
  return v;
}
// Decode: 4 weight rows against one activation row. Each block's integer sums of the 4 rows are
// reduced together (one hadd tree instead of four), and the float part runs in 4 lanes, lane r
// doing row r's scalar-twin steps in order — sum += d·d_y·isum, sum_min += dmin·d_y·imin, then
// sum − sum_min — so each output is kq_dots<1>'s bits. (The per-block scalar tail was the hot spot
// of one-row decode: a horizontal sum, conversions and a dependent add per block and row.)
// Each row prefetches its place `ahead` bytes on into L1 (the caller passes two passes, 8 rows):
// without it the four interleaved row streams ran ~30% slower than one row at a time (110M Q4_K_M);
// with it, 1.1B Q4_K_M decode runs 12–17% faster than one row at a time and 110M within the noise
// (1, 2 and 3 passes measured alike).
template <class Blk>
void kq_rows4(float* out, const std::byte* w, std::size_t wrb, const block_q8_K* y, std::size_t nb, std::size_t ahead) {
  constexpr bool kMins = !std::is_same_v<Blk, block_q6_K>;
  __m128 sum = _mm_setzero_ps(), sum_min = _mm_setzero_ps();
  auto row = [&](int r) { return reinterpret_cast<const Blk*>(w + r * wrb); };
  for (std::size_t i = 0; i < nb; ++i) {
    __m256i acc[4];
    __m128i mn[4];
    GB_UNROLL for (int r = 0; r < 4; ++r) {
      const char* pf = reinterpret_cast<const char*>(row(r) + i) + ahead;
      GB_UNROLL for (std::size_t l = 0; l < sizeof(Blk); l += 64) asm volatile("prefetcht0 %0" : : "m"(pf[l]));
      if constexpr (kMins) k45_lanes<1>(row(r)[i], &y, i, &acc[r], &mn[r]);
      else k6_lanes<1>(row(r)[i], &y, i, &acc[r], &mn[r]);
    }
    // Lane r of isum = Σ of acc[r]'s 8 lanes (integers: exact in any order).
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]), _mm256_hadd_epi32(acc[2], acc[3]));
    const __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    const __m128 dy = _mm_set1_ps(y[i].d);
    const __m128 d = _mm_cvtph_ps(_mm_setr_epi16(static_cast<short>(row(0)[i].d), static_cast<short>(row(1)[i].d),
                                                 static_cast<short>(row(2)[i].d), static_cast<short>(row(3)[i].d), 0, 0, 0, 0));
    sum = _mm_add_ps(sum, unfused4(_mm_mul_ps(unfused4(_mm_mul_ps(d, dy)), _mm_cvtepi32_ps(isum))));
    if constexpr (kMins) {
      const __m128i imin = _mm_hadd_epi32(_mm_hadd_epi32(mn[0], mn[1]), _mm_hadd_epi32(mn[2], mn[3]));
      const __m128 dmin = _mm_cvtph_ps(_mm_setr_epi16(static_cast<short>(row(0)[i].dmin), static_cast<short>(row(1)[i].dmin),
                                                      static_cast<short>(row(2)[i].dmin), static_cast<short>(row(3)[i].dmin), 0, 0, 0, 0));
      sum_min = _mm_add_ps(sum_min, unfused4(_mm_mul_ps(unfused4(_mm_mul_ps(dmin, dy)), _mm_cvtepi32_ps(imin))));
    }
  }
  _mm_storeu_ps(out, kMins ? _mm_sub_ps(sum, sum_min) : sum);
}
float dot_q4_K_simd(const block_q4_K* x, const block_q8_K* y, std::size_t nb) { return kq_dot(x, y, nb); }
float dot_q5_K_simd(const block_q5_K* x, const block_q8_K* y, std::size_t nb) { return kq_dot(x, y, nb); }
float dot_q6_K_simd(const block_q6_K* x, const block_q8_K* y, std::size_t nb) { return kq_dot(x, y, nb); }

// Prefill: each weight row against kKqTokens activation rows at a time, its blocks unpacked once per
// group; the row stays in L1 while the groups pass. Each output is its row's kq_dot bit for bit.
// 8 rows with 32 vector registers (110M pp128, 1 thread: 6–8% faster than 4, five interleaved pairs).
#if defined(__AVX512F__)
constexpr int kKqTokens = 8;
#else
constexpr int kKqTokens = 4;
#endif
template <class Blk>
void kq_matmul(float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb, std::size_t n,
               std::size_t nb, std::size_t d, std::size_t i0, std::size_t i1) {
  auto yrow = [&](std::size_t t) { return reinterpret_cast<const block_q8_K*>(xq + t * xrb); };
  std::size_t i = i0;
  if (n == 1)  // decode: 4 rows per pass, then the last rows one by one below
    for (; i + 4 <= i1; i += 4) kq_rows4<Blk>(out + i, w + i * wrb, wrb, yrow(0), nb, 8 * wrb);
  for (; i < i1; ++i) {
    const Blk* x = reinterpret_cast<const Blk*>(w + i * wrb);
    std::size_t t = 0;
    for (; t + kKqTokens <= n; t += kKqTokens) {
      const block_q8_K* y[kKqTokens];
      GB_UNROLL for (int u = 0; u < kKqTokens; ++u) y[u] = yrow(t + u);
      kq_dots<kKqTokens>(out + t * d + i, d, x, y, nb);
    }
    for (; t < n; ++t) {
      const block_q8_K* y = yrow(t);
      kq_dots<1>(out + t * d + i, 0, x, &y, nb);
    }
  }
}
#define GB_HAVE_KQ_MATMUL 1
#else
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
#endif

// ---- the fallback and low-bit types: the integer part in vectors, the float part as the scalar twin ----
// Each block's integer dot is exact in any order, and the floats are combined in the scalar twin's
// order (quant.cpp), so these return the scalar twin's bits.

// Bytes 0..15 of the result: 0xFF where bit j of `bits` is set (bit j → byte j).
__m128i bits_to_bytes16(std::uint32_t bits) {
  const __m128i v = _mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(bits)), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i m = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  return _mm_cmpeq_epi8(_mm_and_si128(v, m), m);
}

// Σ q·y over one 32-value block whose quants are 16 low-nibble values (0..15 + 16·bit) and 16 high ones.
int nibble_block_dot(__m128i lo, __m128i hi, const std::int8_t* y) { return hsum(iadd(dot16(lo, load16(y)), dot16(hi, load16(y + 16)))); }

float dot_q4_1_simd(const block_q4_1* x, const block_q8_1* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    const __m128i q = load16(x[i].qs);
    const int sumi = nibble_block_dot(lo_nibbles(q), hi_nibbles(q), y[i].qs);
    s += half_to_f32(x[i].d) * half_to_f32(y[i].d) * static_cast<float>(sumi) + half_to_f32(x[i].m) * half_to_f32(y[i].s);
  }
  return s;
}

// The 5-bit quants of a Q5_0/Q5_1 block, minus `bias`, as values 0..15 and 16..31.
template <class Blk>
void q5_halves(const Blk& x, int bias, __m128i& lo, __m128i& hi) {
  std::uint32_t qh;
  std::memcpy(&qh, x.qh, 4);
  const __m128i q = load16(x.qs), sixteen = _mm_set1_epi8(16), b = _mm_set1_epi8(static_cast<char>(bias));
  lo = _mm_sub_epi8(_mm_or_si128(lo_nibbles(q), _mm_and_si128(bits_to_bytes16(qh & 0xFFFF), sixteen)), b);
  hi = _mm_sub_epi8(_mm_or_si128(hi_nibbles(q), _mm_and_si128(bits_to_bytes16(qh >> 16), sixteen)), b);
}

#if !defined(GB_HAVE_Q_MATMUL)
float dot_q5_0_simd(const block_q5_0* x, const block_q8_0* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    __m128i lo, hi;
    q5_halves(x[i], 16, lo, hi);
    s += static_cast<float>(nibble_block_dot(lo, hi, y[i].qs)) * (half_to_f32(x[i].d) * half_to_f32(y[i].d));
  }
  return s;
}
#endif

float dot_q5_1_simd(const block_q5_1* x, const block_q8_1* y, std::size_t nb) {
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    __m128i lo, hi;
    q5_halves(x[i], 0, lo, hi);
    const int sumi = nibble_block_dot(lo, hi, y[i].qs);
    s += half_to_f32(x[i].d) * half_to_f32(y[i].d) * static_cast<float>(sumi) + half_to_f32(x[i].m) * half_to_f32(y[i].s);
  }
  return s;
}

// IQ4_NL: the nibbles index the 16-level table with one byte shuffle.
float dot_iq4_nl_simd(const block_iq4_nl* x, const block_q8_0* y, std::size_t nb) {
  const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl));
  float s = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    const __m128i q = load16(x[i].qs);
    const int sumi = nibble_block_dot(_mm_shuffle_epi8(table, lo_nibbles(q)), _mm_shuffle_epi8(table, hi_nibbles(q)), y[i].qs);
    s += static_cast<float>(sumi) * (half_to_f32(x[i].d) * half_to_f32(y[i].d));
  }
  return s;
}

// Q2_K/Q3_K: row k (0..3) of a 128-value half is bits 2k..2k+1 of its 32 qs bytes; its first 16
// values are one sub-block, its last 16 the next.
float dot_q2_K_simd(const block_q2_K* x, const block_q8_K* y, std::size_t nb) {
  const __m128i m3 = _mm_set1_epi8(3);
  float sum = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int imin = 0;
    for (int s = 0; s < 16; ++s) imin += (x[i].scales[s] >> 4) * y[i].bsums[s];
    ivec acc = izero();
    for (int h = 0; h < 2; ++h) {
      const __m128i q0 = load16(x[i].qs + 32 * h), q1 = load16(x[i].qs + 32 * h + 16);
      for (int k = 0; k < 4; ++k) {
        const int sb = 8 * h + 2 * k;
        const std::int8_t* qy = y[i].qs + 128 * h + 32 * k;
        const __m128i v0 = _mm_and_si128(_mm_srl_epi16(q0, _mm_cvtsi32_si128(2 * k)), m3);
        const __m128i v1 = _mm_and_si128(_mm_srl_epi16(q1, _mm_cvtsi32_si128(2 * k)), m3);
        acc = iadd(acc, iscale(dot16(v0, load16(qy)), x[i].scales[sb] & 0x0F));
        acc = iadd(acc, iscale(dot16(v1, load16(qy + 16)), x[i].scales[sb + 1] & 0x0F));
      }
    }
    const float dall = y[i].d * half_to_f32(x[i].d), dmin = y[i].d * half_to_f32(x[i].dmin);
    sum += dall * static_cast<float>(hsum(acc)) - dmin * static_cast<float>(imin);
  }
  return sum;
}

float dot_q3_K_simd(const block_q3_K* x, const block_q8_K* y, std::size_t nb) {
  const __m128i m3 = _mm_set1_epi8(3), four = _mm_set1_epi8(4);
  float sum = 0.0f;
  for (std::size_t i = 0; i < nb; ++i) {
    int sc[16];
    q3_K_scales(x[i].scales, sc);
    const __m128i hm0 = load16(x[i].hmask), hm1 = load16(x[i].hmask + 16);
    ivec acc = izero();
    for (int h = 0; h < 2; ++h) {
      const __m128i q0 = load16(x[i].qs + 32 * h), q1 = load16(x[i].qs + 32 * h + 16);
      for (int k = 0; k < 4; ++k) {
        const int row = 4 * h + k, sb = 2 * row;
        const std::int8_t* qy = y[i].qs + 32 * row;
        const __m128i bit = _mm_set1_epi8(static_cast<char>(1 << row));
        // 4 where the row's hmask bit is clear: q = low 2 bits − 4.
        const __m128i sub0 = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(hm0, bit), _mm_setzero_si128()), four);
        const __m128i sub1 = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(hm1, bit), _mm_setzero_si128()), four);
        const __m128i v0 = _mm_sub_epi8(_mm_and_si128(_mm_srl_epi16(q0, _mm_cvtsi32_si128(2 * k)), m3), sub0);
        const __m128i v1 = _mm_sub_epi8(_mm_and_si128(_mm_srl_epi16(q1, _mm_cvtsi32_si128(2 * k)), m3), sub1);
        acc = iadd(acc, iscale(dot16(v0, load16(qy)), sc[sb]));
        acc = iadd(acc, iscale(dot16(v1, load16(qy + 16)), sc[sb + 1]));
      }
    }
    sum += half_to_f32(x[i].d) * y[i].d * static_cast<float>(hsum(acc));
  }
  return sum;
}
#else
#error "kernels_isa.cpp needs at least SSE4.1 (it is built for x86-64-v2 and above)"
#endif

template <class T>
const T* as(const void* p) {
  return static_cast<const T*>(p);
}

float vec_dot(DType w, std::size_t n, const void* w_row, const void* x_row) {
  const std::size_t nb = n / dtype_info(w).block_values;
  switch (w) {
    case DType::F32: return dot(as<float>(w_row), as<float>(x_row), n);
    case DType::F16: return dot_half_simd<widen_f16>(as<std::uint16_t>(w_row), as<std::uint16_t>(x_row), n);
    case DType::BF16: return dot_half_simd<widen_bf16>(as<std::uint16_t>(w_row), as<std::uint16_t>(x_row), n);
    case DType::Q8_0: return dot_q8_0_simd(as<block_q8_0>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q4_0: return dot_q4_0_simd(as<block_q4_0>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q4_K: return dot_q4_K_simd(as<block_q4_K>(w_row), as<block_q8_K>(x_row), nb);
    case DType::Q5_K: return dot_q5_K_simd(as<block_q5_K>(w_row), as<block_q8_K>(x_row), nb);
    case DType::Q6_K: return dot_q6_K_simd(as<block_q6_K>(w_row), as<block_q8_K>(x_row), nb);
    case DType::Q4_1: return dot_q4_1_simd(as<block_q4_1>(w_row), as<block_q8_1>(x_row), nb);
    case DType::Q5_0: return dot_q5_0_simd(as<block_q5_0>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q5_1: return dot_q5_1_simd(as<block_q5_1>(w_row), as<block_q8_1>(x_row), nb);
    case DType::IQ4_NL: return dot_iq4_nl_simd(as<block_iq4_nl>(w_row), as<block_q8_0>(x_row), nb);
    case DType::Q2_K: return dot_q2_K_simd(as<block_q2_K>(w_row), as<block_q8_K>(x_row), nb);
    case DType::Q3_K: return dot_q3_K_simd(as<block_q3_K>(w_row), as<block_q8_K>(x_row), nb);
    default: return quant::vec_dot_scalar(w, n, w_row, x_row);
  }
}

// quant::quantize_activation(Q8_0, ...) vectorized, byte for byte the same for finite input: the
// maximum is exact in any order, d and 1/d come from the same scalar code, and the rounding is the
// same (nearest, ties to even) then the same clamp.
void quantize_q8_0(const float* x, void* dst, std::size_t n) {
  auto* y = static_cast<block_q8_0*>(dst);
  for (std::size_t i = 0; i < n / QK8_0; ++i, x += QK8_0) {
#if defined(__AVX2__)
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    // max(|x|, m) keeps m when |x| is NaN, as std::max(amax, |x|) does.
    for (int j = 0; j < 4; ++j) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = quant::fp32_to_fp16(amax / 127.0f);
    const __m256 idv = _mm256_set1_ps(id), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) {
      const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), idv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
    }
    // Packing works within 128-bit lanes; the permute puts the 32 bytes back in order.
    const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), p8);
#else
    quant::quantize_activation(DType::Q8_0, x, y + i, QK8_0);
#endif
  }
}

void qmatmul_rows(DType wt, float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb,
                  std::size_t n, std::size_t k, std::size_t d, std::size_t i0, std::size_t i1) {
#if defined(GB_HAVE_Q_MATMUL)
  const std::size_t nb = k / QK8_0;
#if defined(GB_HAVE_Q_TILES)
  // Prefill (two or more activation rows): the integer tiles.
  if (n >= 2) {
    if (wt == DType::Q8_0) return q_tiles<block_q8_0, 2, wide_q8_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1, 0x80);
    if (wt == DType::Q4_0) return q_tiles<block_q4_0, 1, wide_q4_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1, 8);
    if (wt == DType::Q5_0) return q_tiles<block_q5_0, 1, wide_q5_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1, 16);
  }
#endif
#if defined(GB_HAVE_WIDE_TILES)
  // Several activation rows (batched decode, prefill) without VNNI: the widened tiles.
  if (n >= 2) {
    if (wt == DType::Q8_0) return w_tiles<block_q8_0, 2, bytes_q8_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1);
    if (wt == DType::Q4_0) return w_tiles<block_q4_0, 1, unpack_q4_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1);
    if (wt == DType::Q5_0) return w_tiles<block_q5_0, 1, unpack_q5_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1);
    if (wt == DType::IQ4_NL) return chain_tiles<ChainIq4Nl>(out, w, wrb, xq, xrb, n, nb, d, i0, i1);
  }
#endif
  if (wt == DType::Q8_0) return q_matmul<block_q8_0, 2, prod_q8_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1, q8_offset());
  // Prefill's blocks of activation rows unpack each weight block once for several of them; decode
  // streams several weight rows per pass.
  if (wt == DType::Q4_0)
    return n >= static_cast<std::size_t>(kQTokens) ? q_matmul_tokens<block_q4_0, unpack_q4_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1, q4_offset())
                                                   : q_matmul<block_q4_0, 1, prod_q4_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1, q4_offset());
  if (wt == DType::Q5_0)
    return n >= static_cast<std::size_t>(kQTokens) ? q_matmul_tokens<block_q5_0, unpack_q5_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1, q5_offset())
                                                   : q_matmul<block_q5_0, 1, prod_q5_0>(out, w, wrb, xq, xrb, n, nb, d, i0, i1, q5_offset());
#endif
#if defined(GB_HAVE_KQ_MATMUL)
  const std::size_t nkb = k / QK_K;
  if (wt == DType::Q4_K) return kq_matmul<block_q4_K>(out, w, wrb, xq, xrb, n, nkb, d, i0, i1);
  if (wt == DType::Q5_K) return kq_matmul<block_q5_K>(out, w, wrb, xq, xrb, n, nkb, d, i0, i1);
  if (wt == DType::Q6_K) return kq_matmul<block_q6_K>(out, w, wrb, xq, xrb, n, nkb, d, i0, i1);
#endif
  for (std::size_t i = i0; i < i1; ++i)
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = vec_dot(wt, k, w + i * wrb, xq + t * xrb);
}

// ---- the raw distribution of a trace -------------------------------------------------------------

// m = max l; w = exp(l − m) with xsimd's vector exp; S = Σ w and Σ w·(l − m) in float lanes over 16
// vectors at a time, each such partial then added in double (a float sum over all of a 128k
// vocabulary would lose digits; a double per entry costs more than the exp). The order is fixed for
// this kernel set, so are the sums.
// g++ 12 warns inside its own AVX-512 max/exp intrinsics, which start from _mm512_undefined_ps()
// (a false positive: every lane is written).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
float exp_weights(const float* l, float* w, std::size_t n, double* sum_out, double* weighted_out) {
  // The max in four vector chains: a single maxss chain waits on its latency at every entry.
  std::size_t i = 0;
  float mx = l[0];
  if (n >= 4 * W) {
    batch m0 = batch::load_unaligned(l), m1 = m0, m2 = m0, m3 = m0;
    for (; i + 4 * W <= n; i += 4 * W) {
      m0 = xsimd::max(m0, batch::load_unaligned(l + i));
      m1 = xsimd::max(m1, batch::load_unaligned(l + i + W));
      m2 = xsimd::max(m2, batch::load_unaligned(l + i + 2 * W));
      m3 = xsimd::max(m3, batch::load_unaligned(l + i + 3 * W));
    }
    alignas(64) float lanes[W];
    xsimd::max(xsimd::max(m0, m1), xsimd::max(m2, m3)).store_aligned(lanes);
    mx = *std::max_element(lanes, lanes + W);
  }
  for (; i < n; ++i) mx = std::max(mx, l[i]);
  const batch m(mx), zero(0.0f);
  double sum = 0, wl = 0;
  auto flush = [&](batch& sv, batch& wv) {
    alignas(64) float a[W], b[W];
    sv.store_aligned(a);
    wv.store_aligned(b);
    for (std::size_t j = 0; j < W; ++j) sum += a[j], wl += b[j];
    sv = wv = zero;
  };
  batch sv = zero, wv = zero;
  auto step = [&](const float* src, float* dst) {
    const batch d = batch::load_unaligned(src) - m;
    const batch e = xsimd::exp(d);
    e.store_unaligned(dst);
    sv += e;
    wv += xsimd::select(e > zero, e * d, zero);  // 0·(-inf) is no term
  };
  // Each lane sums 16 entries in float before its partial joins the double sums: the double adds are
  // one dependent chain, so flushing every 64 entries left 16-lane sets waiting on it.
  constexpr std::size_t kSpan = 16 * W;
  i = 0;
  for (; i + kSpan <= n; i += kSpan) {
    GB_UNROLL for (std::size_t j = 0; j < kSpan; j += W) step(l + i + j, w + i + j);
    flush(sv, wv);
  }
  for (; i + W <= n; i += W) step(l + i, w + i);
  if (i < n) {  // the tail through the same vector exp, padded with -inf (weight 0)
    alignas(64) float t[W], o[W];
    std::fill(t, t + W, -std::numeric_limits<float>::infinity());
    std::copy(l + i, l + n, t);
    step(t, o);
    std::copy(o, o + (n - i), w + i);
  }
  flush(sv, wv);
  *sum_out = sum;
  *weighted_out = wl;
  return mx;
}
#pragma GCC diagnostic pop

std::size_t fma_probe(std::size_t iters, float* sink) {
  // Twelve dependency chains cover the FMA latency (4 cycles) times two FMA ports with room to spare.
  batch acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = batch(1.0f + 0.01f * static_cast<float>(j));
  const batch m(0.9999999f), c(1e-7f);
  for (std::size_t it = 0; it < iters; ++it) GB_UNROLL for (int j = 0; j < 12; ++j) acc[j] = xsimd::fma(acc[j], m, c);
  batch s = acc[0];
  for (int j = 1; j < 12; ++j) s += acc[j];
  *sink = xsimd::hadd(s);
  return W;
}

// x − x is 0 for every finite x and NaN for ±inf and NaN, and a NaN stays in a sum: a chunk costs
// one subtraction and one addition a lane and a single test at its end. Loading a model runs this over
// every weight, so it goes at the speed of memory (the scalar loop with a branch per value did not).
std::size_t first_nonfinite(const float* x, std::size_t n) {
  constexpr std::size_t kChunk = 256 * W;
  std::size_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    batch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
    for (std::size_t j = i; j < i + kChunk; j += 4 * W) {
      const batch v0 = batch::load_unaligned(x + j), v1 = batch::load_unaligned(x + j + W);
      const batch v2 = batch::load_unaligned(x + j + 2 * W), v3 = batch::load_unaligned(x + j + 3 * W);
      a0 += v0 - v0;
      a1 += v1 - v1;
      a2 += v2 - v2;
      a3 += v3 - v3;
    }
    const batch s = (a0 + a1) + (a2 + a3);
    if (xsimd::any(xsimd::isnan(s))) break;  // this chunk has one: the loop below finds which
  }
  for (; i < n; ++i)
    if (!std::isfinite(x[i])) return i;
  return n;
}

}  // namespace

extern const KernelSet GB_ISA_TABLE = {GB_ISA_NAME, dot, matmul_rows, rmsnorm, axpy, dots, axpys, vec_dot, quantize_q8_0, qmatmul_rows, fma_probe,
                                    exp_weights,
                                    packed_x_floats, pack_x_groups, kKeyBlock, pack_keys, dots_packed, axpys_rows, softmax,
                                    first_nonfinite, exp_floats, exp_in_vectors};

}  // namespace glassbox::kernels
