// The attention arithmetic, in core so every K/V storage module computes exactly the same thing:
// scores q·k/√d over the positions a store holds, softmax, weighted sum of values, per head (GQA).
#include <cmath>

#include "glassbox/attention.hpp"
#include "glassbox/kernels.hpp"

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

}  // namespace glassbox
