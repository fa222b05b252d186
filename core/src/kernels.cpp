// The forward pass's kernels: scalar reference versions, the choice of SIMD variant (kernel_set.hpp)
// for this CPU, and the split of matrix products across threads.
#include "glassbox/kernels.hpp"

#if defined(__SSE3__)
#include <pmmintrin.h>  // rope, swiglu and add_bias four at a time (x86-64: SSE3 is in every build's baseline)
#endif
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <xsimd/memory/xsimd_aligned_allocator.hpp>

#include "glassbox/error.hpp"
#include "glassbox/os.hpp"
#include "glassbox/quant.hpp"
#include "kernel_set.hpp"
#include "platform/cpu.hpp"
#include "thread_pool.hpp"

namespace glassbox::kernels {

namespace {

// Best first. A variant needs every extension its build was compiled with (platform/cpu.hpp says
// which this CPU has); the scalar set, last, runs everywhere.
struct Variant {
  const KernelSet* set;
  bool (*supported)();
};
bool always() { return true; }
const Variant kVariants[] = {
#if defined(GLASSBOX_KERNELS_X86)
    // The psABI levels the x86-64 variants are compiled for (core/CMakeLists.txt): x86-64-v4 = AVX-512
    // F/BW/CD/DQ/VL (+ VNNI for the integer dot products), v3 = AVX2, FMA, F16C, BMI1/2, v2 = SSE4.2, POPCNT.
    {&kernel_set_avx512vnni, [] { return platform::cpu_features().avx512vnni; }},
    {&kernel_set_avx512, [] { return platform::cpu_features().x86_v4; }},
    {&kernel_set_avx2, [] { return platform::cpu_features().x86_v3; }},
    {&kernel_set_sse42, [] { return platform::cpu_features().x86_v2; }},
#endif
#if defined(GLASSBOX_KERNELS_NEON)
    // aarch64 (kernels_neon.cpp): ARMv8.6 SMMLA (i8mm), ARMv8.2 SDOT (dotprod), plain Advanced SIMD.
    {&kernel_set_neon_i8mm, [] { return platform::cpu_features().i8mm; }},
    {&kernel_set_neon_dotprod, [] { return platform::cpu_features().dotprod; }},
    {&kernel_set_neon, [] { return platform::cpu_features().neon; }},
#endif
#if defined(GLASSBOX_KERNELS_WASM)
    // WebAssembly SIMD128 (kernels_wasm.cpp): always, since an engine without it cannot load the module.
    {&kernel_set_simd128, always},
#endif
    {&kernel_set_scalar, always},
};

const KernelSet* find_supported(std::string_view name) {
  for (const auto& v : kVariants)
    if (name == v.set->name) {
      if (!v.supported()) throw ConfigError("kernel set " + std::string(name) + " needs instructions this CPU lacks");
      return v.set;
    }
  std::string known;
  for (const auto& v : kVariants) known += (known.empty() ? "" : ", ") + std::string(v.set->name);
  throw ConfigError("unknown kernel set '" + std::string(name) + "' (expected one of " + known + ")");
}

const KernelSet* initial_set() {
  // GLASSBOX_KERNELS pins a variant (to compare them, or to reproduce another machine's numbers).
  if (const char* env = std::getenv("GLASSBOX_KERNELS"); env && *env) return find_supported(env);
  for (const auto& v : kVariants)
    if (v.supported()) return v.set;
  return &kernel_set_scalar;
}

std::atomic<const KernelSet*>& active_ptr() {
  static std::atomic<const KernelSet*> p{initial_set()};
  return p;
}

// Cores, not hardware threads: two threads of one core share its FMA units and its cache, so a
// second one per core brings nothing to these loops. Counts distinct (package, core) pairs in sysfs,
// bounded by the CPUs this process may run on.
int physical_cores() {
#if defined(__EMSCRIPTEN__)
  return 1;  // WebAssembly without threads (docs/web.md): one core, whatever the machine has
#endif
  cpu_set_t mask;
  const int online = sched_getaffinity(0, sizeof mask, &mask) == 0 ? std::max(1, CPU_COUNT(&mask)) : 1;
  std::set<std::pair<int, int>> cores;
  for (int c = 0; c < online; ++c) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    std::ifstream pk(base + "physical_package_id"), co(base + "core_id");
    int p = -1, id = -1;
    if (!(pk >> p) || !(co >> id)) return online;
    cores.insert({p, id});
  }
  return std::clamp(static_cast<int>(cores.size()), 1, online);
}

std::atomic<int> g_threads{0};  // 0: not yet chosen
std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;

// Below this many multiply-adds a product runs on the calling thread: handing out chunks costs
// more than it saves (measured: docs/performance.md, "Round eight"). Tests lower it to reach the
// threads with small matrices.
std::atomic<std::size_t> g_min_parallel_macs{kDefaultMinParallelMacs};

// How a dispatch cuts each segment's rows into chunks. Prefill's are of a fixed size (whole panels
// that fit the blocking). Decode's are guided: each takes 1/(2·threads) of the rows not yet handed
// out (whole groups of 8 rows, at least kMinGuidedRows), so they shrink towards the end and the
// thread that finishes first waits at most for a small last chunk.
struct Chunking {
  std::size_t fixed_rows;  // 0: guided
};
constexpr std::size_t kMinGuidedRows = 16;
constexpr std::size_t kMaxGuidedChunks = 256;  // beyond this (many threads), fixed chunks of 8 rows per group instead

// Guided chunks, listed once by the caller (on its stack) so a claim finds its rows directly.
struct ChunkList {
  std::uint32_t seg[kMaxGuidedChunks], i0[kMaxGuidedChunks], i1[kMaxGuidedChunks];
  std::size_t count = 0;
  // False if the segments need more than kMaxGuidedChunks chunks.
  bool guide(const std::size_t* seg_rows, std::size_t segs) {
    std::size_t left = 0;
    for (std::size_t s = 0; s < segs; ++s) left += seg_rows[s];
    const std::size_t share = 2 * static_cast<std::size_t>(threads());
    for (std::size_t s = 0; s < segs; ++s)
      for (std::size_t r = 0; r < seg_rows[s]; ++count) {
        if (count == kMaxGuidedChunks) return false;
        const std::size_t want = std::max(kMinGuidedRows, ((left + share - 1) / share + 7) / 8 * 8);
        const std::size_t e = std::min(seg_rows[s], r + want);
        seg[count] = static_cast<std::uint32_t>(s);
        i0[count] = static_cast<std::uint32_t>(r);
        i1[count] = static_cast<std::uint32_t>(e);
        left -= e - r;
        r = e;
      }
    return true;
  }
};

// Runs fn(s, i0, i1) over rows [0, seg_rows[s]) of each segment s, in chunks that never span two
// segments, all on the pool at once when `macs` is worth it: the products of one input (q, k, v)
// take one dispatch, and the threads stay busy to the end of the last one.
// Which thread runs a chunk does not change its numbers.
template <class F>
void parallel_segments(const std::size_t* seg_rows, std::size_t segs, Chunking ch, std::size_t macs, const F& fn) {
  if (threads() < 2 || macs < min_parallel_macs()) {
    for (std::size_t s = 0; s < segs; ++s) fn(s, std::size_t{0}, seg_rows[s]);
    return;
  }
  ChunkList list;
  std::size_t total = 0;
  for (std::size_t s = 0; s < segs; ++s) total += seg_rows[s];
  if (ch.fixed_rows == 0 && !list.guide(seg_rows, segs)) ch.fixed_rows = std::max<std::size_t>(8, (total / (8 * threads()) + 7) / 8 * 8);
  std::size_t chunks = 0;
  if (ch.fixed_rows)
    for (std::size_t s = 0; s < segs; ++s) chunks += (seg_rows[s] + ch.fixed_rows - 1) / ch.fixed_rows;
  else chunks = list.count;
  if (chunks < 2) {
    for (std::size_t s = 0; s < segs; ++s) fn(s, std::size_t{0}, seg_rows[s]);
    return;
  }
  struct Ctx {
    const F* fn;
    const std::size_t* seg_rows;
    std::size_t fixed_rows;
    const ChunkList* list;
  } ctx{&fn, seg_rows, ch.fixed_rows, &list};
  pool().run(chunks, [](const void* p, std::size_t c, int) {
    const auto& x = *static_cast<const Ctx*>(p);
    if (!x.fixed_rows) {
      (*x.fn)(x.list->seg[c], x.list->i0[c], x.list->i1[c]);
      return;
    }
    std::size_t s = 0;
    for (std::size_t in_s; c >= (in_s = (x.seg_rows[s] + x.fixed_rows - 1) / x.fixed_rows); ++s) c -= in_s;
    const std::size_t i0 = c * x.fixed_rows;
    (*x.fn)(s, i0, std::min(x.seg_rows[s], i0 + x.fixed_rows));
  }, &ctx);
}

// Prefill's fixed chunks: whole `group`-row groups, about 8 per thread so a late or slow thread is
// caught up by the others, and at most `at_most` rows.
Chunking fixed_chunks(std::size_t rows, std::size_t at_most, std::size_t group) {
  const std::size_t per = (rows + 8 * threads() - 1) / (8 * threads());
  return {std::clamp<std::size_t>((per + group - 1) / group * group, group, std::max<std::size_t>(group, at_most))};
}

// One segment in fixed chunks of `chunk_rows` rows: the row steps of a prefill block and x's packing.
template <class F>
void parallel_rows(std::size_t rows, std::size_t chunk_rows, std::size_t macs, const F& fn) {
  parallel_segments(&rows, 1, Chunking{chunk_rows}, macs, [&](std::size_t, std::size_t i0, std::size_t i1) { fn(i0, i1); });
}

std::size_t l2_bytes() {
  static const std::size_t l2 = [] {
#ifdef _SC_LEVEL2_CACHE_SIZE  // glibc's; musl (WebAssembly) and others have no such name: 1 MiB
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#else
    const long v = 0;
#endif
    return v > 0 ? static_cast<std::size_t>(v) : std::size_t{1} << 20;
  }();
  return l2;
}

// Prefill's loop blocking: a block of weight rows, packed (kernels_isa.cpp), fills at most half of
// L2, so it stays there while every row of x passes over it.
Blocking blocking_for(std::size_t k) {
  const std::size_t l2 = l2_bytes();
  const std::size_t row = std::max<std::size_t>(1, k * sizeof(float));
  Blocking b;
  b.weight_rows = std::max<std::size_t>(32, l2 / 2 / row / 32 * 32);
  return b;
}

}  // namespace

