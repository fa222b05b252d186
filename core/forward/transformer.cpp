// The forward pass over a block of positions, top to bottom through one layer, as in the papers: llama's
// path reads as before, and each architecture's differences (forward/arch.hpp) are one switched line each.
#include <algorithm>
#include <cmath>

#include <xtensor/xbuilder.hpp>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/forward/transformer.hpp"
#include "thread_pool.hpp"

namespace glassbox {

namespace k = kernels;

Transformer::Transformer(const Config& cfg, const Weights& w, int max_block)
    : cfg_(cfg), w_(w), max_block_(std::max(1, std::min(max_block, cfg.seq_len))) {
  const ArchDescription& a = cfg_.arch;
  const std::size_t B = max_block_, dim = cfg_.dim, qd = cfg_.q_dim(), kvd = cfg_.kv_dim(), hid = cfg_.hidden_dim;
  s_.x = xt::zeros<float>({B, dim});
  s_.xb = xt::zeros<float>({B, dim});
  s_.q = xt::zeros<float>({B, qd});
  s_.k = xt::zeros<float>({B, kvd});
  s_.v = xt::zeros<float>({B, kvd});
  if (a.fused_qkv) s_.qkv = xt::zeros<float>({B, qd + 2 * kvd});
  s_.att = xt::zeros<float>({B, qd});
  s_.hb = xt::zeros<float>({B, hid});
  s_.hb2 = xt::zeros<float>({B, hid});
  if (a.fused_gate_up) s_.gu = xt::zeros<float>({B, 2 * hid});
  s_.last = xt::zeros<float>({dim});
  s_.logits = xt::zeros<float>({static_cast<std::size_t>(cfg_.vocab_size)});
  std::size_t xq_row = k::xq_row_bytes(w_.wcls);
  for (const auto& lw : w_.layers)
    for (const Tensor* t : {&lw.wq, &lw.wk, &lw.wv, &lw.wqkv, &lw.wo, &lw.w1, &lw.w2, &lw.w3, &lw.w13})
      if (t->data) xq_row = std::max(xq_row, k::xq_row_bytes(*t));
  s_.xq.assign(B * xq_row, std::byte{0});
  s_.scores.assign(static_cast<std::size_t>(cfg_.seq_len) * k::threads(), 0.0f);
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LayerRule r = cfg_.layer_rule(l);
    s_.layer_rule.push_back({cfg_.attention_scale(), cfg_.attn_softcap, r.window});
  }
  set_rope_theta(0);
}

void Transformer::set_rope_theta(float theta) {
  // rope(pos, 2i) = (cos, sin)(pos · θ^(-2i/n_rot)), computed in float as llama2.c does; one table per
  // distinct base (Gemma 3's local and global layers differ). theta > 0 replaces every base (test-only).
  // Long-context models stretch it: linear scaling divides pos by a factor; Llama 3's
  // rope_freqs.weight divides each pair's frequency by its own factor (as llama.cpp applies it).
  s_.rope.clear();
  s_.layer_rope.clear();
  if (cfg_.arch.position == PositionKind::Learned) return;
  const std::size_t hs = cfg_.head_size(), n_rot = cfg_.rot_dims();
  const float pos_scale = cfg_.rope_scaling.type == "linear" ? 1.0f / cfg_.rope_scaling.factor : 1.0f;
  const float* freq_factors = w_.rope_freqs.data ? w_.rope_freqs.f32() : nullptr;
  std::vector<float> bases;
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const float base = theta > 0 ? theta : cfg_.layer_rule(l).rope_theta;
    const auto at = std::find(bases.begin(), bases.end(), base);
    s_.layer_rope.push_back(static_cast<int>(at - bases.begin()));
    if (at == bases.end()) bases.push_back(base);
  }
  for (const float base : bases) {
    xt::xtensor<float, 2> table = xt::zeros<float>({static_cast<std::size_t>(cfg_.seq_len), hs});
    for (int pos = 0; pos < cfg_.seq_len; ++pos) {
      for (std::size_t i = 0; i < n_rot; i += 2) {
        float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(n_rot));
        if (freq_factors) freq /= freq_factors[i / 2];
        const float angle = pos_scale == 1.0f ? static_cast<float>(pos) * freq : static_cast<float>(pos) * pos_scale * freq;
        table(pos, i) = std::cos(angle);
        table(pos, i + 1) = std::sin(angle);
      }
      for (std::size_t i = n_rot; i < hs; i += 2) table(pos, i) = 1.0f;  // unrotated dims: the identity
    }
    s_.rope.push_back(std::move(table));
  }
}

