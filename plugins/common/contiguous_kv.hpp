// Contiguous per-layer K/V rows, one slot per position: the storage of `kv-cache` and `recompute`.
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <glassbox/forward/attention.hpp>
#include <glassbox/error.hpp>

namespace glassbox::plugins {

class ContiguousKv : public KvStore {
 public:
  // `who` names the module in errors ("attention 'kv-cache'").
  ContiguousKv(const AttentionShape& shape, int capacity, std::string who)
      : sh_(shape), capacity_(capacity), who_(std::move(who)), end_(shape.n_layers, 0) {
    if (capacity_ < 1 || capacity_ > shape.seq_len)
      throw ConfigError(who_ + ": capacity = " + std::to_string(capacity_) + " (expected 1.." + std::to_string(shape.seq_len) +
                        ", the model's context length)");
    const std::size_t rows = static_cast<std::size_t>(shape.n_layers) * capacity_ * shape.kv_dim();
    key_.assign(rows, 0.0f);
    value_.assign(rows, 0.0f);
  }

  int capacity() const override { return capacity_; }

  void write(int layer, int pos, int n, const float* k, const float* v) override {
    if (pos != end_[layer])
      throw InputError(who_ + ": write at position " + std::to_string(pos) + " of layer " + std::to_string(layer) +
                       " (expected " + std::to_string(end_[layer]) + ", the end of what is held)");
    if (pos + n > capacity_)
      throw InputError(who_ + ": position " + std::to_string(pos + n - 1) + " is beyond its capacity of " +
                       std::to_string(capacity_) + " positions");
    const std::size_t kvd = sh_.kv_dim();
    std::memcpy(row(key_, layer, pos), k, n * kvd * sizeof(float));
    std::memcpy(row(value_, layer, pos), v, n * kvd * sizeof(float));
    end_[layer] = pos + n;
  }

  void view(int layer, std::vector<KvSpan>& out) override {
    if (end_[layer] > 0) out.push_back({row(key_, layer, 0), row(value_, layer, 0), 0, end_[layer]});
  }

  void remove(int p0, int p1) override {
    const std::size_t kvd = sh_.kv_dim();
    for (int l = 0; l < sh_.n_layers; ++l) {
      const int a = std::min(p0, end_[l]), b = std::min(p1, end_[l]);
      if (a >= b) continue;
      std::memmove(row(key_, l, a), row(key_, l, b), (end_[l] - b) * kvd * sizeof(float));
      std::memmove(row(value_, l, a), row(value_, l, b), (end_[l] - b) * kvd * sizeof(float));
      end_[l] -= b - a;
      if (l == sh_.n_layers - 1) evicted_ += b - a;
    }
  }

  void clear() override {
    std::fill(end_.begin(), end_.end(), 0);
    evicted_ = 0;
  }

  void describe(KvState& s) const override {
    s.tokens = end_.back();
    s.capacity = capacity_;
    s.bytes = static_cast<std::int64_t>((key_.size() + value_.size()) * sizeof(float));
    s.first_pos = 0;
    s.evicted = evicted_;
    s.block_size = s.blocks_used = s.blocks_free = s.last_block_unused = 0;
    s.block_table.clear();
  }

 private:
  float* row(std::vector<float>& m, int layer, int pos) {
    return m.data() + (static_cast<std::size_t>(layer) * capacity_ + pos) * sh_.kv_dim();
  }
  AttentionShape sh_;
  int capacity_;
  std::string who_;
  std::vector<int> end_;          // per layer: positions 0 .. end-1 are held
  std::int64_t evicted_ = 0;
  std::vector<float> key_, value_;  // (n_layers, capacity, kv_dim)
};

}  // namespace glassbox::plugins
