// The model: llama2.c checkpoint loading (memory-mapped, validated) and the llama forward pass.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include <xtensor/xadapt.hpp>
#include <xtensor/xtensor.hpp>

#include "glassbox/attention.hpp"

namespace glassbox {

// Immutable hyper-parameters, read from the checkpoint header.
struct Config {
  int dim = 0;         // residual stream width
  int hidden_dim = 0;  // SwiGLU inner width
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (grouped-query attention when < n_heads)
  int vocab_size = 0;
  int seq_len = 0;     // context length
  bool shared_classifier = true;  // classifier reuses the token embedding
  int format_version = 0;         // 0: llama2.c legacy header, 1: "ak42" version 1 export
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;

  int head_size() const { return dim / n_heads; }
  int kv_dim() const { return n_kv_heads * head_size(); }
  AttentionShape attention_shape() const { return {n_layers, n_heads, n_kv_heads, head_size(), seq_len}; }
};

// A read-only memory map of a file.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws ModelError
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// A read-only N-d view over floats owned by someone else (the mapped file).
template <std::size_t N>
using ConstTensor = decltype(xt::adapt(std::declval<const float*>(), std::size_t{}, xt::no_ownership(),
                                       std::array<std::size_t, N>{}));

// Read-only views over the mapped file; nothing is copied.
struct Weights {
  ConstTensor<2> token_embedding;  // (vocab_size, dim)
  ConstTensor<2> rms_att;          // (n_layers, dim)
  ConstTensor<3> wq;               // (n_layers, n_heads * head_size, dim)
  ConstTensor<3> wk;               // (n_layers, kv_dim, dim)
  ConstTensor<3> wv;               // (n_layers, kv_dim, dim)
  ConstTensor<3> wo;               // (n_layers, dim, n_heads * head_size)
  ConstTensor<2> rms_ffn;          // (n_layers, dim)
  ConstTensor<3> w1;               // (n_layers, hidden_dim, dim)
  ConstTensor<3> w2;               // (n_layers, dim, hidden_dim)
  ConstTensor<3> w3;               // (n_layers, hidden_dim, dim)
  ConstTensor<1> rms_final;        // (dim)
  ConstTensor<2> wcls;             // (vocab_size, dim)
};

// A checkpoint: the mapped file, its config and the weight views into it.
class Checkpoint {
 public:
  // Validates the header and the file size in full before any weight is touched.
  explicit Checkpoint(const std::filesystem::path& path);
  const Config& config() const { return config_; }
  const Weights& weights() const { return *weights_; }
  const std::filesystem::path& path() const { return path_; }
  const MappedFile& file() const { return *file_; }

 private:
  std::filesystem::path path_;
  std::unique_ptr<MappedFile> file_;
  Config config_;
  std::unique_ptr<Weights> weights_;
};

// Reads and checks only the header (used by the loader and by tests of bad headers).
Config read_config(const std::filesystem::path& path, const std::byte* data, std::size_t size);

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
};

// The llama transformer: forward a block of tokens at consecutive positions.
class Transformer {
 public:
  // max_block bounds how many prompt positions one prefill call processes at once.
  explicit Transformer(const Checkpoint& ckpt, int max_block = 64);
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
