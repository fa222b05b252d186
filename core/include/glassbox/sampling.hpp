// The sampler chain: turns a step's logits into one token through the user's ordered stages.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "glassbox/rng.hpp"
#include "glassbox/sampler.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox {

// The statistics of p = softmax(l) that a trace records, from one exp per entry:
// w_i = exp(l_i - m) with m = max l, S = Σ w_i and Σ w_i (l_i - m), so that p_i = w_i / S and the
// entropy is H = ln S - Σ w_i (l_i - m) / S. -inf logits get w = 0.
struct SoftmaxStats {
  float max = 0;
  double sum = 0;       // S
  double weighted = 0;  // Σ w_i (l_i - m)
  double entropy() const { return std::max(0.0, std::log(sum) - weighted / sum); }
  float prob(float w) const { return static_cast<float>(w / sum); }
};
// Writes w (same length as logits; at least one finite logit) through kernels::exp_weights: xsimd's
// exp in the widest vectors of the kernel set in use and sums in a fixed order (float lanes over 16
// vectors, then double), several times cheaper than a libm exp and a double add per entry. The same
// kernel set gives the same numbers on every machine (the set is named in the trace header).
SoftmaxStats softmax_weights(std::span<const float> logits, std::span<float> w);

// The first min(k, n) of items 0..n-1 in the order `better` (a strict order; items it leaves equal keep
// their index order) written to best[0..), in order, in one pass: a sorted run of the best so far,
// which most items leave after one comparison with its last entry. Returns how many were written.
template <class Better>
std::size_t top_run(std::size_t n, std::size_t k, Better better, std::int32_t* best) {
  std::size_t m = 0;
  for (std::size_t i = 0; i < n && k > 0; ++i) {
    const auto item = static_cast<std::int32_t>(i);
    if (m == k) {
      if (!better(item, best[k - 1])) continue;
      --m;
    }
    std::size_t j = m++;
    for (; j > 0 && better(item, best[j - 1]); --j) best[j] = best[j - 1];
    best[j] = item;
  }
  return m;
}

// The indices of the min(k, n) highest of n logits, higher first and equal ones by lower index
// (what top_run with `l[a] > l[b]` gives), written to best[0..); returns how many. Same result, but
// most of a large vocabulary is passed over in vectors: the k-th highest maximum of the blocks (of
// 64 entries, down to 16 for a small vocabulary), t, is at most the k-th highest logit (k blocks each
// hold an entry >= t), so only blocks whose maximum reaches t are read, and only their entries >= t
// compete. `scratch` holds at least n + n/16 ints. No logit may be NaN.
std::size_t top_logits(std::span<const float> l, std::size_t k, std::int32_t* best, std::int32_t* scratch);

// What one sample() gave: the chosen id and the uniform number of the final draw.
struct SampleResult {
  std::int32_t id = -1;
  float draw_u = -1;  // -1: the selecting stage drew none (argmax)
};

// Watches the chain work, without changing what it does: before the first stage it is handed the
// model's logits; after each stage that ran, the candidate array as that stage left it (with the
// number the stage drew in `u` and, for the selecting stage, `selected`); `end` comes last, also when
// a stage threw. The engine's step recorder (step_recorder.hpp) and `explain` record through it; the
// chain itself knows nothing of traces.
class StageObserver {
 public:
  virtual ~StageObserver() = default;
  virtual void begin(std::span<const float> logits) = 0;
  virtual void after_stage(std::size_t index, const Sampler& stage, const Candidates& c) = 0;
  virtual void end() noexcept {}
};

// ConfigError unless the first selecting stage declares Selection::Argmax or Selection::Draw: the chains
// whose whole distribution can be handed out (SamplerChain::distribution, speculative decoding).
void check_fixed_distribution(const std::vector<std::unique_ptr<Sampler>>& stages);

class SamplerChain {
 public:
  // `stages` run in order; the last one must select (see build_sampler_stages).
  SamplerChain(std::vector<std::unique_ptr<Sampler>> stages, int vocab_size, std::uint64_t seed);

  // logits -> candidates -> each stage -> the selected token. Stages after the one that selects do
  // not run. `observer`, when given, sees the logits and each stage's output.
  SampleResult sample(std::span<const float> logits, StageObserver* observer = nullptr);

