// The attention arithmetic, in core so every K/V storage module computes exactly the same thing:
// scores q·k/√d over the positions a store holds, softmax, weighted sum of values, per head (GQA).
#include <atomic>
#include <cmath>
#include <vector>

#include <xsimd/memory/xsimd_aligned_allocator.hpp>

#include "glassbox/forward/attention.hpp"
#include "glassbox/kernels.hpp"
#include "thread_pool.hpp"

namespace glassbox {

namespace k = kernels;

std::int64_t attend(const AttentionShape& sh, const AttentionRule& rule, std::span<const KvSpan> spans, int layer, int pos,
                    const float* q, float* out, float* scores, AttentionObserver* observer) {
  const int hs = sh.head_size, kvd = sh.kv_dim();
  const int group = sh.n_heads / sh.n_kv_heads;  // query heads per kv head
  // causal: every held position up to the query's own; a windowed layer sees only the last `window`
  const int lo = rule.window > 0 ? pos - rule.window + 1 : 0;
  const float scale = rule.scale > 0 ? rule.scale : 1.0f / std::sqrt(static_cast<float>(hs));
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
    // a_s = q·k_s · scale   (scale = 1/√head_size unless the model says otherwise)
    int i = 0;
    for (const auto& sp : spans) {
      const int a = std::max(sp.first, lo), b = std::min(sp.first + sp.count, pos + 1);
      if (a >= b) continue;
      k::dots(scores + i, qh, sp.k + static_cast<std::size_t>(a - sp.first) * kvd + kvo, kvd, b - a, hs, scale);
      i += b - a;
    }
    // a_s = c·tanh(a_s / c)   (soft-capping, Gemma 2)
    if (rule.softcap > 0) k::softcap_scalar(scores, n, rule.softcap);
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

namespace {

// Queries per task of attend_block's tiled path: they share each pass over a head's keys and values.
constexpr int kGroup = 8;

// The tiled path: every held position is one run first .. pos+n-1 (spans contiguous, in order), so
// query t attends to a prefix of it, and the keys of each kv head are packed once for all queries.
// Each query's scores, softmax and weighted sum are attend's, bit for bit (kernels::dots_packed and
// axpys_rows keep dots' and axpys' sums); only the order the work is done in differs.
struct Tiled {
  const AttentionShape* sh;
  const AttentionRule* rule;
  std::span<const KvSpan> spans;
  int layer, pos, n, first, skip;
  const float* q;
  float* out;
  const float* kt;  // packed keys, kv head after kv head
  std::size_t head_floats;  // packed floats per kv head
  std::size_t score_row;    // floats per query's row of scores
  AttentionObserver* observer;
  mutable std::atomic<std::int64_t> dots{0};

  // Queries t0 .. t1-1, every head. `scores` holds kGroup rows of score_row.
  void group(int t0, int t1, float* scores) const {
    const int hs = sh->head_size, kvd = sh->kv_dim(), qd = sh->q_dim(), per_kv = sh->n_heads / sh->n_kv_heads;
    const std::size_t rows = static_cast<std::size_t>(t1 - t0);
    const float scale = rule->scale > 0 ? rule->scale : 1.0f / std::sqrt(static_cast<float>(hs));
    // Query t attends to held keys 0 .. len(t)-1 (positions first .. pos+t).
    auto len = [&](int t) { return static_cast<std::size_t>(pos + t + 1 - first); };
    const std::size_t common = len(t0), longest = len(t1 - 1);
    std::int64_t done = 0;
    for (int h = 0; h < sh->n_heads; ++h) {
      const int kvh = h / per_kv;
      const float* qh = q + static_cast<std::size_t>(t0) * qd + h * hs;
      k::dots_packed(scores, score_row, qh, qd, rows, kt + kvh * head_floats, longest, hs, scale);
      for (std::size_t r = 0; r < rows; ++r) {
        const int t = t0 + static_cast<int>(r);
        if (rule->softcap > 0) k::softcap_scalar(scores + r * score_row, len(t), rule->softcap);
        k::softmax(scores + r * score_row, len(t));
        if (t == n - 1 && observer && observer->wants(layer, h))
          observer->weights(layer, h, pos + t, first, {scores + r * score_row, len(t)});
        std::fill_n(out + static_cast<std::size_t>(t) * qd + h * hs, hs, 0.0f);
        done += static_cast<std::int64_t>(len(t));
      }
      // Σ_s a_s · v_s: the keys all rows attend to in one pass, then each row's own last few.
      float* oh = out + static_cast<std::size_t>(t0) * qd + h * hs;
      std::size_t at = 0;  // key index of the span's first held position
      for (const auto& sp : spans) {
        const std::size_t cnt = static_cast<std::size_t>(sp.count);
        const float* v = sp.v + kvh * hs;
        if (at < common)
          k::axpys_rows(oh, qd, scores + at, score_row, rows, v, kvd, std::min(cnt, common - at), hs);
        for (std::size_t r = 1; r < rows; ++r) {
          const std::size_t a = std::max(at, common), b = std::min(at + cnt, len(t0 + static_cast<int>(r)));
          if (a < b) k::axpys(oh + r * qd, scores + r * score_row + a, v + (a - at) * kvd, kvd, b - a, hs);
        }
        at += cnt;
      }
    }
    dots.fetch_add(done, std::memory_order_relaxed);
  }
};

}  // namespace

std::int64_t attend_block(const AttentionShape& sh, const AttentionRule& rule, std::span<const KvSpan> spans, int layer, int pos, int n,
                          const float* q, float* out, float* scores, std::size_t stride, int slots,
                          AttentionObserver* observer) {
  // About pos + n/2 keys per query: below kernels' threshold for a product, one thread.
  const std::int64_t macs = static_cast<std::int64_t>(n) * (pos + n / 2 + 1) * sh.q_dim();
  const bool spread = n >= 2 && macs >= (1 << 14) && k::threads() >= 2 && slots >= k::threads();

  // The tiled path needs the held positions as one run ending at the block's last position.
  int first = -1, end = 0;
  bool run = n >= 2 && k::attention_tiles(static_cast<std::size_t>(sh.head_size));
  for (const auto& sp : spans) {
    if (sp.count <= 0) continue;
    if (first < 0) first = end = sp.first;
    run = run && sp.first == end;
    end = sp.first + sp.count;
  }
  // ... and, with a window, every query's window must reach back to the first held position.
  if (rule.window > 0 && first >= 0 && pos + n - rule.window > first) run = false;
  if (run && first >= 0 && first <= pos && end == pos + n) {
    const std::size_t hs = sh.head_size, kvd = sh.kv_dim(), held = static_cast<std::size_t>(end - first);
    const std::size_t head_floats = k::packed_keys_floats(held, hs);
    // Per thread, kept between calls (prefill only: decode's single positions never come here).
    static thread_local std::vector<float, xsimd::aligned_allocator<float, 64>> kt;
    if (kt.size() < head_floats * sh.n_kv_heads) kt.resize(head_floats * sh.n_kv_heads);
    std::size_t at = 0;
    for (const auto& sp : spans) {
      if (sp.count <= 0) continue;
      for (int h = 0; h < sh.n_kv_heads; ++h)
        k::pack_keys(kt.data() + h * head_floats, sp.k + h * hs, kvd, static_cast<std::size_t>(sp.count), hs, at);
      at += static_cast<std::size_t>(sp.count);
    }
    Tiled ctx{&sh, &rule, spans, layer, pos, n, first, 0, q, out, kt.data(), head_floats, k::packed_scores_floats(held, hs), observer};
    // Task c is the c-th group of kGroup queries from the end: the longest rows are handed out
    // first, so the short ones left at the end even out the threads.
    auto one = [](const void* p, std::size_t c, int) {
      const auto& x = *static_cast<const Tiled*>(p);
      static thread_local std::vector<float> sc;
      if (sc.size() < kGroup * x.score_row) sc.resize(kGroup * x.score_row);
      const int t1 = x.n - kGroup * static_cast<int>(c + x.skip);
      x.group(std::max(0, t1 - kGroup), t1, sc.data());
    };
    const std::size_t groups = static_cast<std::size_t>((n + kGroup - 1) / kGroup);
    // The observed (last) group runs here first, so the observer is called on the caller's thread
    // as before, and what it throws reaches the caller; the others go to the threads.
    one(&ctx, 0, 0);
    ctx.skip = 1;
    if (groups > 1) {
      if (spread) k::pool().run(groups - 1, one, &ctx);
      else
        for (std::size_t c = 0; c + 1 < groups; ++c) one(&ctx, c, 0);
    }
    return ctx.dots.load(std::memory_order_relaxed);
  }

  struct Ctx {
    const AttentionShape* sh;
    const AttentionRule* rule;
    std::span<const KvSpan> spans;
    int layer, pos, n, skip;
    const float* q;
    float* out;
    float* scores;
    std::size_t stride;
    AttentionObserver* observer;
    mutable std::atomic<std::int64_t> dots{0};
  } ctx{&sh, &rule, spans, layer, pos, n, 0, q, out, scores, stride, observer};
  // Chunk c is position n − 1 − skip − c: the longest rows are handed out first, so the short ones
  // left at the end even out the threads.
  auto one = [](const void* p, std::size_t c, int slot) {
    const auto& x = *static_cast<const Ctx*>(p);
    const int t = x.n - 1 - x.skip - static_cast<int>(c);
    const std::size_t qd = x.sh->q_dim();
    x.dots.fetch_add(attend(*x.sh, *x.rule, x.spans, x.layer, x.pos + t, x.q + t * qd, x.out + t * qd, x.scores + slot * x.stride,
                            t == x.n - 1 ? x.observer : nullptr),
                     std::memory_order_relaxed);
  };
  if (!spread) {
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
