// Speculative decoding (Leviathan et al. 2023; Chen et al. 2023): a small draft model proposes K tokens,
// the target scores them all in one forward over K + 1 positions, and each is accepted or replaced by the
// rule that keeps the output distributed exactly as the target's own sampling. docs/speculative.md.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/engine.hpp"
#include "glassbox/rng.hpp"
#include "glassbox/strategy.hpp"

namespace glassbox {

// The most tokens a round may draft (a round's K + 1 positions go through the target as one block).
constexpr int kMaxDraftTokens = 32;

// Refuses a draft whose vocabulary is not the target's, token for token (size, then each token's text):
// its proposals are ids, and p(x)/q(x) compares the same x only when both models mean the same text by
// it. ConfigError, one line naming both files.
void check_draft_vocabulary(const Tokenizer& target, int target_vocab, const std::string& target_file,
                            const Tokenizer& draft, int draft_vocab, const std::string& draft_file);

// The draft's side of a run: its own model, KV store and sampler chain (built from the same stages as
// the target's, so that q is the draft's distribution after the same chain).
struct DraftModel {
  Transformer& model;
  KvStore& attention;
  SamplerChain& sampler;
  std::string path;  // for messages
};

// The strategy (strategy.hpp): each advance is one round — draft K, verify them in one forward of the
// target, accept or resample position by position, roll both caches back to what was emitted. The first
// advance also prefills every prompt token but the last through both models. Its decode rate counts the
// tokens decided; its summary carries the rounds (Summary::speculative).
class SpeculativeStrategy final : public Strategy {
 public:
  SpeculativeStrategy(DraftModel& draft, int k) : draft_(draft), k_(k) {}
  void check(const GenerateOptions& opt) const override;
  bool truncates() const override { return false; }
  void describe(RunHeader& header) const override;
  void begin(DecodeRun& run) override;
  bool advance(DecodeRun& run) override;
  void end(DecodeRun& run) override;

 private:
  // advance()'s parts, in the order of a round (core/src/speculative.cpp says what each does).
  void prefill(DecodeRun& run);
  void draft(DecodeRun& run, int P, int k);
  void verify(DecodeRun& run, int P, int k);
  bool settle(DecodeRun& run, int P, int i, int k, int round, DecodeRun::Clock::time_point ti, int& accepted, bool& done);
  std::int32_t judge(int i, SpeculativeStep& sp, float& u_draw);
  void record_step(DecodeRun& run, int pos, std::span<const float> logits, std::int32_t token, float u_draw,
                   DecodeRun::Clock::time_point ti, const SpeculativeStep& sp);
  void roll_back(DecodeRun& run, int k, int accepted);
  std::int32_t resample(const std::vector<double>& qi, float& u_draw);
  DraftModel& draft_;
  int k_;
  SpeculativeSummary spec_;
  std::uint64_t draft_seed_ = 0;
  Rng draft_rng_{0}, rng_{0};
  int draft_limit_ = 0, target_held_ = -1, draft_held_ = -1, step_ = 0, top_k_ = 1;
  bool argmax_ = false;
  DecodeRun::Clock::time_point t_start_;
  std::vector<SpecProposal> props_;
  std::vector<std::vector<double>> q_;         // (k, vocab_size) the draft's distribution at each drafted position
  std::vector<double> p_, resid_;              // (vocab_size) the target's, and the residual on a rejection
  std::vector<float> rows_;                    // (k + 1, vocab_size) the verifying forward's logits
  std::vector<TokenProb> residual_top_;
  std::vector<std::int32_t> order_;            // (vocab_size)
};

// Speculative decoding as one object: the target's parts, the draft and K, run by the one loop.
class SpeculativeEngine {
 public:
  // k: tokens drafted per round, 1..kMaxDraftTokens. ConfigError when the attention module of either
  // model cannot roll positions back (one that keeps nothing between steps, or evicts), or k is out of range.
  SpeculativeEngine(Transformer& target, const Tokenizer& tokenizer, KvStore& attention, SamplerChain& sampler,
                    DraftModel draft, int k);

  // As Engine::generate, one trace step per token decided (each with its `speculative` record) and a
  // summary with the round figures. Context policies other than stop and refuse, teacher forcing,
  // attention rows and the logit lens are refused (ConfigError).
  Summary generate(std::string_view prompt, const GenerateOptions& opt, RunHeader header, TraceSink& sink,
                   const StreamFn& on_piece);
  Summary generate(std::vector<std::int32_t> prompt_ids, std::string_view prompt, const GenerateOptions& opt,
                   RunHeader header, TraceSink& sink, const StreamFn& on_piece);

  int k() const { return k_; }

 private:
  Transformer& target_;
  const Tokenizer& tok_;
  KvStore& attn_;
  SamplerChain& chain_;
  DraftModel draft_;
  int k_;
};

}  // namespace glassbox