const KernelSet& active_set() { return *active_ptr().load(std::memory_order_relaxed); }

// set_threads must not race a running product.
ThreadPool& pool() {
  std::lock_guard lock(g_pool_mutex);
  if (!g_pool || g_pool->threads() != threads()) g_pool = std::make_unique<ThreadPool>(threads());
  return *g_pool;
}

bool spare_core() {
  if (threads() < cores()) return true;
  std::lock_guard lock(g_pool_mutex);
  return !g_pool || g_pool->all_asleep();
}

std::vector<std::string> kernel_sets() {
  std::vector<std::string> out;
  for (const auto& v : kVariants)
    if (v.supported()) out.emplace_back(v.set->name);
  return out;
}

std::string_view kernel_set() { return active_set().name; }

void use_kernel_set(std::string_view name) { active_ptr().store(find_supported(name)); }

std::size_t min_parallel_macs() { return g_min_parallel_macs.load(std::memory_order_relaxed); }
void set_min_parallel_macs(std::size_t macs) { g_min_parallel_macs.store(macs, std::memory_order_relaxed); }

int cores() {
  static const int n = physical_cores();
  return n;
}

int threads() {
  int t = g_threads.load(std::memory_order_relaxed);
  if (t == 0) {
    // OMP_NUM_THREADS, when set, is honoured as before; otherwise one thread per physical core.
    // (Not in a build without threads, WebAssembly's: there it is one, whatever the environment says.)
    const char* env = os::kThreads ? std::getenv("OMP_NUM_THREADS") : nullptr;
    t = env && std::atoi(env) > 0 ? std::min(1024, std::atoi(env)) : physical_cores();
    g_threads.store(t);
  }
  return t;
}