std::span<const float> Transformer::forward(std::span<const std::int32_t> tokens, int pos, KvStore& kv,
                                           AttentionObserver* observer, LensCapture* lens) {
  const int n = static_cast<int>(tokens.size());
  if (n < 1 || n > max_block_) throw InputError("forward: block of " + std::to_string(n) + " tokens (expected 1.." + std::to_string(max_block_) + ")");
  if (pos < 0 || pos + n > cfg_.seq_len)
    throw InputError("forward: positions " + std::to_string(pos) + ".." + std::to_string(pos + n - 1) +
                     " exceed the context length " + std::to_string(cfg_.seq_len));
  const ArchDescription& a = cfg_.arch;
  const std::size_t dim = cfg_.dim, N = n;
  const std::size_t seq = cfg_.seq_len;
  // A row of attention scores per thread; more only after set_threads raised the count.
  if (s_.scores.size() < seq * k::threads()) s_.scores.assign(seq * k::threads(), 0.0f);
  dots_ = 0;
  last_block_ = 0;  // until this block is through (block_logits reads its rows)
  std::byte* xq = s_.xq.data();
  if (lens) {
    const std::size_t points = static_cast<std::size_t>(cfg_.n_layers) * (lens->inside ? 2 : 1);
    if (lens->rows.shape(0) != points || lens->rows.shape(1) != dim) lens->rows = xt::zeros<float>({points, dim});
  }
  const std::size_t per_layer = lens && lens->inside ? 2 : 1;

  // x_t = E[token_t]  (·√dim for Gemma;  + P[pos + t] for learned positions)
  embed(tokens, pos);

  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& lw = w_.layers[l];
    // ---- attention block ----
    // xb = Norm(x)   RMSNorm: x/√(mean(x²) + ε) ⊙ g;   LayerNorm: (x − μ)/√(σ² + ε) ⊙ g + b
    norm(s_.xb.data(), s_.x.data(), lw.rms_att, lw.att_norm_bias, N);
    // q = xb·Wqᵀ + bq,  k = xb·Wkᵀ + bk,  v = xb·Wvᵀ + bv;  then the position enters q and k (RoPE)
    qkv_and_position(lw, l, pos, N, xq);
    // att_t = softmax(q_t·Kᵀ · scale)·V per head, over the positions the layer sees, once k_t, v_t are stored
    attention(l, pos, n, kv, observer);
    // xb = att·Woᵀ + bo
    k::matmul(s_.xb.data(), s_.att.data(), lw.wo, N, xq);
    if (a.out_bias) k::add_bias(s_.xb.data(), lw.bo.f32(), N, dim);
    // xb = RMSNorm(xb) ⊙ g_post   (Gemma: the branch is normed before it joins the stream)
    if (a.post_norms) k::rmsnorm_rows(s_.xb.data(), s_.xb.data(), lw.post_att_norm.f32(), N, dim, cfg_.norm_eps);
    // x = x + xb
    k::add(s_.x.data(), s_.xb.data(), N * dim);
    if (lens && lens->inside) lens_row(lens, per_layer * l, n - 1);  // the lens inside the block: after attention

    // ---- feed-forward block ----
    // xb = Norm(x)
    norm(s_.xb.data(), s_.x.data(), lw.rms_ffn, lw.ffn_norm_bias, N);
    // xb = FFN(xb):  SwiGLU W2(SiLU(W1 xb) ⊙ W3 xb),  GeGLU W2(GELU(W1 xb) ⊙ W3 xb),  GELU MLP W2 GELU(W3 xb + b3) + b2
    ffn(lw, N, xq);
    // xb = RMSNorm(xb) ⊙ g_post   (Gemma)
    if (a.post_norms) k::rmsnorm_rows(s_.xb.data(), s_.xb.data(), lw.post_ffn_norm.f32(), N, dim, cfg_.norm_eps);
    // x = x + xb
    k::add(s_.x.data(), s_.xb.data(), N * dim);
    if (lens) lens_row(lens, per_layer * l + per_layer - 1, n - 1);  // the lens after block l + 1
  }

  // logits = Norm(x_last) · Wclsᵀ  (only the last position predicts;  c·tanh(logits/c) for Gemma 2)
  head(&s_.x(n - 1, 0), s_.logits.data());
  last_block_ = n;
  return {s_.logits.data(), s_.logits.size()};
}

