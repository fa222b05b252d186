// The Attention plugin interface: owns one sequence's K/V storage and computes attention over it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace glassbox {

// The dimensions an attention module is built for (named as in the model config).
struct AttentionShape {
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads; n_heads / n_kv_heads queries share one (GQA)
  int head_size = 0;
  int seq_len = 0;     // longest sequence the model supports
  int q_dim() const { return n_heads * head_size; }
  int kv_dim() const { return n_kv_heads * head_size; }
};

struct KvUsage {
  std::int64_t tokens = 0;    // positions currently held
  std::int64_t capacity = 0;  // positions it can hold
  std::int64_t bytes = 0;     // bytes allocated for K and V
};

class Attention {
 public:
  virtual ~Attention() = default;
  // Stores k, v for positions pos .. pos+n-1 of `layer`, then writes each position's
  // causal attention output softmax(q·Kᵀ/√head_size)·V over positions 0..its own.
  //   q:   (n, n_heads * head_size)   already rotated (RoPE)
  //   k,v: (n, n_kv_heads * head_size) k already rotated
  //   out: (n, n_heads * head_size)
  virtual void forward(int layer, int pos, int n, std::span<const float> q, std::span<const float> k,
                       std::span<const float> v, std::span<float> out) = 0;
  virtual KvUsage usage() const = 0;
  // Forgets every stored position (a new sequence).
  virtual void clear() = 0;
};

}  // namespace glassbox
