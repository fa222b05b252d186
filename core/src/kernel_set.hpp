// The table of SIMD kernels one instruction-set variant provides (kernels_isa.cpp, compiled once
// per variant), and the variant in use. Internal to libglassbox.
#pragma once
#include <cstddef>

#include "glassbox/model/dtype.hpp"

namespace glassbox::kernels {

// How prefill's matrix product tiles its loops, chosen from the cache sizes (kernels.cpp).
struct Blocking {
  std::size_t weight_rows = 64;  // rows of w per block, and per thread's chunk at most (a multiple of 32, the widest panel)
  const float* xp = nullptr;     // x packed once for every chunk (KernelSet::pack_x_groups), or null
};

struct KernelSet {
  const char* name;  // "avx512-vnni", "avx512", "avx2", "sse4.2"; "neon-i8mm", "neon-dotprod", "neon"; "simd128"; "scalar"
  float (*dot)(const float* a, const float* b, std::size_t n);
  // out[t, i] = Σ_j x[t, j]·w[i, j] for t < n and weight rows i0 <= i < i1 (x: n×k, w: d×k, out: n×d).
  // Each output's summation order depends on k only, never on n, i0, i1 or the blocking.
  void (*matmul_rows)(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d,
                      std::size_t i0, std::size_t i1, const Blocking& b);
  void (*rmsnorm)(float* out, const float* x, const float* weight, std::size_t n, float eps);
  void (*axpy)(float* y, float a, const float* x, std::size_t n);
  // kernels::dots and kernels::axpys: runs of dot and axpy with the same bits.
  void (*dots)(float* out, const float* q, const float* rows, std::size_t stride, std::size_t count, std::size_t n,
               float scale);
  void (*axpys)(float* y, const float* a, const float* rows, std::size_t stride, std::size_t count, std::size_t n);
  // quant::vec_dot for a supported type; n already checked against the block size.
  float (*vec_dot)(DType w, std::size_t n, const void* w_row, const void* x_row);
  // quant::quantize_activation(Q8_0, x, dst, n), the same bytes for finite x; n a multiple of 32.
  void (*quantize_q8_0)(const float* x, void* dst, std::size_t n);
  // out[t, i] = vec_dot(wt, k, row i of w, row t of xq) for t < n and i0 <= i < i1 (w: d rows of wrb
  // bytes, xq: n activation rows of xrb bytes already quantized, k checked); bit-identical to vec_dot.
  void (*qmatmul_rows)(DType wt, float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb,
                       std::size_t n, std::size_t k, std::size_t d, std::size_t i0, std::size_t i1);
  // The roofline's compute peak: `iters` rounds of 12 independent vector FMAs; returns the lanes
  // per vector (so a caller can count 2·12·lanes·iters floating-point operations).
  std::size_t (*fma_probe)(std::size_t iters, float* sink);
  // kernels::exp_weights (n >= 1).
  float (*exp_weights)(const float* l, float* w, std::size_t n, double* sum, double* weighted);
  // Prefill's x packed once for all chunks of weight rows (matmul_rows reads it through Blocking::xp
  // instead of packing it in every chunk): the floats the packing of n rows of k takes (64-byte
  // aligned) and its row groups, 0 where matmul_rows packs nothing; and the packing of groups [g0, g1).
  std::size_t (*packed_x_floats)(std::size_t n, std::size_t k, std::size_t* groups);
  void (*pack_x_groups)(float* xp, const float* x, std::size_t n, std::size_t k, std::size_t g0, std::size_t g1);
  // Attention over a block of queries (kernels::pack_keys, dots_packed, axpys_rows): keys per block
  // of the packed layout (0: none, kernels.cpp packs plain rows), used for head sizes it divides.
  std::size_t key_block;
  void (*pack_keys)(float* kt, const float* rows, std::size_t stride, std::size_t count, std::size_t n, std::size_t at);
  void (*dots_packed)(float* out, std::size_t out_stride, const float* q, std::size_t q_stride, std::size_t nq, const float* kt,
                      std::size_t count, std::size_t n, float scale);
  void (*axpys_rows)(float* y, std::size_t y_stride, const float* a, std::size_t a_stride, std::size_t nq, const float* rows,
                     std::size_t stride, std::size_t count, std::size_t n);
  // kernels::softmax: softmax_scalar's numbers (libm's exp, the sum in order).
  void (*softmax)(float* x, std::size_t n);
  // kernels::first_nonfinite.
  std::size_t (*first_nonfinite)(const float* x, std::size_t n);
  // kernels::exp_floats: y = std::exp(x), libm's bits; and whether it computes them in vectors.
  void (*exp_floats)(const float* x, float* y, std::size_t n);
  bool (*exp_in_vectors)();
};

// The variants compiled in (core/CMakeLists.txt defines GLASSBOX_KERNELS_X86, _NEON or _WASM for the
// architecture's): x86-64, one build of kernels_isa.cpp each; aarch64, one build of kernels_neon.cpp
// each; wasm32, kernels_wasm.cpp (SIMD128); and everywhere the scalar set (kernels.cpp: every entry the scalar twin, or a plain loop of them).
#if defined(GLASSBOX_KERNELS_X86)
extern const KernelSet kernel_set_sse42, kernel_set_avx2, kernel_set_avx512, kernel_set_avx512vnni;
#endif
#if defined(GLASSBOX_KERNELS_NEON)
extern const KernelSet kernel_set_neon, kernel_set_neon_dotprod, kernel_set_neon_i8mm;
#endif
#if defined(GLASSBOX_KERNELS_WASM)
extern const KernelSet kernel_set_simd128;
#endif
extern const KernelSet kernel_set_scalar;

// The scalar set's entries for a SIMD set that has no vector form of them (NEON, SIMD128): each calls the
// scalar set, so its bits are the twins'. `dots_packed` runs the set's own `Dots` per query row.
namespace scalar_entries {
inline void quantize_q8_0(const float* x, void* dst, std::size_t n) { kernel_set_scalar.quantize_q8_0(x, dst, n); }
inline std::size_t packed_x_floats(std::size_t n, std::size_t k, std::size_t* groups) { return kernel_set_scalar.packed_x_floats(n, k, groups); }
inline void pack_x_groups(float* xp, const float* x, std::size_t n, std::size_t k, std::size_t g0, std::size_t g1) {
  kernel_set_scalar.pack_x_groups(xp, x, n, k, g0, g1);
}
inline void pack_keys(float* kt, const float* rows, std::size_t stride, std::size_t count, std::size_t n, std::size_t at) {
  kernel_set_scalar.pack_keys(kt, rows, stride, count, n, at);
}
template <auto Dots>
void dots_packed(float* out, std::size_t out_stride, const float* q, std::size_t q_stride, std::size_t nq, const float* kt,
                 std::size_t count, std::size_t n, float scale) {
  for (std::size_t r = 0; r < nq; ++r) Dots(out + r * out_stride, q + r * q_stride, kt, n, count, n, scale);
}
inline void exp_floats(const float* x, float* y, std::size_t n) { kernel_set_scalar.exp_floats(x, y, n); }
inline bool exp_in_vectors() { return false; }
}  // namespace scalar_entries

// The variant in use: the best one this CPU runs, unless GLASSBOX_KERNELS or use_kernel_set chose another.
const KernelSet& active_set();

}  // namespace glassbox::kernels