void set_threads(int n) {
  if (n < 1 || n > 1024) throw ConfigError("threads = " + std::to_string(n) + " (expected 1..1024)");
  g_threads.store(n);
}

double fma_probe(std::size_t iters) {
  float sink = 0.0f;
  const std::size_t lanes = active_set().fma_probe(iters, &sink);
  static std::atomic<float> keep{0.0f};  // the result is used, so the loop cannot be dropped
  keep.store(sink, std::memory_order_relaxed);
  return 2.0 * 12.0 * static_cast<double>(lanes) * static_cast<double>(iters);
}

float dot_scalar(const float* a, const float* b, std::size_t n) {
  float s = 0.0f;
  for (std::size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

float dot(const float* a, const float* b, std::size_t n) { return active_set().dot(a, b, n); }

void matmul_scalar(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d) {
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t i = 0; i < d; ++i) out[t * d + i] = dot_scalar(x + t * k, w + i * k, k);
}

namespace {
// Prefill's lane products take x packed: once per product, on the threads, rather than by every
// chunk of weight rows (measured at 2 threads: ~10% of prefill's time went into packing x again
// chunk after chunk). Null where the kernel set packs nothing (decode, few rows).
const float* packed_x(const KernelSet& ks, const float* x, std::size_t n, std::size_t k, std::size_t macs) {
  std::size_t groups = 0;
  const std::size_t floats = ks.packed_x_floats(n, k, &groups);
  if (!floats) return nullptr;
  static thread_local std::vector<float, xsimd::aligned_allocator<float, 64>> xp;
  if (xp.size() < floats) xp.resize(floats);
  float* const to = xp.data();  // the caller's buffer (inside the lambda, `xp` would be each worker's own)
  parallel_rows(groups, 1, macs, [&](std::size_t g0, std::size_t g1) { ks.pack_x_groups(to, x, n, k, g0, g1); });
  return to;
}
}  // namespace

void matmul(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d) {
  // Weight rows are split across threads; each output is computed by one thread in an order fixed
  // by k alone, so the result does not depend on the thread count.
  const KernelSet& ks = active_set();
  Blocking blk = blocking_for(k);
  blk.xp = packed_x(ks, x, n, k, n * k * d);
  // Prefill's chunks are whole panels of 32 rows, the widest micro-kernel's (kernels_isa.cpp).
  const Chunking ch = n == 1 ? Chunking{0} : fixed_chunks(d, blk.weight_rows, 32);
  parallel_segments(&d, 1, ch, n * k * d, [&](std::size_t, std::size_t i0, std::size_t i1) { ks.matmul_rows(out, x, w, n, k, d, i0, i1, blk); });
}

std::size_t xq_row_bytes(const Tensor& w) {
  if (w.dtype == DType::F32) return 0;
  return row_bytes(quant::vec_dot_type(w.dtype), static_cast<std::size_t>(w.cols()));
}

namespace {
// Rounds the n rows of x to the activation type xt (checking k against its block size once).
void quantize_rows(DType xt, const float* x, std::byte* xq, std::size_t n, std::size_t k) {
  const std::size_t xrb = row_bytes(xt, k);
  if (k % dtype_info(xt).block_values != 0) quant::quantize_activation(xt, x, xq, k);  // throws, naming k
  for (std::size_t t = 0; t < n; ++t) {
    if (xt == DType::Q8_0) active_set().quantize_q8_0(x + t * k, xq + t * xrb, k);
    else quant::quantize_activation(xt, x + t * k, xq + t * xrb, k);
  }
}

// The products of one input by `count` weight matrices that share its row length and activation
// type: x rounded once, and every matrix's rows shared out in one dispatch, chunked as one matrix
// of all their rows would be. Each output row's sum depends on k alone (not on the chunk that
// holds it), so the results are matmul's bit for bit.
void shared_input_products(const Product* ps, std::size_t count, const float* x, std::size_t n, std::byte* xq) {
  const Tensor& w0 = *ps[0].w;
  const std::size_t k = w0.cols();
  std::size_t rows[kMaxProducts], total = 0;
  for (std::size_t s = 0; s < count; ++s) total += rows[s] = ps[s].w->rows();
  const KernelSet& ks = active_set();
  if (w0.dtype == DType::F32) {
    Blocking blk = blocking_for(k);
    blk.xp = packed_x(ks, x, n, k, n * k * total);
    const Chunking ch = n == 1 ? Chunking{0} : fixed_chunks(total, blk.weight_rows, 32);
    parallel_segments(rows, count, ch, n * k * total, [&](std::size_t s, std::size_t i0, std::size_t i1) {
      ks.matmul_rows(ps[s].out, x, ps[s].w->f32(), n, k, rows[s], i0, i1, blk);
    });
    return;
  }
  const DType xt = quant::vec_dot_type(w0.dtype);
  const std::size_t xrb = row_bytes(xt, k);
  quantize_rows(xt, x, xq, n, k);
  // The kernel set's product is called directly: the row length was checked once above, and the
  // public quant::vec_dot would check it and look up the kernel set again for every row.
  // As for float32: rows of w split across threads, each output summed in a fixed order (that of
  // the kernel set's vec_dot, whichever rows share a pass).
  // Prefill's chunks are whole groups of 24 rows: whole tiles of 3 or 4 rows (kernels_isa.cpp's
  // integer tiles) and whole passes of 8 (its row groups where there are no tiles).
  parallel_segments(rows, count, n == 1 ? Chunking{0} : fixed_chunks(total, total, 24), n * k * total, [&](std::size_t s, std::size_t i0, std::size_t i1) {
    const Tensor& w = *ps[s].w;
    ks.qmatmul_rows(w.dtype, ps[s].out, w.data, row_bytes(w.dtype, k), xq, xrb, n, k, rows[s], i0, i1);
  });
}

void matmul_scalar_typed(float* out, const float* x, const Tensor& w, std::size_t n, std::byte* xq) {
  const std::size_t k = w.cols(), d = w.rows();
  if (w.dtype == DType::F32) {
    matmul_scalar(out, x, w.f32(), n, k, d);
    return;
  }
  const DType xt = quant::vec_dot_type(w.dtype);
  const std::size_t xrb = row_bytes(xt, k), wrb = row_bytes(w.dtype, k);
  if (k % dtype_info(xt).block_values != 0) quant::quantize_activation(xt, x, xq, k);  // throws, naming k
  for (std::size_t t = 0; t < n; ++t) quant::quantize_activation(xt, x + t * k, xq + t * xrb, k);
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = quant::vec_dot_scalar(w.dtype, k, w.data + i * wrb, xq + t * xrb);
}
}  // namespace

void matmul(float* out, const float* x, const Tensor& w, std::size_t n, std::byte* xq) {
  const Product p{out, &w};
  shared_input_products(&p, 1, x, n, xq);
}

void matmul_scalar(float* out, const float* x, const Tensor& w, std::size_t n, std::byte* xq) { matmul_scalar_typed(out, x, w, n, xq); }

void matmuls(std::span<const Product> products, const float* x, std::size_t n, std::byte* xq) {
  if (products.empty()) return;
  const Tensor& w0 = *products[0].w;
  bool shared = products.size() <= kMaxProducts;
  for (const Product& p : products)
    shared = shared && p.w->cols() == w0.cols() && quant::vec_dot_type(p.w->dtype) == quant::vec_dot_type(w0.dtype);
  if (shared) shared_input_products(products.data(), products.size(), x, n, xq);
  else
    for (const Product& p : products) matmul(p.out, x, *p.w, n, xq);
}

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
  active_set().rmsnorm(out, x, weight, n, eps);
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
  // softmax_scalar's bits: xsimd's vector exp differs from libm's in the last bits, and the logits'
  // distribution is what learners compare across machines. The kernel set's version vectorizes
  // only what keeps them (the maximum, libm's own expf in lanes, the division).
  active_set().softmax(x, n);
}

