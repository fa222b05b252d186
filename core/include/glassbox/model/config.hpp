// The model's immutable hyper-parameters, whichever file format they came from.
#pragma once
#include <string>

#include "glassbox/forward/attention.hpp"

namespace glassbox {

// How RoPE's frequencies are adjusted for long contexts (GGUF `llama.rope.scaling.*` keys and
// the `rope_freqs.weight` tensor of Llama 3.1+ files).
struct RopeScaling {
  std::string type = "none";  // "none" | "linear" (positions divided by factor)
  float factor = 1.0f;
};

struct Config {
  std::string architecture = "llama";
  int dim = 0;         // residual stream width
  int hidden_dim = 0;  // SwiGLU inner width
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (grouped-query attention when < n_heads)
  int vocab_size = 0;
  int seq_len = 0;     // context length
  bool shared_classifier = true;  // classifier reuses the token embedding
  int format_version = 0;         // llama2.c: 0 legacy header, 1 "ak42" v1; GGUF: its version (2, 3)
  std::string format = "llama2c"; // "llama2c" | "gguf"
  float rope_theta = 10000.0f;    // RoPE base θ
  RopeScaling rope_scaling;
  float norm_eps = 1e-5f;         // RMSNorm ε

  int head_size() const { return dim / n_heads; }
  int kv_dim() const { return n_kv_heads * head_size(); }
  AttentionShape attention_shape() const { return {n_layers, n_heads, n_kv_heads, head_size(), seq_len}; }
};

}  // namespace glassbox
