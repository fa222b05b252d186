// Decoding strategies over one engine loop. The loop (run_strategy) owns what every way of choosing tokens
// shares — the prompt's checks and context policy, the trace header, the chain's reset, the stop tests,
// streaming, the step recorder, the rates and the summary; a strategy owns only its lesson: sampled
// (forward → chain → token), beam (beams, scores, early stopping), speculative (draft, verify, accept or
// resample, roll back). docs/architecture.md, "One loop over strategies", says how to add one.
#pragma once
#include <chrono>
#include <memory>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/engine.hpp"

namespace glassbox {

// The parts one generation runs on. `chain` is null for a strategy that ranks the raw distribution itself
// (beam search): the recorder then records no stages, and tokens are accepted by no chain.
struct RunParts {
  Transformer& model;
  const Tokenizer& tok;
  KvStore& attn;
  SamplerChain* chain = nullptr;
};

// One generation as a strategy sees it: the parts, the options, the sequence so far, the step recorder and
// the summary being filled. The loop builds it; strategies read it and call its shared steps.
class DecodeRun {
 public:
  using Clock = std::chrono::steady_clock;
  DecodeRun(const RunParts& parts, const GenerateOptions& opt, TraceSink& sink, const StreamFn& on_piece, int limit);

  Transformer& model;
  const Tokenizer& tok;
  KvStore& attn;
  SamplerChain* chain;
  const GenerateOptions& opt;
  TraceSink& sink;
  const StreamFn& on_piece;
  const int limit;            // positions the run may use
  StepRecorder rec;
  // The tokens in the context, at positions 0 .. seq.size()-1: the prompt as fitted, then every token
  // emitted (what the store holds, or for a module that keeps nothing, what must be recomputed).
  std::vector<std::int32_t> seq;
  int n_prompt = 0;           // prompt tokens the prefill runs (after the context policy)
  Summary sum;
  // The rates' parts, added to by the strategy: prefill_tok_s = n_prompt / prefill_ms, decode_tok_s =
  // decode_units / decode_ms (units: the strategy's own, said in its summary docs — steps, search steps,
  // tokens decided).
  double prefill_ms = 0, decode_ms = 0;
  int decode_units = 0;
  bool closed = false;        // its summary has gone to the sink

  // Runs seq[from, to) at positions from.. through `m` and its store in blocks of m.max_block(); observed:
  // the last block's last position is the one the recorder watches (attention rows, the lens). Returns the
  // last block's last logits; `dots`, when given, is added each block's attention work.
  std::span<const float> run_blocks(Transformer& m, KvStore& kv, int from, int to, bool observed,
                                    std::int64_t* dots = nullptr);
  std::span<const float> run_blocks(int from, int to, bool observed, std::int64_t* dots = nullptr) {
    return run_blocks(model, attn, from, to, observed, dots);
  }

  // End of generation: EOS and the vocabulary's other end-of-generation ids (<|eot_id|>, <|im_end|>,
  // <end_of_turn>, ...), and BOS for llama2.c-trained models that separate texts with it.
  bool is_stop(std::int32_t t) const;

  // A token decided after `prev`, once its step record went to the sink: a stop token ends the run
  // unstreamed (stop_reason "stop_token"); otherwise it is streamed (a StopGeneration from the stream ends
  // it: "stop_text"), accepted by the chain and counted, and max_tokens may end it. Returns false when the
  // run ends here (sum.stop_reason says why). The strategy appends it to `seq` when it feeds it.
  bool emit(std::int32_t prev, std::int32_t token);

  static double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }

 private:
  std::vector<std::int32_t> eog_;  // end-of-generation ids
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Refuses (ConfigError) what it cannot honour — context policies, teacher forcing, the prompt's length —
  // before anything is written.
  virtual void check(const GenerateOptions& opt) const {}
  // Whether it can run a prompt the context policy truncated (a search over several sequences cannot).
  virtual bool truncates() const { return true; }
  // The strategy's parts of the header (speculative: the draft).
  virtual void describe(RunHeader& header) const {}
  // Once the chain has been reset and has seen the prompt, before the first advance.
  virtual void begin(DecodeRun& run) {}
  // Decides the next token or tokens — each recorded to run.sink, then handed to run.emit — and returns
  // false when the run has ended (run.sum.stop_reason set).
  virtual bool advance(DecodeRun& run) = 0;
  // Its figures in the summary (beam: the hypotheses; speculative: the rounds); also when nothing ran.
  virtual void end(DecodeRun& run) {}
};