void exp_floats(const float* x, float* y, std::size_t n) { active_set().exp_floats(x, y, n); }
bool exp_in_vectors() { return active_set().exp_in_vectors(); }

std::size_t first_nonfinite(const float* x, std::size_t n) { return active_set().first_nonfinite(x, n); }

std::size_t first_nonfinite_scalar(const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return i;
  return n;
}

float exp_weights(const float* l, float* w, std::size_t n, double* sum, double* weighted) {
  return active_set().exp_weights(l, w, n, sum, weighted);
}

float exp_weights_scalar(const float* l, float* w, std::size_t n, double* sum, double* weighted) {
  const float m = *std::max_element(l, l + n);
  double s = 0, wl = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float d = l[i] - m;
    w[i] = std::exp(d);
    s += w[i];
    if (w[i] > 0) wl += static_cast<double>(w[i]) * d;
  }
  *sum = s;
  *weighted = wl;
  return m;
}

void axpy_scalar(float* y, float a, const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void axpy(float* y, float a, const float* x, std::size_t n) { active_set().axpy(y, a, x, n); }

void dots(float* out, const float* q, const float* rows, std::size_t stride, std::size_t count, std::size_t n, float scale) {
  active_set().dots(out, q, rows, stride, count, n, scale);
}

void axpys(float* y, const float* a, const float* rows, std::size_t stride, std::size_t count, std::size_t n) {
  active_set().axpys(y, a, rows, stride, count, n);
}

namespace {
// The packed layout's keys per block for head size n: the kernel set's, or 1 (plain rows) where it
// has none or its block does not divide n.
std::size_t key_block(const KernelSet& ks, std::size_t n) { return ks.key_block && n % ks.key_block == 0 ? ks.key_block : 1; }
}  // namespace

bool attention_tiles(std::size_t n) { return key_block(active_set(), n) > 1; }

std::size_t packed_keys_floats(std::size_t count, std::size_t n) {
  const std::size_t b = key_block(active_set(), n);
  return (count + b - 1) / b * b * n;
}

std::size_t packed_scores_floats(std::size_t count, std::size_t n) {
  const std::size_t b = key_block(active_set(), n);
  return (count + b - 1) / b * b;
}

void pack_keys(float* kt, const float* rows, std::size_t stride, std::size_t count, std::size_t n, std::size_t at) {
  const KernelSet& ks = active_set();
  if (key_block(ks, n) > 1) return ks.pack_keys(kt, rows, stride, count, n, at);
  for (std::size_t s = 0; s < count; ++s) std::copy_n(rows + s * stride, n, kt + (at + s) * n);
}

void dots_packed(float* out, std::size_t out_stride, const float* q, std::size_t q_stride, std::size_t nq, const float* kt,
                 std::size_t count, std::size_t n, float scale) {
  const KernelSet& ks = active_set();
  if (key_block(ks, n) > 1) return ks.dots_packed(out, out_stride, q, q_stride, nq, kt, count, n, scale);
  for (std::size_t r = 0; r < nq; ++r) ks.dots(out + r * out_stride, q + r * q_stride, kt, n, count, n, scale);
}

void axpys_rows(float* y, std::size_t y_stride, const float* a, std::size_t a_stride, std::size_t nq, const float* rows,
                std::size_t stride, std::size_t count, std::size_t n) {
  active_set().axpys_rows(y, y_stride, a, a_stride, nq, rows, stride, count, n);
}

void rope(float* x, const float* cos_sin, std::size_t n, std::size_t head_size) {
  std::size_t i = 0;
  // Two pairs at a time (SSE3, the baseline): x·(c, c) ∓ swap(x)·(s, s) with addsub, the scalar
  // loop's products and sums exactly (this file is built without FMA contraction into them: the
  // x86-64-v2 baseline has none). A head's pairs never straddle a vector (head_size is even).
#if defined(__SSE3__)
  if (head_size % 4 == 0)
    for (; i + 4 <= n; i += 4) {
      const std::size_t j = i % head_size;
      const __m128 v = _mm_loadu_ps(x + i), cs = _mm_loadu_ps(cos_sin + j);
      const __m128 a = _mm_mul_ps(v, _mm_moveldup_ps(cs));
      const __m128 b = _mm_mul_ps(_mm_shuffle_ps(v, v, _MM_SHUFFLE(2, 3, 0, 1)), _mm_movehdup_ps(cs));
      _mm_storeu_ps(x + i, _mm_addsub_ps(a, b));
    }
#endif
  for (; i < n; i += 2) {
    const std::size_t j = i % head_size;  // pair index within the head, times 2
    const float c = cos_sin[j], s = cos_sin[j + 1];
    const float x0 = x[i], x1 = x[i + 1];
    x[i] = x0 * c - x1 * s;
    x[i + 1] = x0 * s + x1 * c;
  }
}

namespace {
// Elementwise steps cost a few nanoseconds per value: below this many values (a decode step's
// rows) handing out chunks costs more than it saves.
constexpr std::size_t kMinParallelValues = 1u << 15;

// fn(i0, i1) over [0, items) on the threads, in chunks of about 8 per thread, when `values` is worth it.
template <class F>
void parallel_items(std::size_t items, std::size_t values, const F& fn) {
  if (values < kMinParallelValues) return fn(std::size_t{0}, items);
  parallel_rows(items, fixed_chunks(items, items, 1).fixed_rows, min_parallel_macs(), fn);
}
}  // namespace

void rmsnorm_rows(float* out, const float* x, const float* weight, std::size_t rows, std::size_t n, float eps) {
  const KernelSet& ks = active_set();
  parallel_items(rows, rows * n, [&](std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) ks.rmsnorm(out + t * n, x + t * n, weight, n, eps);
  });
}

