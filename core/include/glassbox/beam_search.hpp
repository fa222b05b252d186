// Beam search: keeps the `width` best partial continuations by total log-probability under the model's own
// distribution, each beam with its own K/V store, with Hugging Face's length penalty and its default
// (heuristic) early stopping. docs/beam-search.md has the algorithm, the equations and the limits.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/engine.hpp"

namespace glassbox {

struct BeamOptions {
  int width = 1;                // beams kept (N)
  double length_penalty = 1.0;  // A: a finished hypothesis scores sum_logprob / length^A
  bool ban_eog = false;         // --ignore-eos: end-of-generation tokens are never candidates
  std::function<void()> poll;   // called before each step (the CLI's interrupt check); may throw
};

// ConfigError with a one-line message unless 1 <= width <= vocab_size and A is finite within [-10, 10].
void check_beam_options(const BeamOptions& b, int vocab_size);

// Refuses (ConfigError) a module whose K/V rows cannot be copied from one beam to another: one that evicts
// (a sliding window). `module` names it in the message.
void check_beam_attention(const KvStore& kv, const std::string& module);

class BeamSearch {
 public:
  // `stores`: one K/V store per beam (width of them) for a module that keeps K/V between steps, or a
  // single one for a module that keeps nothing (`recompute`: every beam's sequence runs again each step).
  // All built alike (same module, same capacity); they must outlive the search.
  BeamSearch(Transformer& model, const Tokenizer& tok, std::vector<KvStore*> stores);

  // Runs the search from `prompt_ids` and reports it: the header, then one step event per token of the
  // winning hypothesis (its distribution, with the search's state at that step in StepEvent::beams),
  // then the summary (Summary::beam). The winner's text goes to `on_piece` once the search has ended.
  // Of `opt`: max_tokens, stop_at_eos / stop_at_bos, policy (stop or refuse only), watch.top_k. A full
  // trace level, teacher forcing, attention rows and the logit lens are refused (ConfigError).
  Summary generate(std::vector<std::int32_t> prompt_ids, std::string_view prompt, const GenerateOptions& opt,
                   const BeamOptions& beam, RunHeader header, TraceSink& sink, const StreamFn& on_piece);

  // Positions a run may use (Engine::context_limit's rule).
  int context_limit() const;

 private:
  Transformer& model_;
  const Tokenizer& tok_;
  std::vector<KvStore*> stores_;
};

}  // namespace glassbox
