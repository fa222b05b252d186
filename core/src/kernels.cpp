// The forward pass's kernels: scalar reference versions and xsimd versions of the hot ones.
#include "glassbox/kernels.hpp"

#include <algorithm>
#include <cmath>

#include <xsimd/xsimd.hpp>

#include "glassbox/quant.hpp"

namespace glassbox::kernels {

using batch = xsimd::batch<float>;
constexpr std::size_t W = batch::size;

float dot_scalar(const float* a, const float* b, std::size_t n) {
  float s = 0.0f;
  for (std::size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

float dot(const float* a, const float* b, std::size_t n) {
  // Four independent accumulators hide the add latency; the tail is scalar.
  batch s0(0.0f), s1(0.0f), s2(0.0f), s3(0.0f);
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    s0 = xsimd::fma(batch::load_unaligned(a + i), batch::load_unaligned(b + i), s0);
    s1 = xsimd::fma(batch::load_unaligned(a + i + W), batch::load_unaligned(b + i + W), s1);
    s2 = xsimd::fma(batch::load_unaligned(a + i + 2 * W), batch::load_unaligned(b + i + 2 * W), s2);
    s3 = xsimd::fma(batch::load_unaligned(a + i + 3 * W), batch::load_unaligned(b + i + 3 * W), s3);
  }
  for (; i + W <= n; i += W) s0 = xsimd::fma(batch::load_unaligned(a + i), batch::load_unaligned(b + i), s0);
  float s = xsimd::hadd((s0 + s1) + (s2 + s3));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void matmul_scalar(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d) {
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t i = 0; i < d; ++i) out[t * d + i] = dot_scalar(x + t * k, w + i * k, k);
}

void matmul(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d) {
  // Rows of w are split across threads; each output element is computed by one thread in a
  // fixed order, so the result does not depend on the thread count.
// Threads only pay off above about a million multiply-adds; below that the fork/join costs more.
#pragma omp parallel for schedule(static) if (d * k * n >= (1u << 20))
  for (std::size_t i = 0; i < d; ++i) {
    const float* wi = w + i * k;
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = dot(x + t * k, wi, k);
  }
}

std::size_t xq_row_bytes(const Tensor& w) {
  if (w.dtype == DType::F32) return 0;
  return row_bytes(quant::vec_dot_type(w.dtype), static_cast<std::size_t>(w.cols()));
}

namespace {
template <bool Scalar>
void matmul_typed(float* out, const float* x, const Tensor& w, std::size_t n, std::byte* xq) {
  const std::size_t k = w.cols(), d = w.rows();
  if (w.dtype == DType::F32) {
    if constexpr (Scalar) matmul_scalar(out, x, w.f32(), n, k, d);
    else matmul(out, x, w.f32(), n, k, d);
    return;
  }
  const DType xt = quant::vec_dot_type(w.dtype);
  const std::size_t xrb = row_bytes(xt, k), wrb = row_bytes(w.dtype, k);
  for (std::size_t t = 0; t < n; ++t) quant::quantize_activation(xt, x + t * k, xq + t * xrb, k);
  // As for float32: rows of w split across threads, each output summed in a fixed order.
#pragma omp parallel for schedule(static) if (!Scalar && d * k * n >= (1u << 20))
  for (std::size_t i = 0; i < d; ++i) {
    const std::byte* wi = w.data + i * wrb;
    for (std::size_t t = 0; t < n; ++t)
      out[t * d + i] = Scalar ? quant::vec_dot_scalar(w.dtype, k, wi, xq + t * xrb) : quant::vec_dot(w.dtype, k, wi, xq + t * xrb);
  }
}
}  // namespace

void matmul(float* out, const float* x, const Tensor& w, std::size_t n, std::byte* xq) { matmul_typed<false>(out, x, w, n, xq); }
void matmul_scalar(float* out, const float* x, const Tensor& w, std::size_t n, std::byte* xq) { matmul_typed<true>(out, x, w, n, xq); }

void embedding_row(float* dst, const Tensor& e, std::int64_t r) {
  const std::size_t dim = e.cols();
  if (e.dtype == DType::F32) std::copy_n(e.f32() + r * dim, dim, dst);
  else quant::dequantize_row(e.dtype, e.row(r), dst, dim);
}

void rmsnorm_scalar(float* out, const float* x, const float* weight, std::size_t n, float eps) {
  float ss = 0.0f;
  for (std::size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (std::size_t i = 0; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}

void rmsnorm(float* out, const float* x, const float* weight, std::size_t n, float eps) {
  const float scale = 1.0f / std::sqrt(dot(x, x, n) / static_cast<float>(n) + eps);
  std::size_t i = 0;
  const batch s(scale);
  for (; i + W <= n; i += W)
    (batch::load_unaligned(weight + i) * (s * batch::load_unaligned(x + i))).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = weight[i] * (scale * x[i]);
}

void softmax_scalar(float* x, std::size_t n) {
  if (n == 0) return;
  const float mx = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  for (std::size_t i = 0; i < n; ++i) x[i] /= sum;
}

void softmax(float* x, std::size_t n) {
  // exp() stays scalar libm: xsimd's vector exp differs in the last bits, and the logits'
  // distribution is what learners compare across machines.
  softmax_scalar(x, n);
}

void axpy_scalar(float* y, float a, const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void axpy(float* y, float a, const float* x, std::size_t n) {
  std::size_t i = 0;
  const batch av(a);
  for (; i + W <= n; i += W)
    xsimd::fma(av, batch::load_unaligned(x + i), batch::load_unaligned(y + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] += a * x[i];
}

void rope(float* x, const float* cos_sin, std::size_t n, std::size_t head_size) {
  for (std::size_t i = 0; i < n; i += 2) {
    const std::size_t j = i % head_size;  // pair index within the head, times 2
    const float c = cos_sin[j], s = cos_sin[j + 1];
    const float x0 = x[i], x1 = x[i + 1];
    x[i] = x0 * c - x1 * s;
    x[i + 1] = x0 * s + x1 * c;
  }
}

}  // namespace glassbox::kernels
