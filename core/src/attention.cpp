// The attention arithmetic, in core so every K/V storage module computes exactly the same thing:
// scores q·k/√d over the positions a store holds, softmax, weighted sum of values, per head (GQA).
#include <atomic>
#include <cmath>

#include "glassbox/attention.hpp"
#include "glassbox/kernels.hpp"
#include "thread_pool.hpp"

namespace glassbox {

namespace k = kernels;

std::int64_t attend(const AttentionShape& sh, std::span<const KvSpan> spans, int layer, int pos,
                    const float* q, float* out, float* scores, AttentionObserver* observer) {
  const int hs = sh.head_size, kvd = sh.kv_dim();
  const int group = sh.n_heads / sh.n_kv_heads;  // query heads per kv head
  const int lo = 0;  // causal: every held position up to the query's own
  const float inv_sqrt = 1.0f / std::sqrt(static_cast<float>(hs));
  int first = -1, n = 0;  // the positions attended: first .. first+n-1
  for (const auto& sp : spans) {
    const int a = std::max(sp.first, lo), b = std::min(sp.first + sp.count, pos + 1);
    if (a >= b) continue;
    if (first < 0) first = a;
    n += b - a;
  }
  if (n == 0) {
    std::fill_n(out, sh.q_dim(), 0.0f);
    return 0;
  }
  for (int h = 0; h < sh.n_heads; ++h) {
    const float* qh = q + h * hs;
    const int kvo = (h / group) * hs;
    // a_s = q·k_s / √head_size
    int i = 0;
    for (const auto& sp : spans) {
      const int a = std::max(sp.first, lo), b = std::min(sp.first + sp.count, pos + 1);
      if (a >= b) continue;
      k::dots(scores + i, qh, sp.k + static_cast<std::size_t>(a - sp.first) * kvd + kvo, kvd, b - a, hs, inv_sqrt);
      i += b - a;
    }
    // a = softmax(a)
    k::softmax(scores, n);
    if (observer && observer->wants(layer, h)) observer->weights(layer, h, pos, first, {scores, static_cast<std::size_t>(n)});
    // out_h = Σ_s a_s · v_s
    float* oh = out + h * hs;
    std::fill_n(oh, hs, 0.0f);
    i = 0;
    for (const auto& sp : spans) {
      const int a = std::max(sp.first, lo), b = std::min(sp.first + sp.count, pos + 1);
      if (a >= b) continue;
      k::axpys(oh, scores + i, sp.v + static_cast<std::size_t>(a - sp.first) * kvd + kvo, kvd, b - a, hs);
      i += b - a;
    }
  }
  return static_cast<std::int64_t>(n) * sh.n_heads;
}

std::int64_t attend_block(const AttentionShape& sh, std::span<const KvSpan> spans, int layer, int pos, int n,
                          const float* q, float* out, float* scores, std::size_t stride, int slots,
                          AttentionObserver* observer) {
  struct Ctx {
    const AttentionShape* sh;
    std::span<const KvSpan> spans;
    int layer, pos, n, skip;
    const float* q;
    float* out;
    float* scores;
    std::size_t stride;
    AttentionObserver* observer;
    mutable std::atomic<std::int64_t> dots{0};
  } ctx{&sh, spans, layer, pos, n, 0, q, out, scores, stride, observer};
  // Chunk c is position n − 1 − skip − c: the longest rows are handed out first, so the short ones
  // left at the end even out the threads.
  auto one = [](const void* p, std::size_t c, int slot) {
    const auto& x = *static_cast<const Ctx*>(p);
    const int t = x.n - 1 - x.skip - static_cast<int>(c);
    const std::size_t qd = x.sh->q_dim();
    x.dots.fetch_add(attend(*x.sh, x.spans, x.layer, x.pos + t, x.q + t * qd, x.out + t * qd, x.scores + slot * x.stride,
                            t == x.n - 1 ? x.observer : nullptr),
                     std::memory_order_relaxed);
  };
  // About pos + n/2 keys per query: below kernels' threshold for a product, one thread.
  const std::int64_t macs = static_cast<std::int64_t>(n) * (pos + n / 2 + 1) * sh.q_dim();
  if (n < 2 || macs < (1 << 14) || k::threads() < 2 || slots < k::threads()) {
    for (int c = 0; c < n; ++c) one(&ctx, static_cast<std::size_t>(c), 0);
  } else {
    // The observed (last) position runs here first, so the observer is called on the caller's
    // thread as before, and what it throws reaches the caller; the others go to the threads.
    one(&ctx, 0, 0);
    ctx.skip = 1;
    k::pool().run(static_cast<std::size_t>(n - 1), one, &ctx);
  }
  return ctx.dots.load(std::memory_order_relaxed);
}

}  // namespace glassbox
