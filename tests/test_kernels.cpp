// Each SIMD kernel against its plain scalar version, over sizes that hit every tail case. Natively and, for
// the WebAssembly build's SIMD128 set, under node (tests/web/test_kernels_node.cpp; one thread there).
#define BOOST_TEST_MODULE kernels
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#if !defined(__EMSCRIPTEN__)
#include <gnu/libc-version.h>
#endif

#include <algorithm>
#include <chrono>
#include <thread>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <xsimd/memory/xsimd_aligned_allocator.hpp>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/model/model_source.hpp"
#include "glassbox/os.hpp"
#include "glassbox/quant.hpp"
#include "support.hpp"
#include "../core/src/thread_pool.hpp"

namespace bdata = boost::unit_test::data;
namespace k = glassbox::kernels;

namespace {
std::vector<float> randv(std::size_t n, unsigned seed) { return gbtest::uniform_floats(n, seed, -1.0f, 1.0f); }
const auto kSizes = bdata::make({1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 172, 512, 4099});

// The thread tests' matrices are small (a few hundred to a few thousand multiply-adds per output
// row); at the default threshold many of their products would run on the calling thread alone and
// "2 and 3 threads" would compare one thread with itself. Every product of two or more chunks is
// spread over the threads while one of these lives.
struct SplitEveryProduct {
  SplitEveryProduct() { k::set_min_parallel_macs(0); }
  ~SplitEveryProduct() { k::set_min_parallel_macs(k::kDefaultMinParallelMacs); }
};

// The thread counts a test tries out of `counts`: 1 only where the build has no threads (WebAssembly).
std::vector<int> thread_counts(std::initializer_list<int> counts) {
  std::vector<int> out;
  for (int t : counts)
    if (t == 1 || glassbox::os::kThreads) out.push_back(t);
  return out;
}

// Runs `check` once with every instruction-set variant this CPU supports, then restores the default.
template <class F>
void for_each_kernel_set(F&& check) {
  const std::string initial(k::kernel_set());
  for (const auto& set : k::kernel_sets()) {
    k::use_kernel_set(set);
    BOOST_TEST_CONTEXT("kernel set " << set) { check(); }
  }
  k::use_kernel_set(initial);
}

// A (d, k) weight matrix of `type` from float rows `wf`: its bytes (in `bytes`, which the caller keeps)
// and the Tensor over them.
glassbox::Tensor weight_matrix(glassbox::DType type, const std::vector<float>& wf, std::size_t d, std::size_t k,
                               std::vector<std::byte>& bytes) {
  const std::size_t wrb = glassbox::row_bytes(type, k);
  bytes.resize(d * wrb);
  if (type == glassbox::DType::F32) std::memcpy(bytes.data(), wf.data(), bytes.size());
  else
    for (std::size_t i = 0; i < d; ++i) glassbox::quant::quantize_row(type, wf.data() + i * k, bytes.data() + i * wrb, k);
  glassbox::Tensor w;
  w.dtype = type;
  w.n_dims = 2;
  w.shape = {static_cast<std::int64_t>(d), static_cast<std::int64_t>(k), 0, 0};
  w.data = bytes.data();
  w.bytes = bytes.size();
  return w;
}
}  // namespace

BOOST_DATA_TEST_CASE(dot_matches_scalar, kSizes, n) {
  auto a = randv(n, 1), b = randv(n, 2);
  for_each_kernel_set([&] {
    BOOST_TEST(std::abs(k::dot(a.data(), b.data(), n) - k::dot_scalar(a.data(), b.data(), n)) <= 1e-5f * std::sqrt(float(n)));
  });
}

BOOST_DATA_TEST_CASE(matmul_matches_scalar, kSizes ^ bdata::make({1, 3, 2, 5, 1, 4, 2, 3, 1, 2, 7, 1, 3, 2, 4, 1, 2, 3, 1}), kdim, rows) {
  const std::size_t d = 37;
  auto x = randv(rows * kdim, 3), w = randv(d * kdim, 4);
  std::vector<float> a(rows * d), b(rows * d);
  k::matmul_scalar(b.data(), x.data(), w.data(), rows, kdim, d);
  for_each_kernel_set([&] {
    k::matmul(a.data(), x.data(), w.data(), rows, kdim, d);
    // Absolute tolerance: summation order differs, and entries near 0 make relative error meaningless.
    for (std::size_t i = 0; i < a.size(); ++i) BOOST_TEST(std::abs(a[i] - b[i]) <= 1e-5f * std::sqrt(float(kdim)));
  });
}

// Attention's runs of dots and axpys are bit for bit the single calls, for every row length's tails.
BOOST_DATA_TEST_CASE(dots_and_axpys_are_the_single_calls, kSizes, n) {
  const std::size_t count = 37, stride = n + 3;
  auto q = randv(n, 21), rows = randv(count * stride, 22), a = randv(count, 23), y0 = randv(n, 24);
  for_each_kernel_set([&] {
    std::vector<float> got(count), y = y0, want_y = y0;
    k::dots(got.data(), q.data(), rows.data(), stride, count, n, 0.125f);
    for (std::size_t s = 0; s < count; ++s) BOOST_TEST_REQUIRE(got[s] == k::dot(q.data(), rows.data() + s * stride, n) * 0.125f);
    k::axpys(y.data(), a.data(), rows.data(), stride, count, n);
    for (std::size_t s = 0; s < count; ++s) k::axpy(want_y.data(), a[s], rows.data() + s * stride, n);
    BOOST_TEST((y == want_y));
  });
}

// Attention over a block of queries: dots_packed is dot·scale and axpys_rows is axpys, bit for bit,
// for head sizes the kernel set tiles and those it does not, any number of queries per call, and
// keys packed in pieces at offsets inside a block and at its start.
BOOST_DATA_TEST_CASE(packed_attention_is_the_single_calls,
                     bdata::make({4, 8, 16, 17, 24, 32, 48, 64, 80, 128}) * bdata::make({1, 2, 3, 4, 5, 9}), n, nq) {
  const std::size_t count = 53, stride = 3 * n + 5, q_stride = n + 7, a_stride = count + 2;
  const auto keys = randv(count * stride, 31), q = randv(nq * q_stride, 32), a = randv(nq * a_stride, 33), y0 = randv(nq * q_stride, 34);
  for_each_kernel_set([&] {
    BOOST_TEST_CONTEXT("head size " << n << ", " << nq << " queries, tiled " << k::attention_tiles(n)) {
      for (std::size_t split : {0, 21, 32}) {
        std::vector<float, xsimd::aligned_allocator<float, 64>> kt(k::packed_keys_floats(count, n));
        k::pack_keys(kt.data(), keys.data(), stride, split, n, 0);
        k::pack_keys(kt.data(), keys.data() + split * stride, stride, count - split, n, split);
        const std::size_t row = k::packed_scores_floats(count, n);
        BOOST_TEST_REQUIRE(row >= count);
        std::vector<float> out(nq * row);
        k::dots_packed(out.data(), row, q.data(), q_stride, nq, kt.data(), count, n, 0.125f);
        for (std::size_t r = 0; r < std::size_t(nq); ++r)
          for (std::size_t s = 0; s < count; ++s) {
            const float want = k::dot(q.data() + r * q_stride, keys.data() + s * stride, n) * 0.125f;
            BOOST_TEST_REQUIRE(out[r * row + s] == want, "query " << r << " key " << s << " split " << split);
            // and the scalar twin, to a tolerance (another summation order)
            BOOST_TEST_REQUIRE(std::abs(out[r * row + s] - 0.125f * k::dot_scalar(q.data() + r * q_stride, keys.data() + s * stride, n)) <=
                               1e-5f * std::sqrt(float(n)));
          }
      }
      auto y = y0, want = y0;
      k::axpys_rows(y.data(), q_stride, a.data(), a_stride, nq, keys.data(), stride, count, n);
      for (std::size_t r = 0; r < std::size_t(nq); ++r)
        k::axpys(want.data() + r * q_stride, a.data() + r * a_stride, keys.data(), stride, count, n);
      BOOST_TEST((y == want));
    }
  });
}

BOOST_DATA_TEST_CASE(rmsnorm_matches_scalar, kSizes, n) {
  auto x = randv(n, 5), w = randv(n, 6);
  std::vector<float> a(n), b(n);
  k::rmsnorm_scalar(b.data(), x.data(), w.data(), n, 1e-5f);
  for_each_kernel_set([&] {
    k::rmsnorm(a.data(), x.data(), w.data(), n, 1e-5f);
    for (std::size_t i = 0; i < std::size_t(n); ++i) BOOST_TEST(a[i] == b[i], boost::test_tools::tolerance(1e-5f));
  });
}