std::span<const float> Transformer::forward_batch(std::span<const BatchRow> rows) {
  const int n = static_cast<int>(rows.size());
  if (n < 1 || n > max_block_) throw InputError("forward_batch: " + std::to_string(n) + " rows (expected 1.." + std::to_string(max_block_) + ")");
  const ArchDescription& a = cfg_.arch;
  const std::size_t dim = cfg_.dim, N = n, vocab = cfg_.vocab_size;
  for (const BatchRow& r : rows) {
    if (!r.kv) throw InputError("forward_batch: a row without a K/V store");
    if (r.pos < 0 || r.pos >= cfg_.seq_len)
      throw InputError("forward_batch: position " + std::to_string(r.pos) + " outside the context length " + std::to_string(cfg_.seq_len));
    if (r.lens) {
      const std::size_t points = static_cast<std::size_t>(cfg_.n_layers) * (r.lens->inside ? 2 : 1);
      if (r.lens->rows.shape(0) != points || r.lens->rows.shape(1) != dim) r.lens->rows = xt::zeros<float>({points, dim});
    }
  }
  const std::size_t seq = cfg_.seq_len;
  if (s_.scores.size() < seq * k::threads()) s_.scores.assign(seq * k::threads(), 0.0f);
  if (s_.heads.shape(0) < N) {  // the first batch this wide: its buffers, once
    s_.heads = xt::zeros<float>({N, dim});
    s_.batch_logits = xt::zeros<float>({N, vocab});
  }
  if (s_.row_spans.size() < N) s_.row_spans.resize(N);
  s_.row_dots.assign(N, 0);
  dots_ = 0;
  last_block_ = 0;
  std::byte* xq = s_.xq.data();

  // x_b = E[token_b]  (each at its own position for learned positions)
  for (std::size_t b = 0; b < N; ++b) embed_row(b, rows[b].token, rows[b].pos);

  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& lw = w_.layers[l];
    // ---- attention block: the products over all rows at once, attention per row over its own store ----
    norm(s_.xb.data(), s_.x.data(), lw.rms_att, lw.att_norm_bias, N);
    qkv_and_position(lw, l, 0, N, xq, rows);
    attention_rows(l, rows);
    k::matmul(s_.xb.data(), s_.att.data(), lw.wo, N, xq);
    if (a.out_bias) k::add_bias(s_.xb.data(), lw.bo.f32(), N, dim);
    if (a.post_norms) k::rmsnorm_rows(s_.xb.data(), s_.xb.data(), lw.post_att_norm.f32(), N, dim, cfg_.norm_eps);
    k::add(s_.x.data(), s_.xb.data(), N * dim);
    for (std::size_t b = 0; b < N; ++b)
      if (rows[b].lens && rows[b].lens->inside) lens_row(rows[b].lens, 2 * l, static_cast<int>(b));
    // ---- feed-forward block, over all rows ----
    norm(s_.xb.data(), s_.x.data(), lw.rms_ffn, lw.ffn_norm_bias, N);
    ffn(lw, N, xq);
    if (a.post_norms) k::rmsnorm_rows(s_.xb.data(), s_.xb.data(), lw.post_ffn_norm.f32(), N, dim, cfg_.norm_eps);
    k::add(s_.x.data(), s_.xb.data(), N * dim);
    for (std::size_t b = 0; b < N; ++b)
      if (rows[b].lens) lens_row(rows[b].lens, rows[b].lens->inside ? 2 * l + 1 : l, static_cast<int>(b));
  }

  // logits_b = Norm(x_b) · Wclsᵀ for every row: the classifier, the largest matrix, read once too
  for (std::size_t b = 0; b < N; ++b) {
    if (a.norm == NormKind::LayerNorm)
      k::layernorm_scalar(&s_.heads(b, 0), &s_.x(b, 0), w_.rms_final.f32(), w_.final_norm_bias.data ? w_.final_norm_bias.f32() : nullptr,
                          dim, cfg_.norm_eps);
    else
      k::rmsnorm(&s_.heads(b, 0), &s_.x(b, 0), w_.rms_final.f32(), dim, cfg_.norm_eps);
  }
  k::matmul(s_.batch_logits.data(), s_.heads.data(), w_.wcls, N, xq);
  if (cfg_.final_softcap > 0) k::softcap(s_.batch_logits.data(), N * vocab, cfg_.final_softcap);
  for (const std::int64_t d : s_.row_dots) dots_ += d;
  return {s_.batch_logits.data(), N * vocab};
}

