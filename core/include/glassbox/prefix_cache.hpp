// Prefix reuse: the keys and values of prompts already prefilled, kept so that a later prompt that begins
// with the same tokens copies them instead of computing them again (llama.cpp's cache_prompt, vLLM's
// prefix caching). A class's shared system prompt or exercise text is prefilled once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "glassbox/forward/attention.hpp"

namespace glassbox {

// Entries are whole prompts' K/V (every layer, positions 0..n-1, as floats: n_layers · n · kv_dim · 2);
// a lookup finds the entry sharing the longest run of first tokens with the new prompt and copies that
// many positions into the new run's store. The K/V of position p depend only on tokens 0..p, and the
// products give each row its own bits whatever the block, so the copied numbers are the ones the prefill
// would compute (tests/test_batch.cpp checks the tokens and records against runs without the cache).
// Bounded in bytes: the least recently used entries go first. Safe to call from several threads.
class PrefixCache {
 public:
  // `max_bytes` of K/V at most (0: keeps nothing); `min_reuse`: shorter shared prefixes are not worth a copy.
  explicit PrefixCache(std::size_t max_bytes, int min_reuse = 1);

  // Copies into `into` (empty, a store that keeps its positions and does not evict) the K/V of the longest
  // prefix of `tokens` an entry holds, at most `max_positions` of them; returns how many (0: none).
  int restore(std::span<const std::int32_t> tokens, KvStore& into, int max_positions);
  // How many positions restore would copy now for `tokens` (0 when fewer than min_reuse), copying nothing.
  int longest(std::span<const std::int32_t> tokens, int max_positions) const;
  int min_reuse() const { return min_reuse_; }
  // Keeps the K/V `from` holds for `tokens` (positions 0..tokens.size()-1, every layer); nothing when the
  // store holds other positions, when an entry already covers these tokens, or when it does not fit.
  void remember(std::span<const std::int32_t> tokens, KvStore& from, int n_layers, int kv_dim);

  struct Stats {
    std::int64_t lookups = 0, hits = 0, reused_positions = 0;
    std::size_t entries = 0, bytes = 0, max_bytes = 0;
  };
  Stats stats() const;

 private:
  struct Entry;
  // The entry sharing the most first tokens with `tokens` (at most max_positions), and how many; mu_ held.
  std::pair<Entry*, int> best_for(std::span<const std::int32_t> tokens, int max_positions) const;
  struct Entry {
    std::vector<std::int32_t> tokens;
    std::vector<float> k, v;  // (n_layers, n, kv_dim)
    int n_layers = 0, kv_dim = 0;
    std::uint64_t used = 0;   // the clock at the last lookup or store that touched it
    std::size_t bytes() const { return (k.size() + v.size()) * sizeof(float); }
  };
  mutable std::mutex mu_;
  mutable std::vector<Entry> entries_;
  std::size_t max_bytes_, bytes_ = 0;
  int min_reuse_;
  std::uint64_t clock_ = 0;
  std::int64_t lookups_ = 0, hits_ = 0, reused_ = 0;
  std::vector<KvSpan> spans_;
};

}  // namespace glassbox