BOOST_DATA_TEST_CASE(axpy_matches_scalar, kSizes, n) {
  const auto x = randv(n, 7), y = randv(n, 8);
  auto b = y;
  k::axpy_scalar(b.data(), 0.37f, x.data(), n);
  for_each_kernel_set([&] {
    auto a = y;
    k::axpy(a.data(), 0.37f, x.data(), n);
    // A fused multiply-add rounds once where the scalar version rounds twice: the error is relative
    // to the terms, not to their (possibly cancelling) sum.
    for (std::size_t i = 0; i < std::size_t(n); ++i) BOOST_TEST(std::abs(a[i] - b[i]) <= 1e-6f * (std::abs(y[i]) + std::abs(0.37f * x[i])));
  });
}

// exp_floats is std::exp bit for bit in every kernel set: every 4,099th float (both signs, the whole
// range: ~1 million values) with ±inf, NaN, ±0, denormals and the ends of libm's ordinary range
// (|x| < 88) and of its underflow range, at three start offsets (every tail length) and in place.
// With the glibc of Debian 12 (2.36, whose expf the lanes replicate) the FMA sets must compute in
// vectors: otherwise the start-up check found the replica wrong and every set silently fell back.
BOOST_AUTO_TEST_CASE(exp_floats_is_libm_expf) {
  std::vector<float> x;
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 4099) x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  for (float e : {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e-45f, -1e-45f, 88.0f, -88.0f, std::nextafter(88.0f, 0.0f),
                  std::nextafter(-88.0f, 0.0f), 0x1.62e42ep6f, -0x1.9fe368p6f, -0x1.9d1d9ep6f, -87.33655f})
    for (int i = 0; i < 9; ++i) x.push_back(e), x.push_back(-1.0f * static_cast<float>(i));  // in every lane position
  std::vector<std::uint32_t> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = std::bit_cast<std::uint32_t>(std::exp(x[i]));
#if defined(__EMSCRIPTEN__)
  const bool glibc_236 = false;  // musl
#else
  const bool glibc_236 = std::string(gnu_get_libc_version()) == "2.36";
#endif
  for_each_kernel_set([&] {
    for (std::size_t off : {0, 1, 3}) {
      std::vector<float> got(x.size() - off, -1.0f);
      k::exp_floats(x.data() + off, got.data(), got.size());
      std::size_t bad = 0, first = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        if (std::bit_cast<std::uint32_t>(got[i]) != want[i + off] && bad++ == 0) first = i + off;
      BOOST_TEST(bad == 0u, bad << " values differ from std::exp, the first exp(" << x[first] << ")");
    }
    auto y = x;
    k::exp_floats(y.data(), y.data(), y.size());
    BOOST_TEST(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
    // The lanes replicate glibc's __expf_fma (x86-64's AVX2 and AVX-512 sets); the others call libm.
    const bool fma_x86 = std::string(k::kernel_set()).rfind("avx", 0) == 0;
    if (glibc_236 && fma_x86) BOOST_TEST(k::exp_in_vectors());
    if (!fma_x86) BOOST_TEST(!k::exp_in_vectors());
  });
}

// softmax is softmax_scalar bit for bit (its maximum, exp — libm's, in lanes — and division are
// vectorized, the sum is not), with signed zeros, infinities and NaNs among the inputs too.
BOOST_DATA_TEST_CASE(softmax_is_the_scalar_version, kSizes * bdata::xrange(4), n, special) {
  auto x = randv(n, 19);
  for (auto& v : x) v *= 30.0f;
  if (special == 1) x[n / 2] = -0.0f, x[0] = 0.0f;
  if (special == 2) x[n - 1] = -INFINITY, x[n / 3] = INFINITY;
  if (special == 3) x[n / 2] = NAN;
  auto want = x;
  k::softmax_scalar(want.data(), n);
  for_each_kernel_set([&] {
    auto got = x;
    k::softmax(got.data(), n);
    BOOST_TEST(std::memcmp(got.data(), want.data(), n * sizeof(float)) == 0);
  });
}

BOOST_DATA_TEST_CASE(softmax_is_a_distribution, kSizes, n) {
  auto x = randv(n, 9);
  for (auto& v : x) v *= 30.0f;  // large logits: the max subtraction must keep exp finite
  auto y = x;
  k::softmax(y.data(), n);
  double sum = 0;
  for (std::size_t i = 0; i < std::size_t(n); ++i) {
    BOOST_TEST(y[i] >= 0.0f);
    sum += y[i];
  }
  BOOST_TEST(sum == 1.0, boost::test_tools::tolerance(1e-5));
  // Order is preserved: a larger logit never gets a smaller probability.
  for (std::size_t i = 1; i < std::size_t(n); ++i)
    if (x[i] > x[i - 1]) BOOST_TEST(y[i] >= y[i - 1]);
}

// The trace's raw distribution: every kernel set against libm's expf and double sums, with -inf
// entries (banned tokens) and a 32,000-entry vocabulary besides the usual sizes.
BOOST_DATA_TEST_CASE(exp_weights_match_scalar, kSizes + bdata::make({32000}), n) {
  auto l = randv(n, 11);
  for (auto& v : l) v *= 12.0f;
  for (std::size_t i = 3; i < std::size_t(n); i += 7) l[i] = -std::numeric_limits<float>::infinity();
  std::vector<float> w(n), ws(n);
  double ss = 0, sws = 0;
  const float ms = k::exp_weights_scalar(l.data(), ws.data(), n, &ss, &sws);
  for_each_kernel_set([&] {
    double s = 0, sw = 0;
    std::fill(w.begin(), w.end(), -1.0f);
    const float m = k::exp_weights(l.data(), w.data(), n, &s, &sw);
    BOOST_TEST(m == ms);  // the max is exact
    for (std::size_t i = 0; i < std::size_t(n); ++i) BOOST_TEST(w[i] == ws[i], boost::test_tools::tolerance(4e-7f));
    BOOST_TEST(s == ss, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sw == sws, boost::test_tools::tolerance(1e-5));
    // the same kernel set gives the same bits again
    double s2 = 0, sw2 = 0;
    std::vector<float> w2(n);
    k::exp_weights(l.data(), w2.data(), n, &s2, &sw2);
    BOOST_TEST((s2 == s && sw2 == sw && w2 == w));
  });
}

// The loaders' check of every weight: the first ±inf or NaN, wherever it falls (first lane, a chunk's
// last, the scalar tail), with ordinary values, zeros and denormals around it; n when there is none.
BOOST_DATA_TEST_CASE(first_nonfinite_matches_scalar, kSizes + bdata::make({40000, 100003}), n) {
  auto x = randv(n, 5);
  for (std::size_t i = 0; i < std::size_t(n); i += 5) x[i] = 0.0f;
  for (std::size_t i = 2; i < std::size_t(n); i += 11) x[i] = std::numeric_limits<float>::denorm_min();
  for (std::size_t i = 4; i < std::size_t(n); i += 13) x[i] = std::numeric_limits<float>::max();
  const float bad[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()};
  std::vector<std::size_t> where{0, std::size_t(n) - 1, std::size_t(n) / 2};
  for (std::size_t chunk : {1024u, 2048u, 4096u, 16384u})
    if (chunk < std::size_t(n)) where.insert(where.end(), {chunk - 1, chunk});
  for_each_kernel_set([&] {
    BOOST_TEST(k::first_nonfinite(x.data(), n) == std::size_t(n));
    BOOST_TEST(k::first_nonfinite_scalar(x.data(), n) == std::size_t(n));
    for (std::size_t at : where)
      for (float b : bad) {
        auto y = x;
        y[at] = b;
        if (at + 7 < std::size_t(n)) y[at + 7] = bad[0];  // a later one does not change the answer
        BOOST_TEST(k::first_nonfinite(y.data(), n) == at, "at " << at << " value " << b);
        BOOST_TEST(k::first_nonfinite_scalar(y.data(), n) == at);
      }
  });
}