// Each row writes its k, v into its own store, then attends over what that store holds (the solo decode
// path: one query position). Rows go to the threads; a row whose trace observes attention runs on this
// thread, as solo decode's observed position does (what its observer throws reaches the caller).
void Transformer::attention_rows(int l, std::span<const BatchRow> rows) {
  const std::size_t N = rows.size(), seq = cfg_.seq_len;
  for (std::size_t b = 0; b < N; ++b) {
    rows[b].kv->write(l, rows[b].pos, 1, &s_.k(b, 0), &s_.v(b, 0));
    s_.row_spans[b].clear();
    rows[b].kv->view(l, s_.row_spans[b]);
  }
  struct Ctx {
    Transformer* self;
    AttentionShape shape;
    const AttentionRule* rule;
    std::span<const BatchRow> rows;
    int layer;
    std::size_t seq;
    bool observed_here;  // pass 1: observed rows only (this thread); pass 2: the rest (threads)
  } ctx{this, cfg_.attention_shape(), &s_.layer_rule[static_cast<std::size_t>(l)], rows, l, seq, true};
  auto one = [](const void* p, std::size_t b, int slot) {
    const auto& c = *static_cast<const Ctx*>(p);
    RunState& s = c.self->s_;
    const BatchRow& r = c.rows[b];
    if ((r.observer != nullptr) != c.observed_here) return;
    s.row_dots[b] += attend(c.shape, *c.rule, s.row_spans[b], c.layer, r.pos, &s.q(b, 0), &s.att(b, 0), s.scores.data() + static_cast<std::size_t>(slot) * c.seq,
                           r.observer);
  };
  for (std::size_t b = 0; b < N; ++b) one(&ctx, b, 0);
  ctx.observed_here = false;
  const std::int64_t macs = static_cast<std::int64_t>(N) * cfg_.q_dim() * (rows[0].pos + 1);
  const int slots = static_cast<int>(s_.scores.size() / seq);
  if (N >= 2 && k::threads() >= 2 && slots >= k::threads() && macs >= (1 << 14)) k::pool().run(N, one, &ctx);
  else
    for (std::size_t b = 0; b < N; ++b) one(&ctx, b, 0);
}

void Transformer::block_logits(int row, float* out) {
  if (row < 0 || row >= last_block_)
    throw InputError("block_logits: row " + std::to_string(row) + " outside the last block of " + std::to_string(last_block_) + " positions");
  head(&s_.x(row, 0), out);
}