// run_strategy's two ends, for a driver that steps several runs itself (SampledBatch): open_run does
// everything before the first advance — checks, the context policy on the prompt, the header, the chain's
// reset, strategy.begin — and returns the run; with max_tokens = 0 that run has already ended (its summary
// went to the sink, `closed` is set). close_run flushes the sink, fills the rates and ends the summary.
std::unique_ptr<DecodeRun> open_run(const RunParts& parts, Strategy& strategy, std::vector<std::int32_t> ids, std::string_view prompt,
                                    const GenerateOptions& opt, RunHeader header, TraceSink& sink, const StreamFn& on_piece);
Summary close_run(DecodeRun& run, Strategy& strategy);

// The one loop: checks, tokens in the vocabulary, the context policy on the prompt, the header, the chain's
// reset, then strategy.begin and strategy.advance until it says done, then the flush, the rates and the
// summary. `ids`: the prompt as encoded; `prompt`: its text, for the header.
Summary run_strategy(const RunParts& parts, Strategy& strategy, std::vector<std::int32_t> ids, std::string_view prompt,
                     const GenerateOptions& opt, RunHeader header, TraceSink& sink, const StreamFn& on_piece);

// Sampled decoding, the lesson's loop: PREFILL the prompt in blocks, then DECODE one token per step
// (forward → distribution → chain → token), with the context policy when the context is full.
class SampledStrategy final : public Strategy {
 public:
  void begin(DecodeRun& run) override;
  // begin_step, the forward pass it asks for, end_step.
  bool advance(DecodeRun& run) override;

  // advance in two halves, for batched decode (SampledBatch runs one forward pass for several runs between
  // them). begin_step streams the last token and feeds it back; it returns Ended when the run has ended
  // (run.sum.stop_reason set), Done when it ran the whole step itself (the prefill, a refill after the
  // context policy, a store that keeps nothing), and Forward when the step waits for one token's forward
  // pass: `row` says which token, position, store, attention observer and lens, and end_step takes the
  // logits that pass produced, its attention work (dot products) for this row and how many rows the pass
  // carried (the step's record says so, as `batch`, when more than one).
  enum class Step { Ended, Done, Forward };
  // Chunked prefill: each begin_step runs one block (the model's max_block positions) of the prompt and
  // returns Done, the last one also choosing the first token; the results are the same blocks' (SampledBatch
  // turns it on, so that a long prompt does not stall the batch's other runs for its whole prefill).
  void chunk_prefill(bool on) { chunked_ = on; }
  // Prefix reuse (PrefixCache): the run's store already holds the K/V of the prompt's first `positions`
  // (copied, the same numbers its prefill would compute), so the prefill starts after them; its record
  // says so (prefix_reused). Only before the first step, and for fewer positions than the prompt has (the
  // last one must go through the model for the first distribution).
  void reuse_prefix(DecodeRun& run, int positions);
  // Whether the prompt's prefill has finished (the first token is chosen).
  bool prefilled() const { return step_ > 0; }
  Step begin_step(DecodeRun& run, BatchRow& row);
  void end_step(DecodeRun& run, std::span<const float> logits, std::int64_t attention_dots, int pass_rows = 1);

 private:
  void choose_and_report(DecodeRun& run, const char* phase, std::span<const std::int32_t> input,
                         std::span<const float> logits, DecodeRun::Clock::time_point t0);
  bool fit_context(DecodeRun& run, bool& refill);
  int step_ = 0;
  int pos_ = -1;             // position of the last token fed
  std::int32_t last_ = -1;   // the last token fed
  std::int32_t next_ = -1;   // the token the last step chose
  std::int64_t dots_ = 0;    // attention work of the current step
  DecodeRun::Clock::time_point t0_{};  // when the current step began
  bool chunked_ = false;
  int pass_rows_ = 1;                  // rows of the pass that gave the current step's logits
  int prefill_at_ = 0;                 // prompt positions prefilled so far
  int prefix_reused_ = 0;              // of them, copied from a prefix cache
  DecodeRun::Clock::time_point prefill_t0_{};
};

}  // namespace glassbox
