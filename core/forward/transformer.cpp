// The llama forward pass over a block of positions, top to bottom through one layer, as in the paper.
#include <cmath>

#include <xtensor/xbuilder.hpp>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/forward/transformer.hpp"

namespace glassbox {

namespace k = kernels;

Transformer::Transformer(const Config& cfg, const Weights& w, int max_block)
    : cfg_(cfg), w_(w), max_block_(std::max(1, std::min(max_block, cfg.seq_len))) {
  const std::size_t B = max_block_, dim = cfg_.dim, qd = cfg_.n_heads * cfg_.head_size(), kvd = cfg_.kv_dim(),
                    hid = cfg_.hidden_dim;
  s_.x = xt::zeros<float>({B, dim});
  s_.xb = xt::zeros<float>({B, dim});
  s_.q = xt::zeros<float>({B, qd});
  s_.k = xt::zeros<float>({B, kvd});
  s_.v = xt::zeros<float>({B, kvd});
  s_.att = xt::zeros<float>({B, qd});
  s_.hb = xt::zeros<float>({B, hid});
  s_.hb2 = xt::zeros<float>({B, hid});
  s_.last = xt::zeros<float>({dim});
  s_.logits = xt::zeros<float>({static_cast<std::size_t>(cfg_.vocab_size)});
  std::size_t xq_row = k::xq_row_bytes(w_.wcls);
  for (const auto& lw : w_.layers)
    for (const Tensor* t : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w1, &lw.w2, &lw.w3}) xq_row = std::max(xq_row, k::xq_row_bytes(*t));
  s_.xq.assign(B * xq_row, std::byte{0});
  s_.scores.assign(static_cast<std::size_t>(cfg_.seq_len) * k::threads(), 0.0f);
  set_rope_theta(cfg_.rope_theta);
}

void Transformer::set_rope_theta(float theta) {
  // rope(pos, 2i) = (cos, sin)(pos · θ^(-2i/head_size)), computed in float as llama2.c does.
  // Long-context models stretch it: linear scaling divides pos by a factor; Llama 3's
  // rope_freqs.weight divides each pair's frequency by its own factor (as llama.cpp applies it).
  const std::size_t hs = cfg_.head_size();
  const float pos_scale = cfg_.rope_scaling.type == "linear" ? 1.0f / cfg_.rope_scaling.factor : 1.0f;
  const float* freq_factors = w_.rope_freqs.data ? w_.rope_freqs.f32() : nullptr;
  s_.rope = xt::zeros<float>({static_cast<std::size_t>(cfg_.seq_len), hs});
  for (int pos = 0; pos < cfg_.seq_len; ++pos)
    for (std::size_t i = 0; i < hs; i += 2) {
      float freq = 1.0f / std::pow(theta, static_cast<float>(i) / static_cast<float>(hs));
      if (freq_factors) freq /= freq_factors[i / 2];
      const float angle = pos_scale == 1.0f ? static_cast<float>(pos) * freq : static_cast<float>(pos) * pos_scale * freq;
      s_.rope(pos, i) = std::cos(angle);
      s_.rope(pos, i + 1) = std::sin(angle);
    }
}