void Transformer::lens_row(LensCapture* lens, std::size_t point, int row) const {
  std::copy_n(&s_.x(row, 0), static_cast<std::size_t>(cfg_.dim), &lens->rows(point, 0));
}

void Transformer::embed(std::span<const std::int32_t> tokens, int pos) {
  for (std::size_t t = 0; t < tokens.size(); ++t) embed_row(t, tokens[t], pos + static_cast<int>(t));
}

// Row t of the block: x_t = E[token] (·√dim for Gemma; + P[p] for learned positions), p its position.
void Transformer::embed_row(std::size_t t, std::int32_t token, int p) {
  const ArchDescription& a = cfg_.arch;
  const std::size_t dim = cfg_.dim;
  if (token < 0 || token >= cfg_.vocab_size)
    throw InputError("forward: token id " + std::to_string(token) + " outside the vocabulary 0.." + std::to_string(cfg_.vocab_size - 1));
  float* x = &s_.x(t, 0);
  // x = E[token]
  k::embedding_row(x, w_.token_embedding, token);
  // x = x·√dim   (Gemma: the embedding is shared with the classifier, so it is stored small)
  if (a.embed_scale) k::scale(x, dim, std::sqrt(static_cast<float>(dim)));
  // x = x + P[pos]   (learned absolute positions: a table as long as the training context)
  if (a.position == PositionKind::Learned) {
    if (p >= cfg_.train_ctx)
      throw InputError("forward: position " + std::to_string(p) + " is past the learned position table of " +
                       std::to_string(cfg_.train_ctx) + " positions");
    float* row = &s_.xb(t, 0);
    k::embedding_row(row, w_.position_embedding, p);
    k::add(x, row, dim);
  }
}

void Transformer::norm(float* out, const float* x, const Tensor& gain, const Tensor& bias, std::size_t rows) {
  if (cfg_.arch.norm == NormKind::LayerNorm)
    k::layernorm_rows(out, x, gain.f32(), bias.data ? bias.f32() : nullptr, rows, cfg_.dim, cfg_.norm_eps);
  else
    k::rmsnorm_rows(out, x, gain.f32(), rows, cfg_.dim, cfg_.norm_eps);
}

void Transformer::qkv_and_position(const LayerWeights& lw, int layer, int pos, std::size_t N, std::byte* xq,
                                   std::span<const BatchRow> batch) {
  const ArchDescription& a = cfg_.arch;
  const std::size_t hs = cfg_.head_size(), qd = cfg_.q_dim(), kvd = cfg_.kv_dim();
  if (a.fused_qkv) {
    // [q | k | v] = xb·Wqkvᵀ + bqkv, then split into the three
    const std::size_t w3 = qd + 2 * kvd;
    k::matmul(s_.qkv.data(), s_.xb.data(), lw.wqkv, N, xq);
    if (lw.bqkv.data) k::add_bias(s_.qkv.data(), lw.bqkv.f32(), N, w3);
    for (std::size_t t = 0; t < N; ++t) {
      const float* r = &s_.qkv(t, 0);
      std::copy(r, r + qd, &s_.q(t, 0));
      std::copy(r + qd, r + qd + kvd, &s_.k(t, 0));
      std::copy(r + qd + kvd, r + w3, &s_.v(t, 0));
    }
  } else {
    // (one call: xb is rounded once and the three matrices' rows are shared out together)
    const k::Product qkv[] = {{s_.q.data(), &lw.wq}, {s_.k.data(), &lw.wk}, {s_.v.data(), &lw.wv}};
    k::matmuls(qkv, s_.xb.data(), N, xq);
    if (a.qkv_bias) {
      k::add_bias(s_.q.data(), lw.bq.f32(), N, qd);
      k::add_bias(s_.k.data(), lw.bk.f32(), N, kvd);
      k::add_bias(s_.v.data(), lw.bv.f32(), N, kvd);
    }
  }
  // q_h = RMSNorm(q_h) ⊙ g_q,  k_h = RMSNorm(k_h) ⊙ g_k  over each head (Qwen3, Gemma 3), before RoPE
  if (a.qk_norm) {
    k::rmsnorm_rows(s_.q.data(), s_.q.data(), lw.q_norm.f32(), N * cfg_.n_heads, hs, cfg_.norm_eps);
    k::rmsnorm_rows(s_.k.data(), s_.k.data(), lw.k_norm.f32(), N * cfg_.n_kv_heads, hs, cfg_.norm_eps);
  }
  // RoPE: rotate each (q, k) pair by the angle of its position (learned positions entered at the embedding);
  // a batch's rows each at their own sequence's position
  if (a.position == PositionKind::Learned) return;
  const auto& table = s_.rope[static_cast<std::size_t>(s_.layer_rope[layer])];
  if (batch.empty()) rotate(s_.q.data(), s_.k.data(), &table(pos, 0), N);
  else
    for (std::size_t b = 0; b < N; ++b) rotate(&s_.q(b, 0), &s_.k(b, 0), &table(batch[b].pos, 0), 1);
}