void rope_rows(float* q, std::size_t q_n, float* k, std::size_t k_n, const float* cos_sin, std::size_t rows, std::size_t head_size) {
  parallel_items(rows, rows * (q_n + k_n), [&](std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) {
      rope(q + t * q_n, cos_sin + t * head_size, q_n, head_size);
      rope(k + t * k_n, cos_sin + t * head_size, k_n, head_size);
    }
  });
}

void swiglu(float* gate, const float* up, std::size_t n) {
  // In 64-value pieces, so chunks never split a cache line between threads. Each exp is libm's
  // (exp_floats, as softmax's); the division and product around it run four at a time, the same roundings.
  constexpr std::size_t piece = 64;
  const KernelSet& ks = active_set();
  parallel_items((n + piece - 1) / piece, n, [&](std::size_t p0, std::size_t p1) {
    alignas(16) float ex[piece];
    for (std::size_t i0 = p0 * piece, e = std::min(n, p1 * piece); i0 < e; i0 += piece) {
      const std::size_t m = std::min(piece, e - i0);
      for (std::size_t j = 0; j < m; ++j) ex[j] = -gate[i0 + j];
      ks.exp_floats(ex, ex, m);
      std::size_t j = 0;
#if defined(__SSE3__)
      const __m128 one = _mm_set1_ps(1.0f);
      for (; j + 4 <= m; j += 4) {
        const __m128 g = _mm_loadu_ps(gate + i0 + j);
        _mm_storeu_ps(gate + i0 + j, _mm_mul_ps(_mm_div_ps(g, _mm_add_ps(one, _mm_load_ps(ex + j))), _mm_loadu_ps(up + i0 + j)));
      }
#endif
      for (; j < m; ++j) gate[i0 + j] = gate[i0 + j] / (1.0f + ex[j]) * up[i0 + j];
    }
  });
}