std::span<const float> Transformer::forward(std::span<const std::int32_t> tokens, int pos, KvStore& kv,
                                           AttentionObserver* observer) {
  const int n = static_cast<int>(tokens.size());
  if (n < 1 || n > max_block_) throw InputError("forward: block of " + std::to_string(n) + " tokens (expected 1.." + std::to_string(max_block_) + ")");
  if (pos < 0 || pos + n > cfg_.seq_len)
    throw InputError("forward: positions " + std::to_string(pos) + ".." + std::to_string(pos + n - 1) +
                     " exceed the context length " + std::to_string(cfg_.seq_len));
  const std::size_t dim = cfg_.dim, hs = cfg_.head_size(), qd = cfg_.n_heads * hs, kvd = cfg_.kv_dim(), hid = cfg_.hidden_dim, N = n;
  const float eps = cfg_.norm_eps;
  const AttentionShape shape = cfg_.attention_shape();
  const std::size_t seq = cfg_.seq_len;
  // A row of attention scores per thread; more only after set_threads raised the count.
  if (s_.scores.size() < seq * k::threads()) s_.scores.assign(seq * k::threads(), 0.0f);
  const int slots = static_cast<int>(s_.scores.size() / seq);
  dots_ = 0;

  // x_t = E[token_t]
  for (int t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= cfg_.vocab_size)
      throw InputError("forward: token id " + std::to_string(tokens[t]) + " outside the vocabulary 0.." + std::to_string(cfg_.vocab_size - 1));
    k::embedding_row(&s_.x(t, 0), w_.token_embedding, tokens[t]);
  }

  std::byte* xq = s_.xq.data();
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& lw = w_.layers[l];
    // ---- attention block ----
    // xb = RMSNorm(x) ⊙ g_att
    k::rmsnorm_rows(s_.xb.data(), s_.x.data(), lw.rms_att.f32(), N, dim, eps);
    // q = xb·Wqᵀ,  k = xb·Wkᵀ,  v = xb·Wvᵀ
    // (one call: xb is rounded once and the three matrices' rows are shared out together)
    const k::Product qkv[] = {{s_.q.data(), &lw.wq}, {s_.k.data(), &lw.wk}, {s_.v.data(), &lw.wv}};
    k::matmuls(qkv, s_.xb.data(), N, xq);
    // RoPE: rotate each (q, k) pair by the angle of its position
    k::rope_rows(s_.q.data(), qd, s_.k.data(), kvd, &s_.rope(pos, 0), N, hs);
    // att_t = softmax(q_t·Kᵀ/√head_size)·V per head over the positions held once k_t, v_t are stored
    // (query heads share kv heads in groups); the weights of the block's last position are observed
    if (kv.evicts()) {
      // A window: storing a later position may evict one an earlier position attends to.
      for (int t = 0; t < n; ++t) {
        kv.write(l, pos + t, 1, &s_.k(t, 0), &s_.v(t, 0));
        s_.spans.clear();
        kv.view(l, s_.spans);
        dots_ += attend(shape, s_.spans, l, pos + t, &s_.q(t, 0), &s_.att(t, 0), s_.scores.data(),
                        t == n - 1 ? observer : nullptr);
      }
    } else {
      // Nothing is evicted: the whole block is stored, then its positions attend at once (causally,
      // each to the positions up to its own), spread over the threads.
      for (int t = 0; t < n; ++t) kv.write(l, pos + t, 1, &s_.k(t, 0), &s_.v(t, 0));
      s_.spans.clear();
      kv.view(l, s_.spans);
      dots_ += attend_block(shape, s_.spans, l, pos, n, s_.q.data(), s_.att.data(), s_.scores.data(), seq, slots, observer);
    }
    // x = x + att·Woᵀ
    k::matmul(s_.xb.data(), s_.att.data(), lw.wo, N, xq);
    k::add(s_.x.data(), s_.xb.data(), N * dim);

    // ---- feed-forward block ----
    // xb = RMSNorm(x) ⊙ g_ffn
    k::rmsnorm_rows(s_.xb.data(), s_.x.data(), lw.rms_ffn.f32(), N, dim, eps);
    // hb = xb·W1ᵀ (gate),  hb2 = xb·W3ᵀ (up)
    const k::Product gate_up[] = {{s_.hb.data(), &lw.w1}, {s_.hb2.data(), &lw.w3}};
    k::matmuls(gate_up, s_.xb.data(), N, xq);
    // hb = SiLU(hb) ⊙ hb2,  SiLU(z) = z·σ(z)
    k::swiglu(s_.hb.data(), s_.hb2.data(), N * hid);
    // x = x + hb·W2ᵀ
    k::matmul(s_.xb.data(), s_.hb.data(), lw.w2, N, xq);
    k::add(s_.x.data(), s_.xb.data(), N * dim);
  }

  // logits = RMSNorm(x_last) ⊙ g_final · Wclsᵀ  (only the last position predicts)
  k::rmsnorm(s_.last.data(), &s_.x(n - 1, 0), w_.rms_final.f32(), dim, eps);
  k::matmul(s_.logits.data(), s_.last.data(), w_.wcls, 1, xq);
  return {s_.logits.data(), s_.logits.size()};
}

void Transformer::remove_positions(KvStore& kv, int p0, int p1) {
  if (p0 < 0 || p1 < p0 || p1 > cfg_.seq_len)
    throw InputError("remove_positions: range " + std::to_string(p0) + ".." + std::to_string(p1) + " (expected 0 <= p0 <= p1 <= " +
                     std::to_string(cfg_.seq_len) + ")");
  if (p1 == p0) return;
  kv.remove(p0, p1);
  if (p1 - p0 >= cfg_.seq_len) return;  // nothing can follow: positions stop at seq_len - 1
  // R(-d): cos(dθ), -sin(dθ) for each pair; the table's row d holds cos, sin of d·θ_i.
  const std::size_t hs = cfg_.head_size(), kvd = cfg_.kv_dim();
  std::vector<float> back(hs);
  for (std::size_t i = 0; i < hs; i += 2) {
    back[i] = s_.rope(p1 - p0, i);
    back[i + 1] = -s_.rope(p1 - p0, i + 1);
  }
  for (int l = 0; l < cfg_.n_layers; ++l) {
    s_.spans.clear();
    kv.view(l, s_.spans);
    for (const auto& sp : s_.spans)
      for (int p = std::max(sp.first, p0); p < sp.first + sp.count; ++p)
        k::rope(sp.k + static_cast<std::size_t>(p - sp.first) * kvd, back.data(), kvd, hs);
  }
}

}  // namespace glassbox
