// The sampler chain: turns a step's logits into one token through the user's ordered stages.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "glassbox/rng.hpp"
#include "glassbox/sampler.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox {

class SamplerChain {
 public:
  // `stages` run in order; the last one must select (see build_sampler_chain).
  SamplerChain(std::vector<std::unique_ptr<Sampler>> stages, int vocab_size, std::uint64_t seed);

  // logits -> candidates -> each stage -> the selected token id. Stages after the one that
  // selects do not run. With record_stages, stage_records() then holds the distribution
  // after each stage that ran (top_k entries each) and chosen_prob() is set; without it,
  // sampling does no work beyond the stages themselves.
  std::int32_t sample(std::span<const float> logits, bool record_stages = false, int top_k = 10);

  void accept(std::int32_t token);  // a token joins the sequence (prompt or generated)
  void reset(std::uint64_t seed);   // new sequence: stage state and generator restart

  const std::vector<std::unique_ptr<Sampler>>& stages() const { return stages_; }
  std::span<const StageRecord> stage_records() const { return {records_.data(), n_recorded_}; }
  // The chosen token's probability under the distribution the selecting stage chose from
  // (NaN unless the last sample() recorded stages).
  float chosen_prob() const { return chosen_prob_; }
  float draw_u() const { return draw_u_; }            // uniform of the draw, -1 for argmax
  // The raw model distribution p = softmax(logits) of the last sample() that recorded stages (empty
  // otherwise), and S = Σ exp(l_i - max l) in the order p was computed: the engine's step record reuses
  // them instead of a second exp() per vocabulary entry.
  std::span<const float> raw_probs() const { return n_recorded_ ? std::span<const float>(raw_prob_) : std::span<const float>(); }
  double raw_sum() const { return raw_sum_; }

 private:
  void record(std::size_t stage, int top_k);
  std::vector<std::unique_ptr<Sampler>> stages_;
  Candidates cand_;
  Rng rng_;
  std::vector<StageRecord> records_;  // one per stage, reused every step
  std::vector<float> raw_prob_;       // (vocab_size) model distribution, for "mass"
  std::vector<Candidate> scratch_;    // (vocab_size) for recording without disturbing cand_
  int step_ = -1;                     // sample() calls since reset(): the engine's step, for messages
  std::size_t n_recorded_ = 0;       // stages that ran (and were recorded) last step
  float chosen_prob_ = 0, draw_u_ = -1;
  double raw_sum_ = 0;
};

}  // namespace glassbox