void add(float* y, const float* x, std::size_t n) {
  constexpr std::size_t piece = 64;
  parallel_items((n + piece - 1) / piece, n, [&](std::size_t p0, std::size_t p1) {
    for (std::size_t i = p0 * piece, e = std::min(n, p1 * piece); i < e; ++i) y[i] += x[i];
  });
}

// ---- the other architectures' steps (docs/architectures.md) ---------------------------------------
// Each row's or element's arithmetic is its scalar twin's, so results do not depend on the block or
// the thread count; the twins are the definitions the tests compare against.

void layernorm_scalar(float* out, const float* x, const float* weight, const float* bias, std::size_t n, float eps) {
  // ggml_norm's order: the mean and the variance summed in double, the deviations kept in float.
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double sum2 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i] - mean;
    sum2 += static_cast<double>(v * v);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum2 / static_cast<double>(n)) + eps);
  for (std::size_t i = 0; i < n; ++i) {
    const float y = (x[i] - mean) * scale * weight[i];
    out[i] = bias ? y + bias[i] : y;
  }
}

void layernorm_rows(float* out, const float* x, const float* weight, const float* bias, std::size_t rows, std::size_t n, float eps) {
  parallel_items(rows, rows * n, [&](std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) layernorm_scalar(out + t * n, x + t * n, weight, bias, n, eps);
  });
}

void add_bias_scalar(float* y, const float* bias, std::size_t rows, std::size_t n) {
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t i = 0; i < n; ++i) y[t * n + i] += bias[i];
}

void add_bias(float* y, const float* bias, std::size_t rows, std::size_t n) {
  parallel_items(rows, rows * n, [&](std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) {
      float* r = y + t * n;
      std::size_t i = 0;
#if defined(__SSE3__)
      for (; i + 4 <= n; i += 4) _mm_storeu_ps(r + i, _mm_add_ps(_mm_loadu_ps(r + i), _mm_loadu_ps(bias + i)));
#endif
      for (; i < n; ++i) r[i] += bias[i];
    }
  });
}

namespace {

// GELU, tanh form: ½x(1 + tanh(√(2/π)(x + 0.044715x³))), in ggml_gelu_f32's float order.
float gelu_tanh_one(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}
// GELU, exact: ½x(1 + erf(x/√2)).
float gelu_erf_one(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752440f)); }

// llama.cpp's CPU GELU (ggml_vec_gelu_f32 with GGML_GELU_FP16): 0 below −10, x above 10, else x rounded
// to fp16 and gelu_tanh of that value looked up in a table of fp16 results.
const std::vector<std::uint16_t>& gelu_fp16_table() {
  static const std::vector<std::uint16_t> t = [] {
    std::vector<std::uint16_t> v(1 << 16);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = quant::fp32_to_fp16(gelu_tanh_one(quant::fp16_to_fp32(static_cast<std::uint16_t>(i))));
    return v;
  }();
  return t;
}
float gelu_table_one(float x, const std::uint16_t* table) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return quant::fp16_to_fp32(table[quant::fp32_to_fp16(x)]);
}

