// Prefix reuse: whole prompts' K/V kept by least recent use, copied into a new run's store (prefix_cache.hpp).
#include "glassbox/prefix_cache.hpp"

#include <algorithm>
#include <cstring>

namespace glassbox {

PrefixCache::PrefixCache(std::size_t max_bytes, int min_reuse) : max_bytes_(max_bytes), min_reuse_(std::max(1, min_reuse)) {}

std::pair<PrefixCache::Entry*, int> PrefixCache::best_for(std::span<const std::int32_t> tokens, int max_positions) const {
  Entry* best = nullptr;
  std::size_t best_n = 0;
  for (Entry& e : entries_) {
    const std::size_t limit = std::min({e.tokens.size(), tokens.size(), static_cast<std::size_t>(std::max(0, max_positions))});
    const auto end = e.tokens.begin() + static_cast<std::ptrdiff_t>(limit);
    const std::size_t n = static_cast<std::size_t>(std::mismatch(e.tokens.begin(), end, tokens.begin()).first - e.tokens.begin());
    if (n > best_n) best = &e, best_n = n;
  }
  if (static_cast<int>(best_n) < min_reuse_) return {nullptr, 0};
  return {best, static_cast<int>(best_n)};
}

int PrefixCache::longest(std::span<const std::int32_t> tokens, int max_positions) const {
  std::lock_guard lock(mu_);
  return best_for(tokens, max_positions).second;
}

int PrefixCache::restore(std::span<const std::int32_t> tokens, KvStore& into, int max_positions) {
  std::lock_guard lock(mu_);
  ++lookups_;
  if (!into.persistent() || into.evicts() || into.state().tokens != 0) return 0;
  const auto [best, n] = best_for(tokens, max_positions);
  if (!best || n > into.capacity()) return 0;
  // Layer by layer, positions 0..n-1 (rows of kv_dim floats; the keys already rotated for their positions)
  const std::size_t kvd = static_cast<std::size_t>(best->kv_dim), len = best->tokens.size();
  for (int l = 0; l < best->n_layers; ++l) {
    const std::size_t at = static_cast<std::size_t>(l) * len * kvd;
    into.write(l, 0, n, best->k.data() + at, best->v.data() + at);
  }
  best->used = ++clock_;
  ++hits_;
  reused_ += n;
  return n;
}

void PrefixCache::remember(std::span<const std::int32_t> tokens, KvStore& from, int n_layers, int kv_dim) {
  const std::size_t n = tokens.size(), kvd = static_cast<std::size_t>(kv_dim);
  const std::size_t need = 2 * static_cast<std::size_t>(n_layers) * n * kvd * sizeof(float);
  if (n < static_cast<std::size_t>(min_reuse_) + 1 || need > max_bytes_) return;
  if (!from.persistent() || from.evicts()) return;
  const KvState st = from.state();
  if (st.first_pos != 0 || st.tokens < static_cast<std::int64_t>(n)) return;
  std::lock_guard lock(mu_);
  for (Entry& e : entries_)  // an entry that begins with these tokens already gives all of them
    if (e.tokens.size() >= n && std::equal(tokens.begin(), tokens.end(), e.tokens.begin()) && e.kv_dim == kv_dim && e.n_layers == n_layers) {
      e.used = ++clock_;
      return;
    }
  Entry e;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.n_layers = n_layers;
  e.kv_dim = kv_dim;
  e.k.resize(static_cast<std::size_t>(n_layers) * n * kvd);
  e.v.resize(e.k.size());
  for (int l = 0; l < n_layers; ++l) {
    spans_.clear();
    from.view(l, spans_);
    float* k = e.k.data() + static_cast<std::size_t>(l) * n * kvd;
    float* v = e.v.data() + static_cast<std::size_t>(l) * n * kvd;
    std::size_t got = 0;
    for (const KvSpan& s : spans_) {
      if (s.first != static_cast<int>(got)) return;  // not one run of positions from 0: keep nothing
      const std::size_t take = std::min<std::size_t>(static_cast<std::size_t>(s.count), n - got);
      std::memcpy(k + got * kvd, s.k, take * kvd * sizeof(float));
      std::memcpy(v + got * kvd, s.v, take * kvd * sizeof(float));
      got += take;
      if (got == n) break;
    }
    if (got != n) return;
  }
  // A shorter entry this one extends is no longer needed: its every lookup finds this one at least as long.
  std::erase_if(entries_, [&](const Entry& old) {
    const bool covered = old.tokens.size() <= n && std::equal(old.tokens.begin(), old.tokens.end(), tokens.begin());
    if (covered) bytes_ -= old.bytes();
    return covered;
  });
  while (bytes_ + need > max_bytes_ && !entries_.empty()) {
    auto lru = std::min_element(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
    bytes_ -= lru->bytes();
    entries_.erase(lru);
  }
  e.used = ++clock_;
  bytes_ += need;
  entries_.push_back(std::move(e));
}

PrefixCache::Stats PrefixCache::stats() const {
  std::lock_guard lock(mu_);
  Stats s;
  s.lookups = lookups_;
  s.hits = hits_;
  s.reused_positions = reused_;
  s.entries = entries_.size();
  s.bytes = bytes_;
  s.max_bytes = max_bytes_;
  return s;
}

}  // namespace glassbox
