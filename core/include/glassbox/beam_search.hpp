// Beam search: keeps the `width` best partial continuations by total log-probability under the model's own
// distribution, each beam with its own K/V store, with Hugging Face's length penalty and its default
// (heuristic) early stopping. docs/beam-search.md has the algorithm, the equations and the limits.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <memory>

#include "glassbox/engine.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/strategy.hpp"

namespace glassbox {

struct BeamOptions {
  int width = 1;                // beams kept (N)
  double length_penalty = 1.0;  // A: a finished hypothesis scores sum_logprob / length^A
  bool ban_eog = false;         // --ignore-eos: end-of-generation tokens are never candidates
  std::function<void()> poll;   // called before each step (the CLI's interrupt check); may throw
};

// ConfigError with a one-line message unless 1 <= width <= vocab_size and A is finite within [-10, 10].
void check_beam_options(const BeamOptions& b, int vocab_size);

// ConfigError when the other width − 1 beams' K/V stores, `positions` each (a search never truncates: the
// prompt and max_tokens more), on top of what the run itself allocates, exceed the run memory bound
// (check_run_memory, run_spec.hpp). The message names --beam-width and the widest search that fits.
void check_beam_memory(const Config& cfg, int positions, int width, const std::string& model_file);

// Refuses (ConfigError) a module whose K/V rows cannot be copied from one beam to another: one that evicts
// (a sliding window). `module` names it in the message.
void check_beam_attention(const KvStore& kv, const std::string& module);

// The strategy (strategy.hpp): each advance is one search step — every live beam's next distribution, the
// 2N best continuations ranked together, finished hypotheses kept, stores handed on or copied — until
// early stopping, max_tokens or the context ends the search; the last advance then reports the winner's
// steps (replayed through the step recorder when the trace asks for logits, attention or the lens) and
// emits its tokens. The loop's parts.attn must be stores[0]; its chain null. Its decode rate counts search
// steps after the first; its summary carries the hypotheses (Summary::beam).
class BeamStrategy final : public Strategy {
 public:
  BeamStrategy(std::vector<KvStore*> stores, BeamOptions options);
  ~BeamStrategy() override;
  void check(const GenerateOptions& opt) const override;
  bool truncates() const override { return false; }
  void begin(DecodeRun& run) override;
  bool advance(DecodeRun& run) override;
  void end(DecodeRun& run) override;

 private:
  struct Beam;
  struct State;  // the search's per-run state (beam_search.cpp)
  double normalized(double score, int length) const;
  void assign_stores(DecodeRun& run, std::vector<Beam>& next, const BeamStep& rec);
  std::span<const float> forward_blocks(DecodeRun& run, std::span<const std::int32_t> toks, int from, KvStore& kv,
                                        bool watched, std::int64_t* dots);
  void finish(DecodeRun& run);
  std::vector<int> winner_path(const BeamHypothesis& win) const;
  void report(DecodeRun& run, const BeamHypothesis& win, const std::vector<int>& via);
  std::vector<KvStore*> stores_;
  BeamOptions bo_;
  BeamSummary bs_;
  std::unique_ptr<State> st_;
};

// Beam search as one object: the model, its stores and the options, run by the one loop.
class BeamSearch {
 public:
  // `stores`: one K/V store per beam (width of them) for a module that keeps K/V between steps, or a
  // single one for a module that keeps nothing (`recompute`: every beam's sequence runs again each step).
  // All built alike (same module, same capacity); they must outlive the search.
  BeamSearch(Transformer& model, const Tokenizer& tok, std::vector<KvStore*> stores);

  // Runs the search from `prompt_ids` and reports it: the header, then one step event per token of the
  // winning hypothesis (its distribution, with the search's state at that step in StepEvent::beams),
  // then the summary (Summary::beam). The winner's text goes to `on_piece` once the search has ended.
  // Of `opt`: max_tokens, stop_at_eos / stop_at_bos, policy (stop or refuse only), watch. A full trace
  // level, attention rows and the logit lens are recorded by running the winner's path once more through
  // the step recorder (the same logits, bit for bit); teacher forcing is refused (ConfigError).
  Summary generate(std::vector<std::int32_t> prompt_ids, std::string_view prompt, const GenerateOptions& opt,
                   const BeamOptions& beam, RunHeader header, TraceSink& sink, const StreamFn& on_piece);

  // Positions a run may use (Engine::context_limit's rule).
  int context_limit() const;

 private:
  Transformer& model_;
  const Tokenizer& tok_;
  std::vector<KvStore*> stores_;
};

// A whole search over one run's parts (run, chat and serve): the options and the attention module checked,
// and the other width − 1 beams' stores made from `attention` by `registry` — each holding only what a search
// can reach (the prompt and max_tokens more; it never truncates), none for a module that keeps nothing, all
// of them within the run memory bound (check_beam_memory, naming `model_file`). `first` is the run's own store.
Summary beam_search(Transformer& model, const Tokenizer& tok, KvStore& first, const Registry& registry, const PluginSpec& attention,
                    const std::string& model_file, std::vector<std::int32_t> prompt_ids, std::string_view prompt,
                    const GenerateOptions& opt, const BeamOptions& beam, RunHeader header, TraceSink& sink, const StreamFn& on_piece);

}  // namespace glassbox