void gelu_range(float* x, std::size_t n, GeluKind kind, const std::uint16_t* table) {
  switch (kind) {
    case GeluKind::Tanh: for (std::size_t i = 0; i < n; ++i) x[i] = gelu_tanh_one(x[i]); break;
    case GeluKind::Erf: for (std::size_t i = 0; i < n; ++i) x[i] = gelu_erf_one(x[i]); break;
    case GeluKind::Fp16Table: for (std::size_t i = 0; i < n; ++i) x[i] = gelu_table_one(x[i], table); break;
  }
}

}  // namespace

float gelu_one(float x, GeluKind kind) {
  switch (kind) {
    case GeluKind::Tanh: return gelu_tanh_one(x);
    case GeluKind::Erf: return gelu_erf_one(x);
    case GeluKind::Fp16Table: return gelu_table_one(x, gelu_fp16_table().data());
  }
  return x;
}

void gelu_scalar(float* x, std::size_t n, GeluKind kind) {
  for (std::size_t i = 0; i < n; ++i) x[i] = gelu_one(x[i], kind);
}

void gelu(float* x, std::size_t n, GeluKind kind) {
  constexpr std::size_t piece = 64;
  const std::uint16_t* table = kind == GeluKind::Fp16Table ? gelu_fp16_table().data() : nullptr;
  parallel_items((n + piece - 1) / piece, n, [&](std::size_t p0, std::size_t p1) {
    const std::size_t i0 = p0 * piece, e = std::min(n, p1 * piece);
    gelu_range(x + i0, e - i0, kind, table);
  });
}

void geglu_scalar(float* gate, const float* up, std::size_t n, GeluKind kind) {
  for (std::size_t i = 0; i < n; ++i) gate[i] = gelu_one(gate[i], kind) * up[i];
}

void geglu(float* gate, const float* up, std::size_t n, GeluKind kind) {
  constexpr std::size_t piece = 64;
  const std::uint16_t* table = kind == GeluKind::Fp16Table ? gelu_fp16_table().data() : nullptr;
  parallel_items((n + piece - 1) / piece, n, [&](std::size_t p0, std::size_t p1) {
    const std::size_t i0 = p0 * piece, e = std::min(n, p1 * piece);
    gelu_range(gate + i0, e - i0, kind, table);
    for (std::size_t i = i0; i < e; ++i) gate[i] *= up[i];
  });
}

void rope_neox_scalar(float* x, const float* cos_sin, std::size_t n, std::size_t head_size, std::size_t n_rot) {
  const std::size_t half = n_rot / 2;
  for (std::size_t h = 0; h < n; h += head_size)
    for (std::size_t i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const float x0 = x[h + i], x1 = x[h + i + half];
      x[h + i] = x0 * c - x1 * s;
      x[h + i + half] = x0 * s + x1 * c;
    }
}

void rope_neox(float* x, const float* cos_sin, std::size_t n, std::size_t head_size, std::size_t n_rot) {
  const std::size_t half = n_rot / 2;
  for (std::size_t h = 0; h < n; h += head_size) {
    float* a = x + h;
    float* b = x + h + half;
    std::size_t i = 0;
    // Four pairs at a time: the interleaved (cos, sin) table split into a cos and a sin vector; the
    // scalar twin's products and sums exactly (no FMA in this file's baseline build).
#if defined(__SSE3__)
    for (; i + 4 <= half; i += 4) {
      const __m128 cs0 = _mm_loadu_ps(cos_sin + 2 * i), cs1 = _mm_loadu_ps(cos_sin + 2 * i + 4);
      const __m128 c = _mm_shuffle_ps(cs0, cs1, _MM_SHUFFLE(2, 0, 2, 0)), s = _mm_shuffle_ps(cs0, cs1, _MM_SHUFFLE(3, 1, 3, 1));
      const __m128 x0 = _mm_loadu_ps(a + i), x1 = _mm_loadu_ps(b + i);
      _mm_storeu_ps(a + i, _mm_sub_ps(_mm_mul_ps(x0, c), _mm_mul_ps(x1, s)));
      _mm_storeu_ps(b + i, _mm_add_ps(_mm_mul_ps(x0, s), _mm_mul_ps(x1, c)));
    }
#endif
    for (; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const float x0 = a[i], x1 = b[i];
      a[i] = x0 * c - x1 * s;
      b[i] = x0 * s + x1 * c;
    }
  }
}

void rope_neox_rows(float* q, std::size_t q_n, float* k, std::size_t k_n, const float* cos_sin, std::size_t rows, std::size_t head_size,
                    std::size_t n_rot) {
  parallel_items(rows, rows * (q_n + k_n), [&](std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) {
      rope_neox(q + t * q_n, cos_sin + t * head_size, q_n, head_size, n_rot);
      rope_neox(k + t * k_n, cos_sin + t * head_size, k_n, head_size, n_rot);
    }
  });
}

