// The engine: tokenize -> PREFILL -> DECODE (forward -> distribution -> sampler -> append -> stream).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/forward/attention.hpp"
#include "glassbox/forward/transformer.hpp"
#include "glassbox/sampling.hpp"
#include "glassbox/step_recorder.hpp"
#include "glassbox/tokenizer.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox {

// What the engine does when prompt + generation outgrow the positions the run may use (the model's
// context, or the attention module's capacity when that is smaller). docs/attention.md.
struct ContextPolicy {
  enum Kind { Refuse, Stop, TruncateLeft, Shift } kind = Stop;
  int n_keep = 1;  // shift: the first n_keep tokens are never dropped (1: BOS)
  std::string to_string() const;
};
// "refuse" | "stop" | "truncate-left" | "shift" | "shift:N"; ConfigError naming the text otherwise.
ContextPolicy parse_context_policy(const std::string& text);

struct GenerateOptions {
  int max_tokens = 256;           // tokens to generate at most
  bool stop_at_eos = true;        // EOS (and the vocabulary's other end-of-generation tokens) ends generation
  bool stop_at_bos = true;        // so does BOS: llama2.c-trained models separate texts with it
  std::uint64_t seed = 0;
  // Teacher forcing: when non-empty, these tokens are appended instead of the sampled ones
  // (the distribution and the sampler's choice are still computed and traced).
  std::vector<std::int32_t> forced;
  ContextPolicy policy;
  // What the caller dropped before encoding the prompt (`glassbox chat`'s pruned turns, policy
  // "prune-turns"): written as a context line right after the header and counted in the summary.
  std::optional<PolicyEvent> pruned;
  WatchSpec watch;                // what each step records (step_recorder.hpp)
};

// Receives each generated piece as soon as it is chosen.
using StreamFn = std::function<void(std::string_view piece)>;
// Thrown by a StreamFn to end the run at this piece (a chat reply reaching the next turn's marker):
// the run then completes normally, with stop_reason "stop_text", and the piece is not counted.
struct StopGeneration {};

class Engine {
 public:
  Engine(Transformer& model, const Tokenizer& tokenizer, KvStore& attention, SamplerChain& sampler);

  // Runs one generation. `header` is completed with the prompt ids and sent to `sink` first.
  Summary generate(std::string_view prompt, const GenerateOptions& opt, RunHeader header,
                   TraceSink& sink, const StreamFn& on_piece);
  // The same from ids the caller encoded (a chat's conversation, its markers parsed as control
  // tokens); `prompt` is their text, for the header.
  Summary generate(std::vector<std::int32_t> prompt_ids, std::string_view prompt, const GenerateOptions& opt, RunHeader header,
                   TraceSink& sink, const StreamFn& on_piece);

  // Positions a run may use with this model and module: the model's context, or the module's
  // capacity when it is smaller and the module does not evict.
  int context_limit() const;

 private:
  Transformer& model_;
  const Tokenizer& tok_;
  KvStore& attn_;
  SamplerChain& sampler_;
};

}  // namespace glassbox