void Transformer::rotate(float* q, float* k, const float* cos_sin, std::size_t N) const {
  const std::size_t hs = cfg_.head_size(), qd = cfg_.q_dim(), kvd = cfg_.kv_dim();
  if (cfg_.arch.position == PositionKind::RopeNeox)
    k::rope_neox_rows(q, qd, k, kvd, cos_sin, N, hs, cfg_.rot_dims());  // pairs (i, i + n_rot/2)
  else
    k::rope_rows(q, qd, k, kvd, cos_sin, N, hs);  // pairs (2i, 2i + 1)
}

void Transformer::attention(int l, int pos, int n, KvStore& kv, AttentionObserver* observer) {
  const AttentionShape shape = cfg_.attention_shape();
  const AttentionRule& rule = s_.layer_rule[static_cast<std::size_t>(l)];
  const std::size_t seq = cfg_.seq_len;
  const int slots = static_cast<int>(s_.scores.size() / seq);
  // (query heads share kv heads in groups; the weights of the block's last position are observed)
  if (kv.evicts()) {
    // A window: storing a later position may evict one an earlier position attends to.
    for (int t = 0; t < n; ++t) {
      kv.write(l, pos + t, 1, &s_.k(t, 0), &s_.v(t, 0));
      s_.spans.clear();
      kv.view(l, s_.spans);
      dots_ += attend(shape, rule, s_.spans, l, pos + t, &s_.q(t, 0), &s_.att(t, 0), s_.scores.data(), t == n - 1 ? observer : nullptr);
    }
  } else {
    // Nothing is evicted: the whole block is stored, then its positions attend at once (causally,
    // each to the positions up to its own), spread over the threads.
    for (int t = 0; t < n; ++t) kv.write(l, pos + t, 1, &s_.k(t, 0), &s_.v(t, 0));
    s_.spans.clear();
    kv.view(l, s_.spans);
    dots_ += attend_block(shape, rule, s_.spans, l, pos, n, s_.q.data(), s_.att.data(), s_.scores.data(), seq, slots, observer);
  }
}

