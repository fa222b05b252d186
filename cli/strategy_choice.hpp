// The decoding strategy `run` and `chat` take from their options (#40): sampling with the session's chain,
// beam search (--beam-width) or speculative decoding (--draft-model). Checked and set up once per command,
// then run once per prompt (run: its prompt; chat: each turn's conversation).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "glassbox/engine.hpp"
#include "glassbox/speculative.hpp"
#include "run_options.hpp"
#include "session.hpp"

namespace glassbox::cli {

class StrategyChoice {
 public:
  // The options the session is opened with: with --beam-width, the greedy chain (the search ranks the
  // model's own log-probabilities; width 1 is greedy). Refuses, naming the flags, what a strategy would
  // ignore or cannot do: another chain, a grammar, --replay or a dropping context policy with beams;
  // --length-penalty without beams; --draft-tokens/--draft-tokenizer without a draft; draft and beams
  // together. `given(key)`: whether the option with that table key was given (command line or config).
  static RunOptions session_options(const RunOptions& opt, const std::function<bool(const char*)>& given);

  // `s` is the session opened with session_options(opt); it must outlive this. Opens the draft
  // (--draft-model) and records it in s.header.
  StrategyChoice(const RunOptions& opt, Session& s);
  ~StrategyChoice();
  StrategyChoice(const StrategyChoice&) = delete;
  StrategyChoice& operator=(const StrategyChoice&) = delete;

  // One generation. From the prompt's text (encoded as `run` encodes it), or from ids the caller encoded
  // (chat's conversation; `prompt` is then the text they stand for, for the trace).
  Summary generate(std::string_view prompt, const GenerateOptions& g, TraceSink& sinks, const StreamFn& on_piece);
  Summary generate(std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& g, TraceSink& sinks,
                   const StreamFn& on_piece);

  // The positions a prompt and its continuation may use (the sampled engine's limit).
  int context_limit() const { return engine_.context_limit(); }

 private:
  Summary beam_search(std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& g, TraceSink& sinks,
                      const StreamFn& on_piece);
  RunOptions opt_;
  Session& s_;
  std::unique_ptr<Session> draft_;
  Engine engine_;
  std::unique_ptr<SpeculativeEngine> speculative_;
};

}  // namespace glassbox::cli
