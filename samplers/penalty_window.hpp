// The look-back window the repetition, presence and frequency penalties share (header-only).
#pragma once
#include <vector>

#include "stage.hpp"

namespace glassbox::samplers {

// The last `last_n` accepted tokens (prompt included, as in llama.cpp) and how often each
// occurs among them. last_n = -1: every token of the sequence; 0: none (the penalty is off).
// A ring buffer and a sorted table, both sized once for a bounded window: accepting a token
// allocates nothing (with last_n = -1 they grow with the sequence).
class TokenWindow {
 public:
  explicit TokenWindow(std::int64_t last_n) : last_n_(last_n) {
    if (last_n_ > 0) {
      ring_.resize(static_cast<std::size_t>(last_n_));
      counts_.reserve(static_cast<std::size_t>(last_n_) + 1);
    }
  }
  void push(std::int32_t t) {
    if (last_n_ == 0) return;
    if (last_n_ > 0) {
      if (size_ == ring_.size()) {
        drop(ring_[head_]);
        ring_[head_] = t;
        head_ = (head_ + 1) % ring_.size();
      } else {
        ring_[(head_ + size_++) % ring_.size()] = t;
      }
    }
    auto it = find(t);
    if (it != counts_.end() && it->first == t) ++it->second;
    else counts_.insert(it, {t, 1});
  }
  void clear() {
    head_ = size_ = 0;
    counts_.clear();
  }
  const IdTable<int>& counts() const { return counts_; }

 private:
  IdTable<int>::iterator find(std::int32_t t) {
    return std::lower_bound(counts_.begin(), counts_.end(), t, [](const auto& e, std::int32_t id) { return e.first < id; });
  }
  void drop(std::int32_t t) {
    auto it = find(t);
    if (--it->second == 0) counts_.erase(it);
  }
  std::int64_t last_n_;
  std::vector<std::int32_t> ring_;
  std::size_t head_ = 0, size_ = 0;
  IdTable<int> counts_;  // (token, occurrences in the window), sorted by token
};

inline ParamSpec last_n_spec() {
  // At most 2^20: the window's ring buffer is allocated up front (a longer window is "-1").
  return {"last_n", ParamType::Int, "64", "look-back window in tokens (prompt included); -1 = whole sequence, 0 = off",
          -1.0, 1048576.0};
}

// A penalty stage: `penalise(candidate, count)` for each token seen in the window.
template <class Penalise>
class PenaltyStage final : public Stage {
 public:
  PenaltyStage(std::string name, Params p, Penalise f)
      : Stage(std::move(name), std::move(p)), window_(params_.get_int("last_n")), f_(f) {}
  void apply(Candidates& c, Rng&) override {
    if (window_.counts().empty()) return;
    for_each_listed(c, window_.counts(), f_);
    c.sorted = false;  // penalised logits may change the order
  }
  void accept(std::int32_t token) override { window_.push(token); }
  void reset() override { window_.clear(); }

 private:
  TokenWindow window_;
  Penalise f_;
};

template <class Penalise>
std::unique_ptr<Sampler> make_penalty(std::string name, const Params& p, Penalise f) {
  return std::make_unique<PenaltyStage<Penalise>>(std::move(name), p, f);
}

}  // namespace glassbox::samplers
