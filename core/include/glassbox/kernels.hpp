// The few numeric kernels of the forward pass, each with a plain scalar version the SIMD one is tested against.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/forward/arch.hpp"
#include "glassbox/model/dtype.hpp"

namespace glassbox::kernels {

// ---- Instruction-set variants and threads ------------------------------------------------------
// The SIMD kernels are built several times (sse4.2, avx2 = AVX2+FMA+F16C, avx512 = AVX-512
// F/BW/DQ/VL, avx512-vnni = that + VNNI) and the best one the CPU supports is used, unless $GLASSBOX_KERNELS names another.
std::vector<std::string> kernel_sets();      // the variants this CPU can run, best first
std::string_view kernel_set();               // the variant in use
void use_kernel_set(std::string_view name);  // ConfigError if unknown or not supported by this CPU
// Threads the matrix products may use (default: $OMP_NUM_THREADS if set, else one per physical core).
int threads();
void set_threads(int n);  // 1..1024, else ConfigError
int cores();              // physical cores this process may run on
// True when some core is not computing: fewer compute threads than cores, or every worker of the
// matrix products' pool asleep (a small model's products stay on the calling thread). Background work
// (a trace's writer thread) run then takes no core from a product.
bool spare_core();
// Products of fewer multiply-adds than this run on the calling thread (handing out chunks would
// cost more than the second thread saves). Settable for tests and measurements; not a user option.
inline constexpr std::size_t kDefaultMinParallelMacs = std::size_t{1} << 16;
std::size_t min_parallel_macs();
void set_min_parallel_macs(std::size_t macs);
// The compute roofline's probe: `iters` rounds of 12 independent vector FMAs with the kernel set
// in use, on the calling thread. Returns the floating-point operations done (2 per lane per FMA).
double fma_probe(std::size_t iters);

// Σ a[i]·b[i]
float dot(const float* a, const float* b, std::size_t n);
float dot_scalar(const float* a, const float* b, std::size_t n);
// out[s] = dot(q, rows + s·stride, n) · scale for s < count: bit for bit `count` calls of dot, for
// attention's scores over a run of cached keys without a dispatch per key.
void dots(float* out, const float* q, const float* rows, std::size_t stride, std::size_t count, std::size_t n, float scale);

// out[t, i] = Σ_j x[t, j] · w[i, j]   x: (n, k), w: (d, k) row-major, out: (n, d).
// The weight matrix is streamed once for all n rows of x (prefill reuses it n times).
void matmul(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d);
void matmul_scalar(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d);

// The same product for a weight matrix w (d, k) in its stored type (dispatch on w.dtype). For
// non-F32 weights each input row is first rounded to the weight's activation type, as llama.cpp
// does (fp16 for F16, Q8_0 blocks for Q8_0/Q4_0, Q8_K blocks for the k-quants), into `xq`, which
// must hold n · xq_row_bytes(w) bytes; then each output is an integer block dot product.
void matmul(float* out, const float* x, const Tensor& w, std::size_t n, std::byte* xq);
void matmul_scalar(float* out, const float* x, const Tensor& w, std::size_t n, std::byte* xq);
std::size_t xq_row_bytes(const Tensor& w);  // bytes of one rounded input row for w (0 for F32)

// Several products of the same input x (n, k): out_s = x · w_sᵀ for each (out_s, w_s), bit for bit
// the separate matmul calls, but x is rounded once and all the matrices' rows are shared out among
// the threads in one dispatch (q, k, v; gate and up). Products of different row lengths or
// activation types, or more than kMaxProducts of them, run one by one.
struct Product {
  float* out;
  const Tensor* w;
};
inline constexpr std::size_t kMaxProducts = 4;
void matmuls(std::span<const Product> products, const float* x, std::size_t n, std::byte* xq);

// dst = row r of e (vocab, dim) dequantized to float: the embedding lookup.
void embedding_row(float* dst, const Tensor& e, std::int64_t r);

// out = weight ⊙ x / sqrt(mean(x²) + eps)
void rmsnorm(float* out, const float* x, const float* weight, std::size_t n, float eps);
void rmsnorm_scalar(float* out, const float* x, const float* weight, std::size_t n, float eps);

// x = exp(x - max x) / Σ exp(x - max x), in place
void softmax(float* x, std::size_t n);
void softmax_scalar(float* x, std::size_t n);
// y[i] = std::exp(x[i]) (x == y allowed), libm's bits: with FMA, glibc's expf computed in vector
// lanes, when that replica matched std::exp at start-up (exp_in_vectors); else std::exp per value.
void exp_floats(const float* x, float* y, std::size_t n);
bool exp_in_vectors();

// A trace's raw distribution p = softmax(l) without dividing: returns m = max l and writes
// w[i] = exp(l[i] − m), *sum = Σ w and *weighted = Σ w·(l − m) (terms with w = 0 left out), so that
// p_i = w_i / S and the entropy is ln S − weighted / S. n >= 1 and some l finite; -inf gives w = 0.
// The SIMD version uses xsimd's vector exp and sums float lanes over 16 vectors, each partial then
// added in double: a fixed order for a kernel set (like the logits, the last bits differ between sets).
float exp_weights(const float* l, float* w, std::size_t n, double* sum, double* weighted);
float exp_weights_scalar(const float* l, float* w, std::size_t n, double* sum, double* weighted);

// The index of the first x[i] that is ±inf or NaN, n when there is none (the loaders' check that
// every weight is a number).
std::size_t first_nonfinite(const float* x, std::size_t n);
std::size_t first_nonfinite_scalar(const float* x, std::size_t n);

// y += a · x
void axpy(float* y, float a, const float* x, std::size_t n);
void axpy_scalar(float* y, float a, const float* x, std::size_t n);
// y += a[s] · (rows + s·stride) for s = 0 .. count−1 in turn: bit for bit `count` calls of axpy
// (each element's chain of FMAs is the same), with y held in registers across the rows.
void axpys(float* y, const float* a, const float* rows, std::size_t stride, std::size_t count, std::size_t n);

// Attention over a block of queries (prefill), several queries per pass over the keys, with dots'
// and axpys' bits. Keys are first packed: pack_keys puts `count` rows of n (stride apart) at key
// index at.. of kt, which holds packed_keys_floats(keys, n) floats (64-byte aligned) for `keys`
// keys in all. Where attention_tiles(n) is false the packing is plain rows and the products run
// query by query.
bool attention_tiles(std::size_t n);
std::size_t packed_keys_floats(std::size_t count, std::size_t n);
// Floats a row of dots_packed's output takes for `count` keys (it writes whole blocks of keys).
std::size_t packed_scores_floats(std::size_t count, std::size_t n);
void pack_keys(float* kt, const float* rows, std::size_t stride, std::size_t count, std::size_t n, std::size_t at);
// out[r·out_stride + s] = dot(q + r·q_stride, key s, n)·scale, bit for bit, for r < nq and the
// first `count` keys of kt (what lies past them, up to packed_scores_floats, is overwritten).
void dots_packed(float* out, std::size_t out_stride, const float* q, std::size_t q_stride, std::size_t nq, const float* kt,
                 std::size_t count, std::size_t n, float scale);
// axpys(y + r·y_stride, a + r·a_stride, rows, stride, count, n) for r < nq, bit for bit, each row
// of `rows` read once for all nq.
void axpys_rows(float* y, std::size_t y_stride, const float* a, std::size_t a_stride, std::size_t nq, const float* rows,
                std::size_t stride, std::size_t count, std::size_t n);

// RoPE on one position: rotates each pair (x[2i], x[2i+1]) of every head by the angle whose
// cos/sin are cos_sin[2·(i mod head_size/2)], [.. + 1]. `n` is the vector length (heads·head_size).
void rope(float* x, const float* cos_sin, std::size_t n, std::size_t head_size);

// ---- a block's rows at once ----------------------------------------------------------------------
// The per-row steps of a forward pass over `rows` positions, spread over the threads when the block
// is large enough to pay for it; each row's (each element's) arithmetic is the one-row kernel's, so
// the results do not depend on the block or the thread count.
// out[t] = rmsnorm(x[t]) for rows of n floats.
void rmsnorm_rows(float* out, const float* x, const float* weight, std::size_t rows, std::size_t n, float eps);
// rope on row t of q (q_n floats a row) and of k (k_n floats) with the cos/sin row cos_sin + t·head_size
// (the angles of the row's position).
void rope_rows(float* q, std::size_t q_n, float* k, std::size_t k_n, const float* cos_sin, std::size_t rows, std::size_t head_size);
// gate[i] = SiLU(gate[i])·up[i] = gate[i] / (1 + exp(−gate[i]))·up[i]   (libm's expf, as softmax)
void swiglu(float* gate, const float* up, std::size_t n);
// y[i] += x[i]
void add(float* y, const float* x, std::size_t n);

// ---- the other architectures' steps (docs/architectures.md) --------------------------------------
// out[t] = (x[t] − mean)/√(var + eps) ⊙ weight + bias for rows of n (bias may be null): LayerNorm, with
// ggml_norm's order (mean and variance summed in double, biased variance).
void layernorm_rows(float* out, const float* x, const float* weight, const float* bias, std::size_t rows, std::size_t n, float eps);
void layernorm_scalar(float* out, const float* x, const float* weight, const float* bias, std::size_t n, float eps);
// y[t, i] += bias[i] for rows of n
void add_bias(float* y, const float* bias, std::size_t rows, std::size_t n);
void add_bias_scalar(float* y, const float* bias, std::size_t rows, std::size_t n);
// x[i] = GELU(x[i]) in the chosen form (tanh approximation, exact erf, llama.cpp's fp16 table)
void gelu(float* x, std::size_t n, GeluKind kind);
void gelu_scalar(float* x, std::size_t n, GeluKind kind);
float gelu_one(float x, GeluKind kind);
// gate[i] = GELU(gate[i])·up[i]
void geglu(float* gate, const float* up, std::size_t n, GeluKind kind);
void geglu_scalar(float* gate, const float* up, std::size_t n, GeluKind kind);
// NeoX RoPE on one position: in every head (head_size apart) rotates the pairs (x[i], x[i + n_rot/2]),
// i < n_rot/2, by the angle whose cos/sin are cos_sin[2i], [2i + 1]; dims from n_rot on are left alone.
void rope_neox(float* x, const float* cos_sin, std::size_t n, std::size_t head_size, std::size_t n_rot);
void rope_neox_scalar(float* x, const float* cos_sin, std::size_t n, std::size_t head_size, std::size_t n_rot);
// rope_neox on row t of q and of k with the cos/sin row cos_sin + t·head_size.
void rope_neox_rows(float* q, std::size_t q_n, float* k, std::size_t k_n, const float* cos_sin, std::size_t rows, std::size_t head_size,
                    std::size_t n_rot);
// x[i] = cap·tanh(x[i]/cap): soft-capping of attention scores and final logits (Gemma 2).
void softcap(float* x, std::size_t n, float cap);
void softcap_scalar(float* x, std::size_t n, float cap);
// x[i] *= a
void scale(float* x, std::size_t n, float a);

}  // namespace glassbox::kernels