void Transformer::ffn(const LayerWeights& lw, std::size_t N, std::byte* xq) {
  const ArchDescription& a = cfg_.arch;
  const std::size_t hid = cfg_.hidden_dim, dim = cfg_.dim;
  if (a.ffn == FfnKind::GeluMlp) {
    // hb = GELU(xb·W3ᵀ + b3)
    k::matmul(s_.hb.data(), s_.xb.data(), lw.w3, N, xq);
    if (a.ffn_bias) k::add_bias(s_.hb.data(), lw.b3.f32(), N, hid);
    k::gelu(s_.hb.data(), N * hid, cfg_.gelu);
  } else {
    // hb = xb·W1ᵀ (gate),  hb2 = xb·W3ᵀ (up)
    if (a.fused_gate_up) {
      // [gate | up] = xb·W13ᵀ, then split
      k::matmul(s_.gu.data(), s_.xb.data(), lw.w13, N, xq);
      for (std::size_t t = 0; t < N; ++t) {
        const float* r = &s_.gu(t, 0);
        std::copy(r, r + hid, &s_.hb(t, 0));
        std::copy(r + hid, r + 2 * hid, &s_.hb2(t, 0));
      }
    } else {
      const k::Product gate_up[] = {{s_.hb.data(), &lw.w1}, {s_.hb2.data(), &lw.w3}};
      k::matmuls(gate_up, s_.xb.data(), N, xq);
    }
    if (a.ffn == FfnKind::GeGLU)
      k::geglu(s_.hb.data(), s_.hb2.data(), N * hid, cfg_.gelu);  // hb = GELU(hb) ⊙ hb2
    else
      k::swiglu(s_.hb.data(), s_.hb2.data(), N * hid);  // hb = SiLU(hb) ⊙ hb2,  SiLU(z) = z·σ(z)
  }
  // xb = hb·W2ᵀ + b2
  k::matmul(s_.xb.data(), s_.hb.data(), lw.w2, N, xq);
  if (a.ffn_bias) k::add_bias(s_.xb.data(), lw.b2.f32(), N, dim);
}

void Transformer::head(const float* x, float* out) {
  const std::size_t dim = cfg_.dim;
  // last = Norm(x)
  if (cfg_.arch.norm == NormKind::LayerNorm)
    k::layernorm_scalar(s_.last.data(), x, w_.rms_final.f32(), w_.final_norm_bias.data ? w_.final_norm_bias.f32() : nullptr, dim,
                        cfg_.norm_eps);
  else
    k::rmsnorm(s_.last.data(), x, w_.rms_final.f32(), dim, cfg_.norm_eps);
  // logits = last · Wclsᵀ
  k::matmul(out, s_.last.data(), w_.wcls, 1, s_.xq.data());
  // logits = c·tanh(logits/c)   (Gemma 2's final soft-cap)
  if (cfg_.final_softcap > 0) k::softcap(out, static_cast<std::size_t>(cfg_.vocab_size), cfg_.final_softcap);
}

void Transformer::remove_positions(KvStore& kv, int p0, int p1) {
  if (p0 < 0 || p1 < p0 || p1 > cfg_.seq_len)
    throw InputError("remove_positions: range " + std::to_string(p0) + ".." + std::to_string(p1) + " (expected 0 <= p0 <= p1 <= " +
                     std::to_string(cfg_.seq_len) + ")");
  if (p1 == p0) return;
  if (!shift_supported())
    throw ConfigError("context shift needs rotary positions, but architecture " + cfg_.architecture +
                      " learns absolute ones: nothing can be re-rotated (use --context-policy truncate-left)");
  kv.remove(p0, p1);
  if (p1 - p0 >= cfg_.seq_len) return;  // nothing can follow: positions stop at seq_len - 1
  // R(-d): cos(dθ), -sin(dθ) for each pair; the table's row d holds cos, sin of d·θ_i. Each layer's own table.
  const std::size_t hs = cfg_.head_size(), kvd = cfg_.kv_dim();
  std::vector<std::vector<float>> back(s_.rope.size(), std::vector<float>(hs));
  for (std::size_t r = 0; r < s_.rope.size(); ++r)
    for (std::size_t i = 0; i < hs; i += 2) {
      back[r][i] = s_.rope[r](p1 - p0, i);
      back[r][i + 1] = -s_.rope[r](p1 - p0, i + 1);
    }
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const float* cs = back[static_cast<std::size_t>(s_.layer_rope[l])].data();
    s_.spans.clear();
    kv.view(l, s_.spans);
    for (const auto& sp : s_.spans)
      for (int p = std::max(sp.first, p0); p < sp.first + sp.count; ++p) {
        float* key = sp.k + static_cast<std::size_t>(p - sp.first) * kvd;
        if (cfg_.arch.position == PositionKind::RopeNeox) k::rope_neox(key, cs, kvd, hs, cfg_.rot_dims());
        else k::rope(key, cs, kvd, hs);
      }
  }
}

}  // namespace glassbox
