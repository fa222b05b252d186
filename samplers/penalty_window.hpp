// The look-back window the repetition, presence and frequency penalties share (header-only).
#pragma once
#include <deque>
#include <unordered_map>

#include "stage.hpp"

namespace glassbox::samplers {

// The last `last_n` accepted tokens (prompt included, as in llama.cpp) and how often each
// occurs among them. last_n = -1: every token of the sequence; 0: none (the penalty is off).
class TokenWindow {
 public:
  explicit TokenWindow(std::int64_t last_n) : last_n_(last_n) {}
  void push(std::int32_t t) {
    if (last_n_ == 0) return;
    q_.push_back(t);
    ++counts_[t];
    if (last_n_ > 0 && static_cast<std::int64_t>(q_.size()) > last_n_) {
      auto it = counts_.find(q_.front());
      if (--it->second == 0) counts_.erase(it);
      q_.pop_front();
    }
  }
  void clear() {
    q_.clear();
    counts_.clear();
  }
  const std::unordered_map<std::int32_t, int>& counts() const { return counts_; }

 private:
  std::int64_t last_n_;
  std::deque<std::int32_t> q_;
  std::unordered_map<std::int32_t, int> counts_;
};

inline ParamSpec last_n_spec() {
  return {"last_n", ParamType::Int, "64", "look-back window in tokens (prompt included); -1 = whole sequence, 0 = off",
          -1.0, std::nullopt};
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
