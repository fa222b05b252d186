// The llama transformer: run state allocated once, and the forward pass over a block of positions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "glassbox/forward/attention.hpp"
#include "glassbox/model/config.hpp"
#include "glassbox/model/weights.hpp"

namespace glassbox {

// Activations for a block of up to max_block positions, allocated once.
struct RunState {
  xt::xtensor<float, 2> x;        // (max_block, dim)         residual stream
  xt::xtensor<float, 2> xb;       // (max_block, dim)         normalized / branch output
  xt::xtensor<float, 2> q;        // (max_block, n_heads * head_size)
  xt::xtensor<float, 2> k;        // (max_block, kv_dim)
  xt::xtensor<float, 2> v;        // (max_block, kv_dim)
  xt::xtensor<float, 2> att;      // (max_block, n_heads * head_size) attention output
  xt::xtensor<float, 2> hb;       // (max_block, hidden_dim)  gate
  xt::xtensor<float, 2> hb2;      // (max_block, hidden_dim)  up
  xt::xtensor<float, 1> last;     // (dim)                    final-normed last position
  xt::xtensor<float, 1> logits;   // (vocab_size)
  xt::xtensor<float, 2> rope;     // (seq_len, head_size)     cos, sin of each pair's angle
  std::vector<float> scores;      // (threads, seq_len) one head's attention weights per thread
  std::vector<KvSpan> spans;      // the K/V store's view of one layer
  // (max_block, widest row in the weights' activation type): a matmul's input rounded the way
  // llama.cpp rounds it before a quantized or F16 dot product (Q8_0 / Q8_K blocks, fp16).
  std::vector<std::byte> xq;
};

class Transformer {
 public:
  // max_block bounds how many prompt positions one prefill call processes at once. `cfg` and `w`
  // (views into a ModelSource's mapped file) must outlive the Transformer.
  Transformer(const Config& cfg, const Weights& w, int max_block = 64);
  const Config& config() const { return cfg_; }
  int max_block() const { return max_block_; }
  // Runs tokens[0..n) at positions pos..pos+n-1 (n <= max_block) through every layer, storing
  // K/V in `kv` position by position (each position attends to what the store holds, up to itself, once its own
  // K/V is in), and returns the logits after the last position. `observer`, when given, receives
  // the attention weights of the block's last position.
  std::span<const float> forward(std::span<const std::int32_t> tokens, int pos, KvStore& kv,
                                 AttentionObserver* observer = nullptr);
  // Query·key dot products of the last forward call (positions attended × heads × layers).
  std::int64_t attention_dots() const { return dots_; }
  // Context shift: drops positions [p0, p1) from `kv`, moves the later ones down by d = p1 - p0 and
  // re-rotates their keys by -d (RoPE is a rotation by pos·θ_i, so R(-d)·R(p) = R(p - d)).
  void remove_positions(KvStore& kv, int p0, int p1);
  // Test-only: changes RoPE's base θ (a deliberate perturbation the golden suite must catch).
  void set_rope_theta(float theta);

 private:
  const Config& cfg_;
  const Weights& w_;
  int max_block_;
  RunState s_;
  std::int64_t dots_ = 0;
};

}  // namespace glassbox
