// The model's immutable hyper-parameters, whichever file format they came from.
#pragma once
#include <string>
#include <vector>

#include "glassbox/forward/arch.hpp"
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
  ArchDescription arch;  // how its forward pass differs from llama's (forward/arch.hpp)
  int dim = 0;         // residual stream width
  int hidden_dim = 0;  // feed-forward inner width
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (grouped-query attention when < n_heads)
  int head_dim = 0;    // width of one head; 0: dim / n_heads (GGUF attention.key_length may differ)
  int n_rot = 0;       // leading dims of a head that RoPE rotates; 0: the whole head
  int vocab_size = 0;
  int seq_len = 0;     // context length of the run (the CLI may lower it below train_ctx)
  int train_ctx = 0;   // context length the model was trained for (rows of a learned position table)
  bool shared_classifier = true;  // classifier reuses the token embedding
  int format_version = 0;         // llama2.c: 0 legacy header, 1 "ak42" v1; GGUF: its version (2, 3)
  std::string format = "llama2c"; // "llama2c" | "gguf"
  float rope_theta = 10000.0f;    // RoPE base θ
  RopeScaling rope_scaling;
  float norm_eps = 1e-5f;         // RMSNorm (or LayerNorm) ε
  float attn_scale = 0;           // scores = q·k · attn_scale; 0: 1/√head_size
  float attn_softcap = 0;         // scores = c·tanh(scores/c) when c > 0 (Gemma 2)
  float final_softcap = 0;        // logits = c·tanh(logits/c) when c > 0 (Gemma 2)
  int sliding_window = 0;         // width of the windowed layers' window (arch.window says which layers)
  float local_rope_theta = 0;     // RoPE base of the windowed layers when it differs (Gemma 3: 10000); 0: rope_theta
  GeluKind gelu = GeluKind::Tanh; // a run option: llama.cpp's fp16 table reproduces its goldens more closely

  int head_size() const { return head_dim > 0 ? head_dim : dim / n_heads; }
  int rot_dims() const { return n_rot > 0 ? n_rot : head_size(); }
  int q_dim() const { return n_heads * head_size(); }
  float attention_scale() const;
  // Layer l's window and RoPE base, from the architecture's pattern.
  LayerRule layer_rule(int l) const;
  int kv_dim() const { return n_kv_heads * head_size(); }
  AttentionShape attention_shape() const { return {n_layers, n_heads, n_kv_heads, head_size(), seq_len}; }
};

}  // namespace glassbox