BOOST_AUTO_TEST_CASE(rope_rotates_pairs_by_the_given_angle) {
  // One head of size 4 at angles a0 (pair 0) and a1 (pair 1): a pure 2-D rotation per pair.
  const float a0 = 0.3f, a1 = 1.1f;
  const float cs[4] = {std::cos(a0), std::sin(a0), std::cos(a1), std::sin(a1)};
  float x[8] = {1, 0, 0, 1, 2, 3, 4, 5};  // two heads
  k::rope(x, cs, 8, 4);
  BOOST_TEST(x[0] == std::cos(a0), boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(x[1] == std::sin(a0), boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(x[2] == -std::sin(a1), boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(x[3] == std::cos(a1), boost::test_tools::tolerance(1e-6f));
  // Rotation keeps each pair's length.
  BOOST_TEST(x[4] * x[4] + x[5] * x[5] == 13.0f, boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(x[6] * x[6] + x[7] * x[7] == 41.0f, boost::test_tools::tolerance(1e-5f));
}

// RoPE (two pairs per vector where the head size allows) and SwiGLU (libm's exp, the rest four at a
// time) are their scalar formulas bit for bit, tails included.
BOOST_DATA_TEST_CASE(rope_and_swiglu_are_the_scalar_formulas, bdata::make({2, 4, 6, 8, 48, 64}) * bdata::make({1, 3}), head_size, heads) {
  const std::size_t hs = head_size, n = hs * heads;
  auto x = randv(n, 51), cs = randv(hs, 52), up = randv(n, 53);
  auto want = x, got = x;
  for (std::size_t i = 0; i < n; i += 2) {
    const float c = cs[i % hs], s = cs[i % hs + 1], x0 = x[i], x1 = x[i + 1];
    want[i] = x0 * c - x1 * s;
    want[i + 1] = x0 * s + x1 * c;
  }
  k::rope(got.data(), cs.data(), n, hs);
  BOOST_TEST((got == want));
  for (std::size_t m : {n, n + 1, 4 * n + 67}) {
    auto g = randv(m, 54), u = randv(m, 55), w = g;
    for (auto& v : g) v *= 4.0f;
    for (std::size_t i = 0; i < m; ++i) w[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    k::swiglu(g.data(), u.data(), m);
    BOOST_TEST((g == w));
  }
}

// WebAssembly's simd128 set (kernels_wasm.cpp) keeps the scalar twins' float bits: its lanes are four
// outputs, each the scalar chain (matmul_rows, dots), or element-wise (axpy, axpys, RMSNorm's scaling).
// Decode and prefill (1..5 activation rows), weight rows in groups of 16 (decode), 8 and 4 and the rows left over
// (d = 31), every k tail; values with ±0, subnormals and large magnitudes among them.
BOOST_DATA_TEST_CASE(simd128_float_kernels_are_the_scalar_twin_bit_for_bit, kSizes, kdim) {
  const std::size_t kd = kdim, d = 31, n = 5;
  auto x = randv(n * kd, 71), w = randv(d * kd, 72), y0 = randv(d * kd, 73), a = randv(d, 74);
  for (std::size_t j = 0; j < w.size(); j += 13) w[j] = j % 2 ? 0.0f : -0.0f;
  for (std::size_t j = 5; j < w.size(); j += 17) w[j] *= 1e-40f;
  for (std::size_t j = 3; j < x.size(); j += 11) x[j] *= 3e4f;
  auto bits_equal = [](const std::vector<float>& p, const std::vector<float>& q) {
    return p.size() == q.size() && std::memcmp(p.data(), q.data(), p.size() * sizeof(float)) == 0;
  };
  std::size_t checked = 0;
  const std::string initial(k::kernel_set());
  for (const auto& set : k::kernel_sets()) {
    if (set != "simd128" && set != "scalar") continue;
    ++checked;
    k::use_kernel_set(set);
    BOOST_TEST_CONTEXT("kernel set " << set << ", kd " << kd) {
      for (std::size_t rows = 1; rows <= n; ++rows) {
        std::vector<float> ref(rows * d), out(rows * d);
        k::matmul_scalar(ref.data(), x.data(), w.data(), rows, kd, d);
        k::matmul(out.data(), x.data(), w.data(), rows, kd, d);
        BOOST_TEST(bits_equal(out, ref), "matmul, " << rows << " rows");
      }
      std::vector<float> sref(d), sout(d);
      for (std::size_t s = 0; s < d; ++s) sref[s] = k::dot_scalar(x.data(), w.data() + s * kd, kd) * 0.125f;
      k::dots(sout.data(), x.data(), w.data(), kd, d, kd, 0.125f);
      BOOST_TEST(bits_equal(sout, sref), "dots");
      auto yr = y0, yo = y0;
      k::axpy_scalar(yr.data(), 0.37f, w.data(), d * kd);
      k::axpy(yo.data(), 0.37f, w.data(), d * kd);
      BOOST_TEST(bits_equal(yo, yr), "axpy");
      std::vector<float> ar(kd), ao(kd);
      std::copy_n(y0.begin(), kd, ar.begin());
      ao = ar;
      for (std::size_t s = 0; s < d; ++s) k::axpy_scalar(ar.data(), a[s], w.data() + s * kd, kd);
      k::axpys(ao.data(), a.data(), w.data(), kd, d, kd);
      BOOST_TEST(bits_equal(ao, ar), "axpys");
      std::vector<float> nr(kd), no(kd);
      k::rmsnorm_scalar(nr.data(), x.data(), w.data(), kd, 1e-5f);
      k::rmsnorm(no.data(), x.data(), w.data(), kd, 1e-5f);
      BOOST_TEST(bits_equal(no, nr), "rmsnorm");
    }
  }
  k::use_kernel_set(initial);
  BOOST_TEST(checked >= 1u);
}

// Prefill (n rows at once, register-tiled or as lane products) and decode (one row) give bit-identical outputs, and so
// do 1, 2 and 3 threads: each output's summation order depends on k alone.
// 11 rows take the dot-product tiles only; 47 rows the lane products (groups of 14 or 6 rows, then
// 4, then 1); the d values leave panels of 32, 16 and fewer rows.
BOOST_DATA_TEST_CASE(matmul_is_independent_of_block_and_threads,
                     (bdata::make({16, 100, 768, 33}) ^ bdata::make({70, 301, 96, 72})) * bdata::make({11, 47}), kdim, d, rows) {
  const SplitEveryProduct split;
  const std::size_t n = rows;
  auto x = randv(n * kdim, 11), w = randv(d * kdim, 12);
  const int threads = k::threads();
  for_each_kernel_set([&] {
    k::set_threads(1);
    std::vector<float> ref(n * d), one(d), out(n * d);
    k::matmul(ref.data(), x.data(), w.data(), n, kdim, d);
    for (std::size_t t = 0; t < n; ++t) {
      k::matmul(one.data(), x.data() + t * kdim, w.data(), 1, kdim, d);
      for (std::size_t i = 0; i < std::size_t(d); ++i) BOOST_TEST_REQUIRE(one[i] == ref[t * d + i]);
    }
    for (int th : thread_counts({2, 3})) {
      k::set_threads(th);
      k::matmul(out.data(), x.data(), w.data(), n, kdim, d);
      BOOST_TEST((out == ref));
    }
  });
  k::set_threads(threads);
}

// A block's per-row steps (RMSNorm, RoPE, SwiGLU, residual add) spread over 1, 2 or 3 threads
// give the bits of the one-row kernels applied row by row. 256 rows of 320 values are past the
// size where they go to the threads; 3 rows stay on the calling thread.
BOOST_DATA_TEST_CASE(block_rows_are_the_one_row_kernels_on_any_thread_count, bdata::make({3, 256}), rows) {
  const SplitEveryProduct split;
  const std::size_t n = 320, hs = 64, kn = 128, R = rows;
  auto x = randv(R * n, 21), w = randv(n, 22), up = randv(R * n, 23), kx = randv(R * kn, 24), cs = randv(R * hs, 25);
  for (auto& v : x) v *= 4.0f;  // SiLU over a few units either side of 0
  std::vector<float> norm_ref(R * n), q_ref = x, k_ref = kx, gate_ref = x, sum_ref = x;
  for (std::size_t t = 0; t < R; ++t) {
    k::rmsnorm(&norm_ref[t * n], &x[t * n], w.data(), n, 1e-5f);
    k::rope(&q_ref[t * n], &cs[t * hs], n, hs);
    k::rope(&k_ref[t * kn], &cs[t * hs], kn, hs);
  }
  for (std::size_t i = 0; i < R * n; ++i) {
    gate_ref[i] = x[i] / (1.0f + std::exp(-x[i])) * up[i];
    sum_ref[i] += up[i];
  }
  const int threads = k::threads();
  for (int th : thread_counts({1, 2, 3})) {
    k::set_threads(th);
    std::vector<float> norm(R * n), q = x, kk = kx, gate = x, sum = x;
    k::rmsnorm_rows(norm.data(), x.data(), w.data(), R, n, 1e-5f);
    k::rope_rows(q.data(), n, kk.data(), kn, cs.data(), R, hs);
    k::swiglu(gate.data(), up.data(), R * n);
    k::add(sum.data(), up.data(), R * n);
    BOOST_TEST_CONTEXT(th << " threads") {
      BOOST_TEST((norm == norm_ref));
      BOOST_TEST((q == q_ref));
      BOOST_TEST((kk == k_ref));
      BOOST_TEST((gate == gate_ref));
      BOOST_TEST((sum == sum_ref));
    }
  }
  k::set_threads(threads);
}

BOOST_AUTO_TEST_CASE(kernel_sets_are_named_and_checked) {
  const auto sets = k::kernel_sets();
  BOOST_TEST_REQUIRE(!sets.empty());
  BOOST_TEST(sets.back() == "scalar");  // the scalar twins run everywhere
#if defined(__x86_64__)
  BOOST_TEST(sets[sets.size() - 2] == "sse4.2");  // the build's baseline runs everywhere it runs
  const std::string foreign = "neon";
#elif defined(__aarch64__)
  BOOST_TEST(sets[sets.size() - 2] == "neon");  // every ARMv8-A core has Advanced SIMD
  const std::string foreign = "avx2";
#else
  const std::string foreign = "neon";
#endif
  if (!std::getenv("GLASSBOX_KERNELS")) BOOST_TEST(k::kernel_set() == sets.front());
  BOOST_CHECK_EXCEPTION(k::use_kernel_set(foreign), glassbox::ConfigError, [&](const auto& e) {
    return std::string(e.what()).find("unknown kernel set '" + foreign + "'") != std::string::npos;
  });
  k::use_kernel_set("scalar");
  BOOST_TEST(k::kernel_set() == "scalar");
  k::use_kernel_set(sets.front());
  BOOST_CHECK_THROW(k::set_threads(0), glassbox::ConfigError);
}

#if !defined(__EMSCRIPTEN__)  // the thread pool itself: no threads in the WebAssembly build
// A task beside the caller (the trace's raw distribution beside the sampler) runs exactly once, on a
// worker or, when none takes it in time, on the caller; a job the caller runs meanwhile still covers
// every chunk once; wait_until returns only after the task's first part. Pools of 1, 2 and 3 threads,
// with tasks short and long enough for both outcomes.
BOOST_DATA_TEST_CASE(a_task_beside_the_caller_runs_exactly_once, bdata::make({1, 2, 3}), th) {
  k::ThreadPool pool(th);
  struct Task {
    std::atomic<int> runs{0};
    std::atomic<bool> first{false};
    std::thread::id ran_on;
    int spin = 0;
    volatile double sink = 0;
    static void run(void* p) noexcept {
      auto& t = *static_cast<Task*>(p);
      t.ran_on = std::this_thread::get_id();
      t.runs.fetch_add(1);
      for (int i = 0; i < t.spin; ++i) t.sink = t.sink + 1.0;
      t.first.store(true, std::memory_order_release);
      for (int i = 0; i < t.spin; ++i) t.sink = t.sink + 1.0;
    }
  };
  struct Job {
    std::vector<std::atomic<int>> hits = std::vector<std::atomic<int>>(64);
    static void chunk(const void* p, std::size_t c, int) { const_cast<Job*>(static_cast<const Job*>(p))->hits[c].fetch_add(1); }
  };
  int on_worker = 0;
  for (int i = 0; i < 600; ++i) {
    Task t;
    t.spin = (i % 3) * 2000;
    if (!pool.start_task(&Task::run, &t)) {
      Task::run(&t);  // no worker, or every worker asleep: the caller's to run
    } else {
      BOOST_TEST_REQUIRE(th > 1);
      if (i % 2) {  // a job while the task may be running: every chunk once, whoever runs it
        Job job;
        pool.run(job.hits.size(), &Job::chunk, &job);
        for (const auto& h : job.hits) BOOST_TEST_REQUIRE(h.load() == 1);
      }
      if (i % 5 == 0) {
        // A second task while one is out is refused (the caller then runs it itself).
        Task other;
        BOOST_TEST_REQUIRE(!pool.start_task(&Task::run, &other));
      }
      if (pool.reclaim_task()) Task::run(&t);  // not taken yet: the caller's again
      else pool.finish_task();
    }
    BOOST_TEST_REQUIRE(t.runs.load() == 1);
    BOOST_TEST_REQUIRE(t.first.load());
    on_worker += t.ran_on != std::this_thread::get_id();
  }
  if (th == 1) BOOST_TEST(on_worker == 0);
  BOOST_TEST_MESSAGE(th << " threads: " << on_worker << " of 600 tasks ran on a worker");
  if (th > 1) {
    // Workers asleep (no job or task for a while) are not woken for a task: that would be a system
    // call on the caller's thread. They fall asleep after ~0.4 ms of spinning.
    bool refused = false;
    for (int tries = 0; tries < 40 && !refused; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Task t;
      refused = !pool.start_task(&Task::run, &t);
      if (!refused) pool.finish_task();
    }
    BOOST_TEST(refused);
  }

  // Beside on the shared pool: wait_until sees the first part done, wait() the whole task.
  const int threads = k::threads();
  k::set_threads(th);
  for (int i = 0; i < 200; ++i) {
    Task t;
    t.spin = (i % 4) * 3000;
    k::Beside b(&Task::run, &t);
    b.wait_until(t.first);
    BOOST_TEST_REQUIRE(t.first.load());
    b.wait();
    BOOST_TEST_REQUIRE(t.runs.load() == 1);
  }
  k::set_threads(threads);
}

// spare_core (when a trace's writer may take a core): with fewer compute threads than cores, yes; with
// as many, only while every worker of the pool sleeps: not while one runs a task.
BOOST_AUTO_TEST_CASE(a_core_is_spare_only_while_no_worker_computes) {
  const int threads = k::threads();
  if (k::cores() >= 2) {
    k::set_threads(1);
    BOOST_TEST(k::spare_core());
  }
  k::set_threads(std::max(2, k::cores()));
  bool slept = false;  // workers fall asleep after ~0.4 ms without a job
  for (int tries = 0; tries < 40 && !slept; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    slept = k::spare_core() || k::threads() < k::cores();
  }
  BOOST_TEST(slept);
  if (k::threads() == k::cores()) {
    struct Hold {
      std::atomic<bool> started{false}, release{false};
      static void run(void* p) noexcept {
        auto& h = *static_cast<Hold*>(p);
        h.started.store(true);
        while (!h.release.load()) std::this_thread::yield();
      }
    } hold;
    // Wake the workers with a job, then hand one a task that holds it until released.
    struct Nop {
      static void chunk(const void*, std::size_t, int) {}
    };
    bool posted = false;
    for (int tries = 0; tries < 5000 && !posted; ++tries) {  // (a busy machine may not run the worker at once)
      k::pool().run(64, &Nop::chunk, nullptr);
      posted = k::pool().start_task(&Hold::run, &hold);
      if (!posted) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    BOOST_TEST_REQUIRE(posted);
    for (int i = 0; i < 2000 && !hold.started.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (hold.started.load()) BOOST_TEST(!k::spare_core());  // a worker computes
    hold.release.store(true);
    if (k::pool().reclaim_task()) Hold::run(&hold);
    else k::pool().finish_task();
  }
  k::set_threads(threads);
}
#endif

// The typed product (dispatch on the weight type: input rounded to the weight's partner type, then
// block dot products) against its scalar twin, for every type glassbox reads, prefill-sized blocks
// included. k-quant weights come from a reference file (written by llama-quantize, not by glassbox).
namespace {
struct TypedCase {
  glassbox::DType type;
  std::size_t k;  // row length
};
std::ostream& operator<<(std::ostream& o, const TypedCase& c) { return o << glassbox::dtype_name(c.type) << "×" << c.k; }

void check_typed(const glassbox::Tensor& w, std::size_t rows) {
  const std::size_t k = w.cols(), d = w.rows();
  auto x = randv(rows * k, 7);
  std::vector<std::byte> xq(rows * std::max<std::size_t>(1, k::xq_row_bytes(w)));
  std::vector<float> a(rows * d), b(rows * d);
  k::matmul(a.data(), x.data(), w, rows, xq.data());
  k::matmul_scalar(b.data(), x.data(), w, rows, xq.data());
  float scale = 0;
  for (float v : b) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < a.size(); ++i) BOOST_TEST(std::abs(a[i] - b[i]) <= 1e-5f * std::max(1.0f, scale));
  // And the typed F32-equivalent: the same values through dequantized rows agree to the rounding of x.
  std::vector<float> row(k);
  for (std::size_t i = 0; i < d; ++i) {
    k::embedding_row(row.data(), w, static_cast<std::int64_t>(i));
    double ref = 0, mag = 0;
    for (std::size_t j = 0; j < k; ++j) { ref += double(row[j]) * x[j]; mag += std::abs(double(row[j]) * x[j]); }
    BOOST_TEST(std::abs(a[i] - ref) <= 0.02 * mag + 1e-6, "row " << i << ": " << a[i] << " vs " << ref);
  }
}
}  // namespace

BOOST_DATA_TEST_CASE(typed_matmul_matches_scalar,
                     bdata::make({TypedCase{glassbox::DType::F32, 96}, TypedCase{glassbox::DType::F16, 96},
                                  TypedCase{glassbox::DType::BF16, 96}, TypedCase{glassbox::DType::Q8_0, 96},
                                  TypedCase{glassbox::DType::Q4_0, 96}, TypedCase{glassbox::DType::Q8_0, 4096},
                                  TypedCase{glassbox::DType::Q4_0, 4096}, TypedCase{glassbox::DType::Q5_0, 96},
                                  TypedCase{glassbox::DType::Q5_0, 4096}}) *
                         bdata::make({1, 3, 17}),
                     c, rows) {
  const std::size_t d = 29;
  auto wf = randv(d * c.k, 5);
  std::vector<std::byte> bytes;
  const glassbox::Tensor w = weight_matrix(c.type, wf, d, c.k, bytes);
  check_typed(w, rows);
}

// The reference files' k-quant, fallback and low-bit tensors (synth128's Q4_K_M/Q5_K_M are Q5_0/Q5_1
// with Q8_0, its Q4_1 file Q4_1; synth256's Q2_K file holds Q2_K and Q3_K, Q3_K_M Q3_K/Q4_K/Q5_K).
const auto kQuantFiles = bdata::make({"synth256-q6_k", "synth256-q5_k_m", "synth256-q4_k_m", "synth256-q2_k", "synth256-q3_k_m",
                                      "synth256-iq4_nl", "synth128-q4_1", "synth128-q4_k_m", "synth128-q5_k_m"});

BOOST_DATA_TEST_CASE(kquant_matmul_matches_scalar, kQuantFiles * bdata::make({1, 5}), file, rows) {
  if (!gbtest::shared_dir()) return;
  auto src = glassbox::ModelSource::open(gbtest::shared(std::string("gguf/") + file + ".gguf"));
  const auto& l = src->weights().layers[0];
  for (const glassbox::Tensor* t : {&l.wq, &l.wv, &l.w2}) check_typed(*t, rows);
}

// Those types' products are each row's vec_dot bit for bit, on every kernel set, for 1, 2 and 3
// threads, decode (1 row) and prefill (5 rows) alike.
BOOST_DATA_TEST_CASE(reference_types_matmul_is_vec_dot_per_row_on_any_thread_count, kQuantFiles, file) {
  if (!gbtest::shared_dir()) return;
  const SplitEveryProduct split;
  auto src = glassbox::ModelSource::open(gbtest::shared(std::string("gguf/") + file + ".gguf"));
  const auto& l = src->weights().layers[0];
  const int threads = k::threads();
  for (const glassbox::Tensor* w : {&l.wq, &l.wv, &l.w2, &l.w3}) {
    const std::size_t kdim = w->cols(), d = w->rows(), n = 5, xrb = k::xq_row_bytes(*w);
    const auto xt = glassbox::quant::vec_dot_type(w->dtype);
    const auto x = randv(n * kdim, 23);
    for_each_kernel_set([&] {
      std::vector<std::byte> xq(n * xrb);
      std::vector<float> ref(n * d), out(n * d), one(d);
      for (std::size_t t = 0; t < n; ++t) {
        glassbox::quant::quantize_activation(xt, x.data() + t * kdim, xq.data() + t * xrb, kdim);
        for (std::size_t i = 0; i < d; ++i)
          ref[t * d + i] = glassbox::quant::vec_dot(w->dtype, kdim, w->row(static_cast<std::int64_t>(i)), xq.data() + t * xrb);
      }
      for (int th : thread_counts({1, 2, 3})) {
        k::set_threads(th);
        k::matmul(out.data(), x.data(), *w, n, xq.data());
        BOOST_TEST((out == ref), file << " " << w->name << " (" << glassbox::dtype_name(w->dtype) << "), " << th << " threads");
        for (std::size_t t = 0; t < n; ++t) {
          k::matmul(one.data(), x.data() + t * kdim, *w, 1, xq.data());
          BOOST_TEST_REQUIRE(std::equal(one.begin(), one.end(), ref.begin() + t * d));
        }
      }
    });
  }
  k::set_threads(threads);
}

// The quantized product streams several weight rows per pass and splits rows across threads; each
// output must still be the kernel set's own vec_dot of that row, bit for bit, whatever the number
// of activation rows (decode 1, prefill blocks) or threads. d = 29 leaves rows outside every group;
// d = 64 gives passes that prefetch the next pass and passes 4 on; rows of 8..11 blocks leave 0..3
// blocks after the 512-bit Q8_0 kernel's 4-block steps. 5 and 9 activation rows: Q4_0/Q5_0 prefill
// takes 4 or 8 of them per weight row (by kernel set), then the rest one at a time.
BOOST_DATA_TEST_CASE(quantized_matmul_is_vec_dot_per_row,
                     bdata::make({"Q8_0", "Q4_0", "Q5_0", "IQ4_NL", "Q4_1", "Q5_1"}) * bdata::make({std::size_t{29}, std::size_t{64}}) *
                         bdata::make({std::size_t{256}, std::size_t{288}, std::size_t{320}, std::size_t{352}}),
                     type_name, d, kdim) {
  const SplitEveryProduct split;
  const std::string tn(type_name);
  const auto type = tn == "Q8_0"   ? glassbox::DType::Q8_0
                    : tn == "Q4_0" ? glassbox::DType::Q4_0
                    : tn == "Q5_0" ? glassbox::DType::Q5_0
                    : tn == "Q4_1" ? glassbox::DType::Q4_1
                    : tn == "Q5_1" ? glassbox::DType::Q5_1
                                   : glassbox::DType::IQ4_NL;
  const std::size_t n = 9;
  auto wf = randv(d * kdim, 21), x = randv(n * kdim, 22);
  std::vector<std::byte> bytes;
  const glassbox::Tensor w = weight_matrix(type, wf, d, kdim, bytes);
  const std::size_t xrb = k::xq_row_bytes(w);
  const int threads = k::threads();
  for_each_kernel_set([&] {
    std::vector<std::byte> xq(n * xrb);
    std::vector<float> ref(n * d), out(n * d), one(d);
    for (std::size_t t = 0; t < n; ++t) {
      glassbox::quant::quantize_activation(glassbox::quant::vec_dot_type(type), x.data() + t * kdim, xq.data() + t * xrb, kdim);
      for (std::size_t i = 0; i < d; ++i) ref[t * d + i] = glassbox::quant::vec_dot(type, kdim, bytes.data() + i * glassbox::row_bytes(type, kdim), xq.data() + t * xrb);
    }
    for (int th : thread_counts({1, 2, 3})) {
      k::set_threads(th);
      for (std::size_t rows : {std::size_t{2}, std::size_t{3}, std::size_t{5}, std::size_t{8}, n}) {
        k::matmul(out.data(), x.data(), w, rows, xq.data());
        BOOST_TEST(std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(rows * d), ref.begin()), rows << " rows, " << th << " threads");
      }
      for (std::size_t t = 0; t < n; ++t) {
        k::matmul(one.data(), x.data() + t * kdim, w, 1, xq.data());
        BOOST_TEST_REQUIRE(std::equal(one.begin(), one.end(), ref.begin() + t * d));
      }
    }
  });
  k::set_threads(threads);
}

// K-quants (#32): the 256-bit dots sum each block's integers exactly and combine the floats in the
// scalar twin's order, so every kernel set's vec_dot is vec_dot_scalar bit for bit; and prefill's
// tiles (several activation rows per weight row, then single ones) give each row's vec_dot, for
// 1, 4, 5 and 9 activation rows and 1..3 threads. Outliers push quant bytes to their extremes.
BOOST_DATA_TEST_CASE(kquant_matmul_is_scalar_vec_dot_per_row,
                     bdata::make({"Q4_K", "Q5_K", "Q6_K"}) * bdata::make({std::size_t{256}, std::size_t{768}}), type_name,
                     kdim) {
  using glassbox::DType;
  const SplitEveryProduct split;
  const std::string tn(type_name);
  const DType type = tn == "Q4_K" ? DType::Q4_K : tn == "Q5_K" ? DType::Q5_K : DType::Q6_K;
  const std::size_t d = 29, n = 9;
  auto wf = randv(d * kdim, 41), x = randv(n * kdim, 42);
  for (std::size_t j = 0; j < wf.size(); j += 97) wf[j] *= 40.0f;
  for (std::size_t j = 0; j < x.size(); j += 89) x[j] *= -60.0f;
  std::vector<std::byte> bytes;
  const glassbox::Tensor w = weight_matrix(type, wf, d, kdim, bytes);
  const std::size_t xrb = k::xq_row_bytes(w), wrb = glassbox::row_bytes(type, kdim);
  std::vector<std::byte> xq(n * xrb);
  std::vector<float> ref(n * d);
  for (std::size_t t = 0; t < n; ++t) {
    glassbox::quant::quantize_activation(DType::Q8_K, x.data() + t * kdim, xq.data() + t * xrb, kdim);
    for (std::size_t i = 0; i < d; ++i)
      ref[t * d + i] = glassbox::quant::vec_dot_scalar(type, kdim, bytes.data() + i * wrb, xq.data() + t * xrb);
  }
  const int threads = k::threads();
  for_each_kernel_set([&] {
    std::size_t bad = 0;
    for (std::size_t t = 0; t < n; ++t)
      for (std::size_t i = 0; i < d; ++i)
        bad += std::bit_cast<std::uint32_t>(glassbox::quant::vec_dot(type, kdim, bytes.data() + i * wrb, xq.data() + t * xrb)) !=
               std::bit_cast<std::uint32_t>(ref[t * d + i]);
    BOOST_TEST(bad == 0u, "vec_dot differs from vec_dot_scalar in " << bad << " outputs");
    for (int th : thread_counts({1, 2, 3})) {
      k::set_threads(th);
      for (std::size_t rows : {1, 4, 5, 9}) {
        std::vector<float> out(rows * d);
        k::matmul(out.data(), x.data(), w, rows, xq.data());
        BOOST_TEST(std::equal(out.begin(), out.end(), ref.begin()), rows << " rows, " << th << " threads");
      }
    }
  });
  k::set_threads(threads);
}

// Products of one input fused into one call (q, k, v; gate and up) are the separate products bit
// for bit, for every kernel set, 1, 2 and 3 threads, decode and prefill blocks: each output row is
// the same kernel call's whichever matrix's chunk precedes it. The matrices' heights (64, 29, 100)
// put chunk boundaries inside groups of rows; a mixed list (F32 with Q8_0) runs one by one. Each
// row of a block's product is also the one-row (decode) product of that row.
BOOST_DATA_TEST_CASE(fused_products_are_the_separate_products,
                     bdata::make({"F32", "Q8_0", "Q4_0", "Q8_0+Q4_0", "F32+Q8_0"}) * bdata::make({std::size_t{1}, std::size_t{5}, std::size_t{47}}),
                     types, n) {
  const SplitEveryProduct split;
  const std::size_t kdim = 288, heights[] = {64, 29, 100};
  const std::string spec(types);
  auto type_of = [&](std::size_t s) {
    if (spec == "F32") return glassbox::DType::F32;
    if (spec == "Q8_0") return glassbox::DType::Q8_0;
    if (spec == "Q4_0") return glassbox::DType::Q4_0;
    if (spec == "Q8_0+Q4_0") return s == 1 ? glassbox::DType::Q4_0 : glassbox::DType::Q8_0;
    return s == 1 ? glassbox::DType::Q8_0 : glassbox::DType::F32;
  };
  std::vector<std::vector<std::byte>> bytes(3);
  std::vector<std::vector<float>> wf(3);
  glassbox::Tensor w[3];
  std::size_t xrb = 0;
  for (std::size_t s = 0; s < 3; ++s) {
    const auto type = type_of(s);
    wf[s] = randv(heights[s] * kdim, 31 + unsigned(s));
    w[s] = weight_matrix(type, wf[s], heights[s], kdim, bytes[s]);
    xrb = std::max(xrb, k::xq_row_bytes(w[s]));
  }
  auto x = randv(n * kdim, 33);
  std::vector<std::byte> xq(n * std::max<std::size_t>(1, xrb));
  const int threads = k::threads();
  for_each_kernel_set([&] {
    std::vector<float> ref[3], out[3];
    k::set_threads(1);
    for (std::size_t s = 0; s < 3; ++s) {
      ref[s].resize(n * heights[s]);
      out[s].resize(n * heights[s]);
      k::matmul(ref[s].data(), x.data(), w[s], n, xq.data());
      // and each row of the block is decode's product of that row alone
      std::vector<float> one(heights[s]);
      for (std::size_t t = 0; t < n; ++t) {
        k::matmul(one.data(), x.data() + t * kdim, w[s], 1, xq.data());
        BOOST_TEST_REQUIRE(std::equal(one.begin(), one.end(), ref[s].begin() + t * heights[s]), "row " << t << " of matrix " << s);
      }
    }
    for (int th : thread_counts({1, 2, 3})) {
      k::set_threads(th);
      for (std::size_t count : {2, 3}) {
        for (auto& o : out) std::fill(o.begin(), o.end(), -1.0f);
        const k::Product ps[] = {{out[0].data(), &w[0]}, {out[1].data(), &w[1]}, {out[2].data(), &w[2]}};
        k::matmuls({ps, count}, x.data(), n, xq.data());
        BOOST_TEST_CONTEXT(th << " threads, " << count << " products") {
          for (std::size_t s = 0; s < count; ++s) BOOST_TEST((out[s] == ref[s]));
        }
      }
    }
  });
  k::set_threads(threads);
}

// Decode's shrinking chunks are listed on the caller's stack; with many threads and tall matrices
// they outnumber the list and fixed chunks are used instead: the same bits either way.
BOOST_DATA_TEST_CASE(decode_chunks_past_the_list_are_the_same, bdata::make({"F32", "Q8_0"}), type_name) {
  const SplitEveryProduct split;
  const auto type = std::string(type_name) == "F32" ? glassbox::DType::F32 : glassbox::DType::Q8_0;
  const std::size_t kdim = 64, d = 8192;
  auto wf = randv(d * kdim, 41), x = randv(kdim, 42);
  std::vector<std::byte> bytes;
  const glassbox::Tensor w = weight_matrix(type, wf, d, kdim, bytes);
  std::vector<std::byte> xq(std::max<std::size_t>(1, k::xq_row_bytes(w)));
  const int threads = k::threads();
  std::vector<float> ref(d), out(d);
  k::set_threads(1);
  k::matmul(ref.data(), x.data(), w, 1, xq.data());
  for (int th : thread_counts({2, 7, 96})) {  // 96: more than 256 chunks
    k::set_threads(th);
    std::fill(out.begin(), out.end(), -1.0f);
    k::matmul(out.data(), x.data(), w, 1, xq.data());
    BOOST_TEST((out == ref), th << " threads");
  }
  k::set_threads(threads);
}

// The kernel sets' Q8_0 activation rounding writes the same bytes as quant::quantize_activation:
// blocks of ordinary values, an all-zero block, exact .5 ties after scaling, and ±amax.
BOOST_AUTO_TEST_CASE(simd_q8_0_activation_matches_reference) {
  const std::size_t n = 32 * 40;
  auto x = randv(n, 31);
  for (std::size_t j = 32; j < 64; ++j) x[j] = 0.0f;                                  // block 1: zeros
  for (std::size_t j = 64; j < 96; ++j) x[j] = (static_cast<float>(j) - 80.0f) / 2;  // block 2: halves, amax 8
  x[96] = 127.0f;                                                                      // block 3: 127·k/127 ties
  for (std::size_t j = 97; j < 128; ++j) x[j] = static_cast<float>(j) - 112.5f;
  x[130] = -x[131];
  std::vector<std::byte> ref(glassbox::row_bytes(glassbox::DType::Q8_0, n)), got(ref.size());
  glassbox::quant::quantize_activation(glassbox::DType::Q8_0, x.data(), ref.data(), n);
  // Through the typed product: a 1-row Q8_0 weight matrix makes matmul round x into xq.
  std::vector<std::byte> wbytes(glassbox::row_bytes(glassbox::DType::Q8_0, n));
  glassbox::quant::quantize_row(glassbox::DType::Q8_0, x.data(), wbytes.data(), n);
  glassbox::Tensor w;
  w.dtype = glassbox::DType::Q8_0;
  w.n_dims = 2;
  w.shape = {1, static_cast<std::int64_t>(n), 0, 0};
  w.data = wbytes.data();
  w.bytes = wbytes.size();
  for_each_kernel_set([&] {
    float out = 0;
    std::fill(got.begin(), got.end(), std::byte{0x55});
    k::matmul(&out, x.data(), w, 1, got.data());
    BOOST_TEST((got == ref));
  });
}

// The NEON sets, WebAssembly's simd128 (and the scalar set) keep the scalar twin's bits for the 32-value quantized types:
// each block's integer sum is exact and the floats follow quant.cpp's order. Random blocks from the
// quantizers and raw blocks of extreme bytes (−128, 127, every nibble 0 or 15, every fifth bit set),
// for vec_dot and for the products of 1, 2, 3 and 5 activation rows (neon-i8mm's 2×2 SMMLA tiles and
// their leftovers), 1 and 2 threads. The x86 sets sum Q8_0/Q4_0/Q5_0 in lanes (another order, tested
// above to a tolerance) and are left out.
BOOST_DATA_TEST_CASE(neon_quantized_dots_are_the_scalar_twin_bit_for_bit,
                     bdata::make({"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"}) * bdata::make({0, 1, 2}), type_name, pattern) {
  using glassbox::DType;
  const std::string tn(type_name);
  const DType type = tn == "Q8_0" ? DType::Q8_0 : tn == "Q4_0" ? DType::Q4_0 : tn == "Q4_1" ? DType::Q4_1
                   : tn == "Q5_0" ? DType::Q5_0 : tn == "Q5_1" ? DType::Q5_1 : DType::IQ4_NL;
  const SplitEveryProduct split;
  const std::size_t d = 7, n = 5, kdim = 320;
  const DType xt = glassbox::quant::vec_dot_type(type);
  const std::size_t wrb = glassbox::row_bytes(type, kdim), xrb = glassbox::row_bytes(xt, kdim);
  auto wf = randv(d * kdim, 51 + pattern), x = randv(n * kdim, 61 + pattern);
  std::vector<std::byte> bytes;
  glassbox::Tensor w = weight_matrix(type, wf, d, kdim, bytes);
  std::vector<std::byte> xq(n * xrb);
  for (std::size_t t = 0; t < n; ++t) glassbox::quant::quantize_activation(xt, x.data() + t * kdim, xq.data() + t * xrb, kdim);
  std::vector<std::byte> xe = xq;  // extreme activation bytes for vec_dot (matmul quantizes x itself)
  if (pattern > 0) {
    // Extreme raw bytes after each block's fp16 scale(s) (d and, for Q4_1/Q5_1, m: 1.0 and −0.5).
    const std::size_t bb = glassbox::dtype_info(type).block_bytes, xbb = glassbox::dtype_info(xt).block_bytes;
    const std::size_t skip = (type == DType::Q4_1 || type == DType::Q5_1) ? 4 : 2;
    std::mt19937 g(7u + static_cast<unsigned>(pattern));
    for (std::size_t b = 0; b < bytes.size() / bb; ++b)
      for (std::size_t j = skip; j < bb; ++j)
        bytes[b * bb + j] = std::byte(pattern == 1 ? (g() % 2 ? 0xFF : 0x80) : (g() % 2 ? 0x00 : 0xFF));
    for (std::size_t b = 0; b < xe.size() / xbb; ++b)
      for (std::size_t j = xbb - 32; j < xbb; ++j) xe[b * xbb + j] = std::byte(g() % 3 == 0 ? 0x7F : 0x80);
  }
  std::vector<float> ref(n * d), ref_e(n * d);
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t i = 0; i < d; ++i) {
      ref[t * d + i] = glassbox::quant::vec_dot_scalar(type, kdim, bytes.data() + i * wrb, xq.data() + t * xrb);
      ref_e[t * d + i] = glassbox::quant::vec_dot_scalar(type, kdim, bytes.data() + i * wrb, xe.data() + t * xrb);
    }
  const std::string initial(k::kernel_set());
  const int threads = k::threads();
  std::size_t sets_checked = 0;
  for (const auto& set : k::kernel_sets()) {
    if (set.rfind("neon", 0) != 0 && set != "scalar" && set != "simd128") continue;
    ++sets_checked;
    k::use_kernel_set(set);
    BOOST_TEST_CONTEXT("kernel set " << set) {
      std::size_t bad = 0;
      for (std::size_t t = 0; t < n; ++t)
        for (std::size_t i = 0; i < d; ++i)
          bad += std::bit_cast<std::uint32_t>(glassbox::quant::vec_dot(type, kdim, bytes.data() + i * wrb, xe.data() + t * xrb)) !=
                 std::bit_cast<std::uint32_t>(ref_e[t * d + i]);
      BOOST_TEST(bad == 0u, "vec_dot differs from vec_dot_scalar in " << bad << " outputs");
      for (int th : thread_counts({1, 2})) {
        k::set_threads(th);
        for (std::size_t rows : {1, 2, 3, 5}) {
          std::vector<float> out(rows * d);
          k::matmul(out.data(), x.data(), w, rows, xq.data());
          std::size_t differ = 0;
          for (std::size_t j = 0; j < out.size(); ++j) differ += std::bit_cast<std::uint32_t>(out[j]) != std::bit_cast<std::uint32_t>(ref[j]);
          BOOST_TEST(differ == 0u, rows << " rows, " << th << " threads: " << differ << " outputs differ");
        }
      }
    }
  }
  k::set_threads(threads);
  k::use_kernel_set(initial);
  BOOST_TEST(sets_checked >= 1u);
}

namespace {
// The scalar set, the NEON sets and WebAssembly's simd128: those that promise the bits checked below.
bool keeps_twin_bits(const std::string& set) { return set == "scalar" || set == "simd128" || set.rfind("neon", 0) == 0; }
std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t n = 0;
  for (std::size_t j = 0; j < a.size(); ++j) n += std::bit_cast<std::uint32_t>(a[j]) != std::bit_cast<std::uint32_t>(b[j]);
  return n;
}
}  // namespace

// F16 and BF16 dots: the NEON sets widen the halves in registers and run the F32 dot's lanes and order,
// so their vec_dot is the kernel set's own F32 dot of the widened rows bit for bit (the scalar set's
// too: dot_scalar; simd128's products run four weight rows' chains as lanes, each that dot); every set,
// x86 ones included, is the scalar twin to a tolerance (another summation order) and its matrix
// product each row's vec_dot bit for bit. Rows hold random values and extremes:
// subnormal halves, the largest finite ones, zeros of both signs; lengths hit every tail.
BOOST_DATA_TEST_CASE(half_dots_are_the_f32_dot_of_the_widened_rows, bdata::make({"F16", "BF16"}) * kSizes, type_name, n_) {
  using glassbox::DType;
  namespace q = glassbox::quant;
  const DType type = std::string(type_name) == "F16" ? DType::F16 : DType::BF16;
  // 21 rows: simd128's products take 16 weight rows at once, then 4, then one (its F16/BF16 lanes).
  const std::size_t n = static_cast<std::size_t>(n_), rows = 21;
  std::mt19937 g(static_cast<unsigned>(n) * 7u + (type == DType::F16 ? 1u : 2u));
  const auto wf = randv(rows * n, 71 + static_cast<unsigned>(n)), xf = randv(2 * n, 72 + static_cast<unsigned>(n));
  auto to_half = [&](float f) { return type == DType::F16 ? q::fp32_to_fp16(f) : q::fp32_to_bf16(f); };
  auto widen = [&](std::uint16_t h) { return type == DType::F16 ? q::fp16_to_fp32(h) : q::bf16_to_fp32(h); };
  const std::uint16_t extremes[] = {0x0001, 0x03FF, 0x8001, 0x7BFF, 0xFBFF, 0x0000, 0x8000, 0x0400};  // F16's; BF16's below
  const std::uint16_t extremes_bf[] = {0x0001, 0x007F, 0x8001, 0x4F7F, 0xCF7F, 0x0000, 0x8000, 0x0080};
  std::vector<std::uint16_t> w(rows * n), x(2 * n);
  for (std::size_t j = 0; j < w.size(); ++j) w[j] = g() % 5 == 0 ? (type == DType::F16 ? extremes : extremes_bf)[g() % 8] : to_half(wf[j] * 8.0f);
  for (std::size_t j = 0; j < x.size(); ++j) x[j] = g() % 7 == 0 ? (type == DType::F16 ? extremes : extremes_bf)[g() % 8] : to_half(xf[j]);
  std::vector<float> ww(w.size()), xw(x.size());
  for (std::size_t j = 0; j < w.size(); ++j) ww[j] = widen(w[j]);
  for (std::size_t j = 0; j < x.size(); ++j) xw[j] = widen(x[j]);
  glassbox::Tensor t;
  t.dtype = type;
  t.n_dims = 2;
  t.shape = {static_cast<std::int64_t>(rows), static_cast<std::int64_t>(n), 0, 0};
  t.data = reinterpret_cast<std::byte*>(w.data());
  t.bytes = w.size() * 2;
  for_each_kernel_set([&] {
    const std::string set(k::kernel_set());
    std::vector<float> got(2 * rows), want_f32(2 * rows), out(2 * rows);
    for (std::size_t a = 0; a < 2; ++a)
      for (std::size_t r = 0; r < rows; ++r) {
        const float v = q::vec_dot(type, n, w.data() + r * n, x.data() + a * n);
        const float s = q::vec_dot_scalar(type, n, w.data() + r * n, x.data() + a * n);
        double mag = 0;
        for (std::size_t j = 0; j < n; ++j) mag += std::abs(double(ww[r * n + j]) * xw[a * n + j]);
        BOOST_TEST(std::abs(double(v) - s) <= 1e-5 * mag + 1e-30, "row " << r << ": vec_dot " << v << " vs scalar " << s);
        got[a * rows + r] = v;
        want_f32[a * rows + r] = k::dot(ww.data() + r * n, xw.data() + a * n, n);
      }
    if (keeps_twin_bits(set)) BOOST_TEST(differing(got, want_f32) == 0u, "vec_dot is not the F32 dot of the widened rows");
    // The matrix product (x rounded to the type by matmul itself: the same halves, since x's are exact).
    std::vector<std::byte> xq(2 * n * 2);
    k::matmul(out.data(), xw.data(), t, 2, xq.data());
    std::vector<float> by_row(2 * rows);
    for (std::size_t a = 0; a < 2; ++a)
      for (std::size_t r = 0; r < rows; ++r) by_row[a * rows + r] = got[a * rows + r];
    BOOST_TEST(differing(out, by_row) == 0u, "matmul is not vec_dot per row");
  });
}

// The k-quants (Q2_K..Q6_K) on the NEON sets, simd128 and the scalar set: each sub-block's integer dot exact in
// vectors, the floats in the scalar twin's order, so vec_dot_scalar's bits. Blocks from the quantizers
// (with outliers) and raw blocks of extreme bytes (every quant, scale and hmask bit at 0 or all ones,
// then uniformly random bytes; finite fp16 d and dmin) against activations of −128/127 or random bytes
// (their bsums the sums of their qs, as quantize_activation writes them); vec_dot, and the products of
// 1, 2, 3 and 5 activation rows on 1 and 2 threads.
BOOST_DATA_TEST_CASE(neon_kquant_dots_are_the_scalar_twin_bit_for_bit,
                     bdata::make({"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}) * bdata::make({0, 1, 2}), type_name, pattern) {
  using glassbox::DType;
  namespace q = glassbox::quant;
  const std::string tn(type_name);
  const DType type = tn == "Q2_K" ? DType::Q2_K : tn == "Q3_K" ? DType::Q3_K : tn == "Q4_K" ? DType::Q4_K
                   : tn == "Q5_K" ? DType::Q5_K : DType::Q6_K;
  // Where each block keeps its fp16 d (and dmin, or -1).
  const std::size_t d_at = type == DType::Q2_K ? offsetof(q::block_q2_K, d) : type == DType::Q3_K ? offsetof(q::block_q3_K, d)
                         : type == DType::Q6_K ? offsetof(q::block_q6_K, d) : 0;
  const long dmin_at = type == DType::Q2_K ? long(offsetof(q::block_q2_K, dmin)) : (type == DType::Q4_K || type == DType::Q5_K) ? 2L : -1L;
  const SplitEveryProduct split;
  const std::size_t d = 7, n = 5, kdim = 512;
  const std::size_t wrb = glassbox::row_bytes(type, kdim), xrb = glassbox::row_bytes(DType::Q8_K, kdim);
  auto wf = randv(d * kdim, 81 + pattern), x = randv(n * kdim, 91 + pattern);
  for (std::size_t j = 0; j < wf.size(); j += 97) wf[j] *= 40.0f;
  for (std::size_t j = 0; j < x.size(); j += 89) x[j] *= -60.0f;
  std::vector<std::byte> bytes;
  glassbox::Tensor w = weight_matrix(type, wf, d, kdim, bytes);
  std::vector<std::byte> xq(n * xrb);
  for (std::size_t t = 0; t < n; ++t) q::quantize_activation(DType::Q8_K, x.data() + t * kdim, xq.data() + t * xrb, kdim);
  std::vector<std::byte> xe = xq;  // extreme activations for vec_dot (matmul quantizes x itself)
  if (pattern > 0) {
    const std::size_t bb = glassbox::dtype_info(type).block_bytes;
    std::mt19937 g(17u + static_cast<unsigned>(pattern));
    for (std::size_t b = 0; b < bytes.size() / bb; ++b) {
      std::byte* blk = bytes.data() + b * bb;
      for (std::size_t j = 0; j < bb; ++j) blk[j] = std::byte(pattern == 1 ? (g() % 2 ? 0xFF : 0x00) : g() % 256);
      const std::uint16_t dd = q::fp32_to_fp16(pattern == 1 ? 1.0f : 0.0137f), dm = q::fp32_to_fp16(pattern == 1 ? -0.5f : 0.0021f);
      std::memcpy(blk + d_at, &dd, 2);
      if (dmin_at >= 0) std::memcpy(blk + dmin_at, &dm, 2);
    }
    auto* y = reinterpret_cast<q::block_q8_K*>(xe.data());
    for (std::size_t b = 0; b < xe.size() / sizeof(q::block_q8_K); ++b) {
      y[b].d = pattern == 1 ? 1.0f : 0.031f;
      for (auto& v : y[b].qs) v = static_cast<std::int8_t>(pattern == 1 ? (g() % 3 == 0 ? 127 : -128) : static_cast<int>(g() % 256) - 128);
      for (int s = 0; s < 16; ++s) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += y[b].qs[16 * s + j];
        y[b].bsums[s] = static_cast<std::int16_t>(sum);
      }
    }
  }
  std::vector<float> ref(n * d), ref_e(n * d);
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t i = 0; i < d; ++i) {
      ref[t * d + i] = q::vec_dot_scalar(type, kdim, bytes.data() + i * wrb, xq.data() + t * xrb);
      ref_e[t * d + i] = q::vec_dot_scalar(type, kdim, bytes.data() + i * wrb, xe.data() + t * xrb);
      BOOST_TEST_REQUIRE(std::isfinite(ref_e[t * d + i]));
    }
  const std::string initial(k::kernel_set());
  const int threads = k::threads();
  std::size_t sets_checked = 0;
  for (const auto& set : k::kernel_sets()) {
    if (!keeps_twin_bits(set)) continue;
    ++sets_checked;
    k::use_kernel_set(set);
    BOOST_TEST_CONTEXT("kernel set " << set) {
      std::vector<float> got(n * d);
      for (std::size_t t = 0; t < n; ++t)
        for (std::size_t i = 0; i < d; ++i) got[t * d + i] = q::vec_dot(type, kdim, bytes.data() + i * wrb, xe.data() + t * xrb);
      BOOST_TEST(differing(got, ref_e) == 0u, "vec_dot differs from vec_dot_scalar in " << differing(got, ref_e) << " outputs");
      for (int th : thread_counts({1, 2})) {
        k::set_threads(th);
        for (std::size_t rows : {1, 2, 3, 5}) {
          std::vector<float> out(rows * d), want(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(rows * d));
          k::matmul(out.data(), x.data(), w, rows, xq.data());
          BOOST_TEST(differing(out, want) == 0u, rows << " rows, " << th << " threads: " << differing(out, want) << " outputs differ");
        }
      }
    }
  }
  k::set_threads(threads);
  k::use_kernel_set(initial);
  BOOST_TEST(sets_checked >= 1u);
}
