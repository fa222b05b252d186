// The llama transformer: run state allocated once, and the forward pass over a block of positions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "glassbox/attention.hpp"
#include "glassbox/config.hpp"
#include "glassbox/weights.hpp"

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
  // Runs tokens[0..n) at positions pos..pos+n-1 (n <= max_block) through every layer,
  // storing K/V through `attention`, and returns the logits after the last position.
  std::span<const float> forward(std::span<const std::int32_t> tokens, int pos, Attention& attention);
  // Test-only: changes RoPE's base θ (a deliberate perturbation the golden suite must catch).
  void set_rope_theta(float theta);

 private:
  const Config& cfg_;
  const Weights& w_;
  int max_block_;
  RunState s_;
};

}  // namespace glassbox
