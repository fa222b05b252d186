// The transformer of every supported architecture: run state allocated once, and the forward pass over a
// block of positions, switched by the model's architecture description (forward/arch.hpp).
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
  xt::xtensor<float, 2> q;        // (max_block, q_dim)       q_dim = n_heads * head_size
  xt::xtensor<float, 2> k;        // (max_block, kv_dim)
  xt::xtensor<float, 2> v;        // (max_block, kv_dim)
  xt::xtensor<float, 2> qkv;      // (max_block, q_dim + 2 kv_dim)  a fused projection's output (empty otherwise)
  xt::xtensor<float, 2> att;      // (max_block, q_dim)       attention output
  xt::xtensor<float, 2> hb;       // (max_block, hidden_dim)  gate (or up, for a GELU MLP)
  xt::xtensor<float, 2> hb2;      // (max_block, hidden_dim)  up
  xt::xtensor<float, 2> gu;       // (max_block, 2 hidden_dim) a fused gate|up projection's output (empty otherwise)
  xt::xtensor<float, 1> last;     // (dim)                    final-normed last position
  xt::xtensor<float, 1> logits;   // (vocab_size)
  // (distinct RoPE bases, seq_len, head_size): cos, sin of each pair's angle, pair i at [2i], [2i+1]
  // for i < n_rot/2 (past n_rot: cos 1, sin 0, so an adjacent-pair rotation leaves those dims alone).
  std::vector<xt::xtensor<float, 2>> rope;
  std::vector<int> layer_rope;           // (n_layers) which table a layer rotates with
  std::vector<AttentionRule> layer_rule; // (n_layers) scale, soft-cap, window
  std::vector<float> scores;      // (threads, seq_len) one head's attention weights per thread
  std::vector<KvSpan> spans;      // the K/V store's view of one layer
  // Batched decode only (forward_batch), sized on its first call: each row's final-normed residual and logits,
  // each row's view of its own store.
  xt::xtensor<float, 2> heads;    // (rows, dim)
  xt::xtensor<float, 2> batch_logits;  // (rows, vocab_size)
  std::vector<std::vector<KvSpan>> row_spans;  // (rows) spans of one layer of each row's store
  std::vector<std::int64_t> row_dots;          // (rows) attention dot products of the current layer
  // (max_block, widest row in the weights' activation type): a matmul's input rounded the way
  // llama.cpp rounds it before a quantized or F16 dot product (Q8_0 / Q8_K blocks, fp16).
  std::vector<std::byte> xq;
};

// Where a logit lens reads the residual stream: the block's last position's row x after every layer's
// block and, with `inside`, also after its attention (before the FFN). Filled by forward() when handed one.
struct LensCapture {
  bool inside = false;
  // (points, dim): without inside, row l is after block l; with it, row 2l after block l's attention and
  // row 2l + 1 after block l (0-based l).
  xt::xtensor<float, 2> rows;
  std::size_t points() const { return rows.shape(0); }
};

// One row of a batched decode step: a sequence's next token at its position, against that sequence's own
// K/V store (and, when its trace asks, its own attention observer and logit-lens capture).
struct BatchRow {
  std::int32_t token = 0;
  int pos = 0;
  KvStore* kv = nullptr;
  AttentionObserver* observer = nullptr;
  LensCapture* lens = nullptr;
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
  // `lens`, when given, receives the residual rows a logit lens reads (sized here on first use).
  std::span<const float> forward(std::span<const std::int32_t> tokens, int pos, KvStore& kv,
                                 AttentionObserver* observer = nullptr, LensCapture* lens = nullptr);
  // BATCHED DECODE: one step of rows.size() <= max_block sequences at once. Row b runs rows[b].token at
  // rows[b].pos through every layer against its own store rows[b].kv; the matrix products take all rows
  // together, so each weight matrix is read once per step for the whole batch (decode is memory-bound: B
  // sequences cost about one), while RoPE, attention and the stores are each row's own. Each row's logits
  // are those of forward({token}, pos, *kv) on that sequence alone, bit for bit (the products keep every
  // row's sum order; attention runs the solo path per row). Returns rows.size() rows of vocab_size logits,
  // valid until the next forward call. No block_logits afterwards.
  std::span<const float> forward_batch(std::span<const BatchRow> rows);
  // Row b's attention dot products in the last forward_batch.
  std::int64_t row_attention_dots(std::size_t b) const { return b < s_.row_dots.size() ? s_.row_dots[b] : 0; }
  // The output head on one residual row: out = Norm_final(x)·Wclsᵀ (soft-capped for Gemma 2), what
  // forward() applies to the last position; the logit lens applies it to earlier rows. `out` holds
  // vocab_size floats. Uses the run state's scratch: not during a forward().
  void head(const float* x, float* out);
  // The logits of position `row` (0-based) of the last forward() block: the output head on that row of the
  // residual stream, what forward() returns for the block's last position (the same row through the same
  // kernels), for every position of the block. Speculative decoding verifies all drafted tokens with one
  // forward and reads each position's prediction here. InputError for a row outside the last block.
  // Uses the run state's scratch: not during a forward().
  void block_logits(int row, float* out);
  // Query·key dot products of the last forward call (positions attended × heads × layers).
  std::int64_t attention_dots() const { return dots_; }
  // Context shift: drops positions [p0, p1) from `kv`, moves the later ones down by d = p1 - p0 and
  // re-rotates their keys by -d (RoPE is a rotation by pos·θ_i, so R(-d)·R(p) = R(p - d)). A model with
  // learned positions has nothing to re-rotate: ConfigError (shift_supported() says so beforehand).
  void remove_positions(KvStore& kv, int p0, int p1);
  bool shift_supported() const { return cfg_.arch.position != PositionKind::Learned; }
  // Test-only: changes RoPE's base θ (a deliberate perturbation the golden suite must catch).
  void set_rope_theta(float theta);

 private:
  // The steps of one forward pass, in the order the paper draws them (transformer.cpp).
  void embed(std::span<const std::int32_t> tokens, int pos);
  void embed_row(std::size_t t, std::int32_t token, int p);
  void norm(float* out, const float* x, const Tensor& gain, const Tensor& bias, std::size_t rows);
  void qkv_and_position(const LayerWeights& lw, int layer, int pos, std::size_t n, std::byte* xq,
                        std::span<const BatchRow> batch = {});
  void attention(int layer, int pos, int n, KvStore& kv, AttentionObserver* observer);
  void ffn(const LayerWeights& lw, std::size_t n, std::byte* xq);
  void lens_row(LensCapture* lens, std::size_t point, int row) const;
  void attention_rows(int layer, std::span<const BatchRow> rows);
  void rotate(float* q, float* k, const float* cos_sin, std::size_t n) const;

  const Config& cfg_;
  const Weights& w_;
  int max_block_;
  RunState s_;
  std::int64_t dots_ = 0;
  int last_block_ = 0;  // positions in the last forward() block (block_logits' rows)
};

}  // namespace glassbox
