// The attention seam: K/V *storage* is the plugin (KvStore); the arithmetic (scores, softmax, weighted
// sum, GQA) and RoPE with its re-rotation stay in core (transformer.cpp, attention.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "glassbox/params.hpp"

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

// A run of held positions first .. first+count-1 whose keys and values sit in consecutive rows of
// kv_dim floats. Keys are stored already rotated (RoPE) for their position.
struct KvSpan {
  float* k = nullptr;
  float* v = nullptr;
  int first = 0;
  int count = 0;
};

// What a module holds right now, as the trace records it: every module fills the same record.
struct KvState {
  std::string module;               // plugin name
  Params params;                    // its resolved parameters
  std::int64_t tokens = 0;          // positions held
  std::int64_t capacity = 0;        // positions it can hold at once (0: keeps nothing between steps)
  std::int64_t bytes = 0;           // bytes allocated for K and V
  std::int64_t first_pos = 0;       // oldest position held
  std::int64_t evicted = 0;         // positions dropped so far in this sequence (window slides, removals)
  // Paged modules only (block_size 0 otherwise).
  int block_size = 0;
  int blocks_used = 0;
  int blocks_free = 0;
  int last_block_unused = 0;        // unused slots of the last block (internal fragmentation)
  std::vector<int> block_table;     // physical block of each logical block of the sequence
};

// K/V blocks that several sequences' stores share (`glassbox serve --kv-pool`): the memory is the owner's
// (core's SharedKvPool, held by the server); a module that stores K/V in fixed-size blocks (paged) takes
// blocks from it and gives them back, instead of allocating a pool of its own. A module that keeps one
// contiguous array or ring (kv-cache, sliding-window) or nothing (recompute) ignores it. Thread-safe: the
// stores of several requests take and give at once.
class KvBlockPool {
 public:
  virtual ~KvBlockPool() = default;
  // A store joins with the floats of one of its blocks and the positions one holds. The first join fixes
  // the pool's blocks (and allocates them); a later one with another block size gets a ConfigError naming
  // `who` and both sizes. Returns the blocks in the pool.
  virtual int join(std::size_t block_floats, int block_positions, const std::string& who) = 0;
  // A free block's index, or -1 when every block is in use (the caller says what it was doing).
  virtual int take() = 0;
  // Returns a block taken before.
  virtual void give(int block) = 0;
  // The block's floats (block_floats of them), valid while the pool lives.
  virtual float* data(int block) = 0;
  virtual int total() const = 0;  // blocks in the pool (0 before the first join)
  virtual int used() const = 0;   // blocks taken now
};

// One sequence's key/value storage. Positions held are always one contiguous range
// [first_pos, end) of the sequence, so a view is a list of spans in position order.
class KvStore {
 public:
  virtual ~KvStore() = default;
  // Positions it can hold at once (the engine's limit for a module that does not evict).
  virtual int capacity() const = 0;
  // true: writing past capacity drops the oldest positions (a sliding window) instead of failing.
  virtual bool evicts() const { return false; }
  // false: nothing survives between forward calls the engine makes (`recompute`): the engine
  // re-runs the whole sequence every step and clears the store first.
  virtual bool persistent() const { return true; }
  // Stores k, v (rows of kv_dim floats, k already rotated) for positions pos .. pos+n-1 of `layer`.
  // pos must be the end of what is held (no gaps).
  virtual void write(int layer, int pos, int n, const float* k, const float* v) = 0;
  // Appends to `out` the spans covering every position held for `layer`, oldest first.
  virtual void view(int layer, std::vector<KvSpan>& out) = 0;
  // Forgets positions [p0, p1), then moves positions >= p1 down by p1 - p0 (storage only: the keys
  // still carry their old rotation; Transformer::remove_positions re-rotates them).
  virtual void remove(int p0, int p1) = 0;
  // Forgets every stored position (a new sequence) and returns every block to the pool.
  virtual void clear() = 0;
  // Fills the typed state record (name and params are filled in by the registry's wrapper). It
  // assigns every field in place, so a record reused step after step allocates nothing.
  virtual void describe(KvState& out) const = 0;
  KvState state() const {
    KvState s;
    describe(s);
    return s;
  }
  // The module's name and resolved parameters (the registry's wrapper answers these).
  virtual std::string name() const { return {}; }
  virtual const Params& params() const {
    static const Params none;
    return none;
  }
};

// Backward-compatible name: "the attention module" a run is built with.
using Attention = KvStore;

// How one layer scores its keys (core's arithmetic, from the model's Config; not part of the plugin ABI).
struct AttentionRule {
  float scale = 0;    // scores = q·k · scale (1/√head_size for most models)
  float softcap = 0;  // > 0: scores = softcap·tanh(scores/softcap) before the softmax (Gemma 2)
  int window = 0;     // > 0: a query at p sees only keys j with p − j < window (sliding-window layers)
};

// Receives the attention weights of the newest query position; installed only when a trace asks.
class AttentionObserver {
 public:
  virtual ~AttentionObserver() = default;
  // Which (layer, head) pairs it wants; asked once per layer and head, so a no gives no extra work.
  virtual bool wants(int layer, int head) const = 0;
  // weights[i] is the weight of position first_pos + i (they sum to 1) for query position `pos`.
  virtual void weights(int layer, int head, int pos, int first_pos, std::span<const float> weights) = 0;
};

// The attention arithmetic for one query position `pos` over `spans` (every held position <= pos, and
// within rule.window of it when the layer has a window):
//   out_h = Σ_s softmax_s(cap(q_h·k_s · scale)) · v_s   for each query head h, whose kv head is
//   h / (n_heads / n_kv_heads) (grouped-query attention); cap is the identity without a soft-cap.
// q and out are rows of n_heads·head_size floats; `scores` holds at least as many floats as
// positions held. Reports the weights to `observer` (if any) for the heads it wants.
// Returns the query·key dot products done (positions attended × heads).
std::int64_t attend(const AttentionShape& shape, const AttentionRule& rule, std::span<const KvSpan> spans, int layer, int pos,
                    const float* q, float* out, float* scores, AttentionObserver* observer);

// attend for each query position pos + t, t < n, of a block whose keys and values are all held in
// `spans` already (a store that does not evict): q and out are n rows of n_heads·head_size floats.
// Positions are spread over the matrix products' threads; each row's arithmetic is attend's, so the
// result does not depend on the thread count. `scores` holds `slots` rows of `stride` floats (stride
// at least the positions held), one per thread: with fewer slots than threads it runs on the
// calling thread. The observer gets the last position's weights only. Returns the dot products done.
std::int64_t attend_block(const AttentionShape& shape, const AttentionRule& rule, std::span<const KvSpan> spans, int layer, int pos, int n,
                          const float* q, float* out, float* scores, std::size_t stride, int slots,
                          AttentionObserver* observer);

}  // namespace glassbox