  // The distribution the selecting stage would choose from, whole rather than one draw (speculative
  // decoding compares two of them: speculative.hpp): the stages before the selecting one run as in
  // sample(); the observer sees each, then the selecting stage's input as that stage's record, nothing
  // selected (the caller chooses); the candidates left come back with normalised probabilities, in no
  // particular order. ConfigError when the selecting stage declares neither an argmax nor a draw
  // (check_fixed_distribution: mirostat adapts its state to each token it draws, so it has no fixed
  // distribution to hand out).
  const Candidates& distribution(std::span<const float> logits, StageObserver* observer = nullptr);
  // How the selecting stage chooses, as it declares it (Selection::None when none selects). An Argmax
  // chain's distribution is the one-hot of the candidates' canonical first.
  Selection selection() const;
  bool selects_argmax() const { return selection() == Selection::Argmax; }

  void accept(std::int32_t token);  // a token joins the sequence (prompt or generated)
  void bind(const Tokenizer& vocab);  // hands every stage the vocabulary (Sampler::bind)
  void reset(std::uint64_t seed);   // new sequence: stage state and generator restart

  const std::vector<std::unique_ptr<Sampler>>& stages() const { return stages_; }

 private:
  std::vector<std::unique_ptr<Sampler>> stages_;
  Candidates cand_;
  Rng rng_;
  int step_ = -1;                     // sample() calls since reset(): the engine's step, for messages
};

// Records what a chain did at one step, through StageObserver: the distribution after each stage that
// ran (kept count, raw mass, entropy, top entries), the chosen token's probability under the
// distribution it was chosen from, and the raw model distribution p = softmax(logits) as weights and
// top ids (the step record reuses them instead of a second exp() per vocabulary entry). The raw pass
// over the vocabulary runs on an idle pool worker while the stages run (the same kernels, so the same
// bits on either thread). Buffers are allocated once.
class StageRecorder final : public StageObserver {
 public:
  StageRecorder(const SamplerChain& chain, int vocab_size, int top_k);
  ~StageRecorder() override;
  void begin(std::span<const float> logits) override;
  void after_stage(std::size_t index, const Sampler& stage, const Candidates& c) override;
  void end() noexcept override;

  int top_k() const { return top_k_; }
  std::span<const StageRecord> records() const { return {records_.data(), n_recorded_}; }
  // The chosen token's probability under the distribution the selecting stage chose from (NaN before).
  float chosen_prob() const { return chosen_prob_; }
  // The raw distribution of the last step, as weights w_i = exp(l_i - max l) (p_i = raw_stats().prob(w_i)).
  std::span<const float> raw_weights() const { return {raw_w_.data(), raw_n_}; }
  const SoftmaxStats& raw_stats() const { return raw_stats_; }
  // The last step's max(top_k, 1) highest logits' ids, as top_logits gives them.
  std::span<const std::int32_t> raw_top() const { return {raw_top_.data(), raw_top_n_}; }

 private:
  struct Task;  // the raw pass beside the stages, on a pool worker
  void raw_pass() noexcept;
  int top_k_;
  std::vector<StageRecord> records_;  // one per stage, reused every step
  std::size_t n_recorded_ = 0;
  std::span<const float> logits_;
  std::vector<float> raw_w_;               // (vocab_size) exp(l_i - max l) of the model's logits, for "mass"
  std::size_t raw_n_ = 0;
  std::vector<std::int32_t> raw_top_;      // (max(top_k, 1)) ids of the highest logits
  std::size_t raw_top_n_ = 0;
  std::vector<std::int32_t> raw_scratch_;  // (vocab_size + vocab_size/16) top_logits' scratch
  std::vector<float> rec_l_, rec_w_;       // (vocab_size) a stage's kept logits and their weights
  std::vector<std::int32_t> rec_top_;      // (top_k) indices into the candidates of a record's top entries
  float chosen_prob_ = 0;
  SoftmaxStats raw_stats_;
  std::unique_ptr<Task> task_;             // allocated once; holds the pool task while it may run
};

}  // namespace glassbox
