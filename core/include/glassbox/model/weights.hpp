// The weights as typed, read-only views over the mapped model file (nothing is copied or
// converted: a Q4_0 matrix stays Q4_0 in memory). Shapes are {rows, cols} = {outputs, inputs}.
#pragma once
#include <string>
#include <vector>

#include "glassbox/model/dtype.hpp"

namespace glassbox {

// Shapes name q_dim = n_heads·head_size and kv_dim = n_kv_heads·head_size. A tensor an architecture does
// not have (or a file left out, where the architecture allows it) is a null view: data == nullptr.
struct LayerWeights {
  Tensor rms_att;        // (dim)                       F32  attention norm gain
  Tensor att_norm_bias;  // (dim)                       F32  LayerNorm β (GPT-2)
  Tensor wq;             // (q_dim, dim)
  Tensor wk;             // (kv_dim, dim)
  Tensor wv;             // (kv_dim, dim)
  Tensor wqkv;           // (q_dim + 2·kv_dim, dim)     fused Q | K | V rows (GPT-2, Phi-3), instead of wq, wk, wv
  Tensor bq, bk, bv;     // (q_dim), (kv_dim), (kv_dim) F32  (Qwen2)
  Tensor bqkv;           // (q_dim + 2·kv_dim)          F32  fused biases (GPT-2)
  Tensor q_norm, k_norm; // (head_size)                 F32  per-head RMSNorm gains (Qwen3, Gemma3)
  Tensor wo;             // (dim, q_dim)
  Tensor bo;             // (dim)                       F32  (GPT-2)
  Tensor post_att_norm;  // (dim)                       F32  norm of the attention branch's output (Gemma2/3)
  Tensor rms_ffn;        // (dim)                       F32  feed-forward norm gain
  Tensor ffn_norm_bias;  // (dim)                       F32  LayerNorm β (GPT-2)
  Tensor w1;             // (hidden_dim, dim)            gate
  Tensor w2;             // (dim, hidden_dim)            down
  Tensor w3;             // (hidden_dim, dim)            up
  Tensor w13;            // (2·hidden_dim, dim)          fused gate | up rows (Phi-3), instead of w1, w3
  Tensor b2;             // (dim)                       F32  down bias (GPT-2)
  Tensor b3;             // (hidden_dim)                F32  up bias (GPT-2)
  Tensor post_ffn_norm;  // (dim)                       F32  norm of the feed-forward branch's output (Gemma2/3)
};

struct Weights {
  Tensor token_embedding;            // (vocab_size, dim)   one row dequantized per lookup
  Tensor position_embedding;         // (train_ctx, dim)    learned positions (GPT-2); null otherwise
  std::vector<LayerWeights> layers;  // (n_layers)
  Tensor rms_final;                  // (dim)               F32
  Tensor final_norm_bias;            // (dim)               F32  LayerNorm β (GPT-2)
  Tensor wcls;                       // (vocab_size, dim)   the embedding itself when shared
  Tensor rope_freqs;                 // (n_rot / 2)         F32 frequency divisors; data == nullptr when absent

  // Calls f(tensor) for every tensor present (a shared classifier once).
  template <class F>
  void for_each(F&& f) const {
    for (const Tensor* t : {&token_embedding, &position_embedding, &rms_final, &final_norm_bias, &rope_freqs})
      if (t->data) f(*t);
    if (wcls.data && wcls.data != token_embedding.data) f(wcls);
    for (const auto& l : layers)
      for (const Tensor* t : {&l.rms_att, &l.att_norm_bias, &l.wq, &l.wk, &l.wv, &l.wqkv, &l.bq, &l.bk, &l.bv, &l.bqkv, &l.q_norm,
                              &l.k_norm, &l.wo, &l.bo, &l.post_att_norm, &l.rms_ffn, &l.ffn_norm_bias, &l.w1, &l.w2, &l.w3,
                              &l.w13, &l.b2, &l.b3, &l.post_ffn_norm})
        if (t->data) f(*t);
  }

  // "Q8_0:32, F16:5, F32:11": how many tensors of each type, for the trace header and `inspect`.
  std::string type_summary() const;
  // Parameters stored (a shared classifier counted once).
  std::int64_t parameter_count() const;
};

}  // namespace glassbox