void softcap_scalar(float* x, std::size_t n, float cap) {
  // llama.cpp's order: scale by 1/c, tanh, scale by c.
  const float inv = 1.0f / cap;
  for (std::size_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

void softcap(float* x, std::size_t n, float cap) {
  constexpr std::size_t piece = 256;
  parallel_items((n + piece - 1) / piece, n, [&](std::size_t p0, std::size_t p1) {
    const std::size_t i0 = p0 * piece, e = std::min(n, p1 * piece);
    softcap_scalar(x + i0, e - i0, cap);
  });
}

void scale(float* x, std::size_t n, float a) {
  for (std::size_t i = 0; i < n; ++i) x[i] *= a;
}

// ---- the scalar kernel set -----------------------------------------------------------------------
// Every entry its scalar twin, or a plain loop of them: the set every build has (GLASSBOX_KERNELS=scalar),
// the one a CPU without a SIMD set runs, and the fallback of the NEON sets for what they leave out.
namespace {
void matmul_rows_scalar(float* out, const float* x, const float* w, std::size_t n, std::size_t k, std::size_t d,
                        std::size_t i0, std::size_t i1, const Blocking&) {
  for (std::size_t i = i0; i < i1; ++i)
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = dot_scalar(x + t * k, w + i * k, k);
}
void dots_scalar(float* out, const float* q, const float* rows, std::size_t stride, std::size_t count, std::size_t n, float scale) {
  for (std::size_t s = 0; s < count; ++s) out[s] = dot_scalar(q, rows + s * stride, n) * scale;
}
void axpys_scalar(float* y, const float* a, const float* rows, std::size_t stride, std::size_t count, std::size_t n) {
  for (std::size_t s = 0; s < count; ++s) axpy_scalar(y, a[s], rows + s * stride, n);
}
float vec_dot_scalar_set(DType w, std::size_t n, const void* w_row, const void* x_row) {
  return quant::vec_dot_scalar(w, n, w_row, x_row);
}
void quantize_q8_0_scalar(const float* x, void* dst, std::size_t n) { quant::quantize_activation(DType::Q8_0, x, dst, n); }
void qmatmul_rows_scalar(DType wt, float* out, const std::byte* w, std::size_t wrb, const std::byte* xq, std::size_t xrb,
                         std::size_t n, std::size_t k, std::size_t d, std::size_t i0, std::size_t i1) {
  for (std::size_t i = i0; i < i1; ++i)
    for (std::size_t t = 0; t < n; ++t) out[t * d + i] = quant::vec_dot_scalar(wt, k, w + i * wrb, xq + t * xrb);
}
std::size_t fma_probe_scalar(std::size_t iters, float* sink) {
  float acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = 1.0f + 0.01f * static_cast<float>(j);
  for (std::size_t it = 0; it < iters; ++it)
    for (int j = 0; j < 12; ++j) acc[j] = acc[j] * 0.9999999f + 1e-7f;
  float s = 0.0f;
  for (float a : acc) s += a;
  *sink = s;
  return 1;
}
std::size_t packed_x_floats_none(std::size_t, std::size_t, std::size_t* groups) {
  *groups = 0;
  return 0;
}
void pack_x_groups_none(float*, const float*, std::size_t, std::size_t, std::size_t, std::size_t) {}
// key_block 0: kernels.cpp keeps plain rows and runs dots query by query; these are never reached.
void pack_keys_plain(float* kt, const float* rows, std::size_t stride, std::size_t count, std::size_t n, std::size_t at) {
  for (std::size_t s = 0; s < count; ++s) std::copy_n(rows + s * stride, n, kt + (at + s) * n);
}
void dots_packed_plain(float* out, std::size_t out_stride, const float* q, std::size_t q_stride, std::size_t nq, const float* kt,
                       std::size_t count, std::size_t n, float scale) {
  for (std::size_t r = 0; r < nq; ++r) dots_scalar(out + r * out_stride, q + r * q_stride, kt, n, count, n, scale);
}
void axpys_rows_scalar(float* y, std::size_t y_stride, const float* a, std::size_t a_stride, std::size_t nq, const float* rows,
                       std::size_t stride, std::size_t count, std::size_t n) {
  for (std::size_t r = 0; r < nq; ++r) axpys_scalar(y + r * y_stride, a + r * a_stride, rows, stride, count, n);
}
void exp_floats_scalar(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
bool exp_in_vectors_scalar() { return false; }
}  // namespace

extern const KernelSet kernel_set_scalar = {"scalar", dot_scalar, matmul_rows_scalar, rmsnorm_scalar, axpy_scalar, dots_scalar,
                                            axpys_scalar, vec_dot_scalar_set, quantize_q8_0_scalar, qmatmul_rows_scalar,
                                            fma_probe_scalar, exp_weights_scalar, packed_x_floats_none, pack_x_groups_none, 0,
                                            pack_keys_plain, dots_packed_plain, axpys_rows_scalar, softmax_scalar,
                                            first_nonfinite_scalar, exp_floats_scalar, exp_in_vectors_scalar};

}  // namespace glassbox::kernels
