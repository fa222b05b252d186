// The llama forward pass over a block of positions, top to bottom through one layer, as in the paper.
#include <cmath>

#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xview.hpp>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/model.hpp"

namespace glassbox {

namespace k = kernels;

Transformer::Transformer(const Checkpoint& ckpt, int max_block)
    : cfg_(ckpt.config()), w_(ckpt.weights()), max_block_(std::max(1, std::min(max_block, ckpt.config().seq_len))) {
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
  set_rope_theta(cfg_.rope_theta);
}

void Transformer::set_rope_theta(float theta) {
  // rope(pos, 2i) = (cos, sin)(pos · θ^(-2i/head_size)), computed in float as llama2.c does.
  const std::size_t hs = cfg_.head_size();
  s_.rope = xt::zeros<float>({static_cast<std::size_t>(cfg_.seq_len), hs});
  for (int pos = 0; pos < cfg_.seq_len; ++pos)
    for (std::size_t i = 0; i < hs; i += 2) {
      const float freq = 1.0f / std::pow(theta, static_cast<float>(i) / static_cast<float>(hs));
      const float angle = static_cast<float>(pos) * freq;
      s_.rope(pos, i) = std::cos(angle);
      s_.rope(pos, i + 1) = std::sin(angle);
    }
}

std::span<const float> Transformer::forward(std::span<const std::int32_t> tokens, int pos, Attention& attention) {
  const int n = static_cast<int>(tokens.size());
  if (n < 1 || n > max_block_) throw InputError("forward: block of " + std::to_string(n) + " tokens (expected 1.." + std::to_string(max_block_) + ")");
  if (pos < 0 || pos + n > cfg_.seq_len)
    throw InputError("forward: positions " + std::to_string(pos) + ".." + std::to_string(pos + n - 1) +
                     " exceed the context length " + std::to_string(cfg_.seq_len));
  const std::size_t dim = cfg_.dim, hs = cfg_.head_size(), qd = cfg_.n_heads * hs, kvd = cfg_.kv_dim(),
                    hid = cfg_.hidden_dim, N = n;
  const float eps = cfg_.norm_eps;

  // x_t = E[token_t]
  for (int t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= cfg_.vocab_size)
      throw InputError("forward: token id " + std::to_string(tokens[t]) + " outside the vocabulary 0.." + std::to_string(cfg_.vocab_size - 1));
    xt::noalias(xt::view(s_.x, t)) = xt::view(w_.token_embedding, tokens[t]);
  }

  for (int l = 0; l < cfg_.n_layers; ++l) {
    // ---- attention block ----
    // xb = RMSNorm(x) ⊙ g_att
    for (int t = 0; t < n; ++t) k::rmsnorm(&s_.xb(t, 0), &s_.x(t, 0), &w_.rms_att(l, 0), dim, eps);
    // q = xb·Wqᵀ,  k = xb·Wkᵀ,  v = xb·Wvᵀ
    k::matmul(s_.q.data(), s_.xb.data(), &w_.wq(l, 0, 0), N, dim, qd);
    k::matmul(s_.k.data(), s_.xb.data(), &w_.wk(l, 0, 0), N, dim, kvd);
    k::matmul(s_.v.data(), s_.xb.data(), &w_.wv(l, 0, 0), N, dim, kvd);
    // RoPE: rotate each (q, k) pair by the angle of its position
    for (int t = 0; t < n; ++t) {
      const float* cs = &s_.rope(pos + t, 0);
      k::rope(&s_.q(t, 0), cs, qd, hs);
      k::rope(&s_.k(t, 0), cs, kvd, hs);
    }
    // att = softmax(q·Kᵀ/√head_size)·V per head over positions 0..t (the attention plugin
    // stores k, v in its cache first; query heads share kv heads in groups)
    attention.forward(l, pos, n, {s_.q.data(), N * qd}, {s_.k.data(), N * kvd}, {s_.v.data(), N * kvd},
                      {s_.att.data(), N * qd});
    // x = x + att·Woᵀ
    k::matmul(s_.xb.data(), s_.att.data(), &w_.wo(l, 0, 0), N, qd, dim);
    auto x = xt::view(s_.x, xt::range(0, n));
    xt::noalias(x) += xt::view(s_.xb, xt::range(0, n));

    // ---- feed-forward block ----
    // xb = RMSNorm(x) ⊙ g_ffn
    for (int t = 0; t < n; ++t) k::rmsnorm(&s_.xb(t, 0), &s_.x(t, 0), &w_.rms_ffn(l, 0), dim, eps);
    // hb = xb·W1ᵀ (gate),  hb2 = xb·W3ᵀ (up)
    k::matmul(s_.hb.data(), s_.xb.data(), &w_.w1(l, 0, 0), N, dim, hid);
    k::matmul(s_.hb2.data(), s_.xb.data(), &w_.w3(l, 0, 0), N, dim, hid);
    // hb = SiLU(hb) ⊙ hb2,  SiLU(z) = z·σ(z)
    auto gate = xt::view(s_.hb, xt::range(0, n));
    xt::noalias(gate) = gate / (1.0f + xt::exp(-gate)) * xt::view(s_.hb2, xt::range(0, n));
    // x = x + hb·W2ᵀ
    k::matmul(s_.xb.data(), s_.hb.data(), &w_.w2(l, 0, 0), N, hid, dim);
    xt::noalias(x) += xt::view(s_.xb, xt::range(0, n));
  }

  // logits = RMSNorm(x_last) ⊙ g_final · Wclsᵀ  (only the last position predicts)
  k::rmsnorm(s_.last.data(), &s_.x(n - 1, 0), w_.rms_final.data(), dim, eps);
  k::matmul(s_.logits.data(), s_.last.data(), w_.wcls.data(), 1, dim, cfg_.vocab_size);
  return {s_.logits.data(), s_.logits.size()};
}

}  // namespace glassbox
