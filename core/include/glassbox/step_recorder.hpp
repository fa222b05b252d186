// What a run watches, decided once in one spec, and the step recorder built from it: it owns everything a
// step exposes beyond the chosen token (the raw distribution, the stage records, attention rows, the logit
// lens), so that the engine loop only runs the model and the chain and hands the recorder what happened.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "glassbox/forward/transformer.hpp"
#include "glassbox/sampling.hpp"
#include "glassbox/tokenizer.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox {

// Which attention weights to record: one (layer, head), or every one (-1, -1).
struct AttentionTrace {
  bool on = false;
  int layer = -1, head = -1;  // -1: all
};
// "LAYER:HEAD" | "all"; ConfigError otherwise (ranges are checked against the model by the recorder).
AttentionTrace parse_attention_trace(const std::string& text);

// The logit lens: the output head applied to the residual stream after every block (Blocks), or also
// after each block's attention, before its FFN (All). Each point costs one output-head product
// (vocab_size × dim multiply-adds) and a softmax per step.
enum class LensPoints { Off, Blocks, All };
// "blocks" (or empty) | "all" | "off"; ConfigError otherwise.
LensPoints parse_lens_points(const std::string& text);

// What each step records beyond its token, KV state and timing.
struct WatchSpec {
  TraceLevel level = TraceLevel::Basic;  // Full adds every logit of every step
  int top_k = 10;                        // candidates listed per step, per stage and per lens point
  // Each step's raw distribution: softmax, entropy and top-k (off: steps carry only the token, KV usage
  // and timing — what a run without a trace needs).
  bool distribution = true;
  // The distribution after each sampler stage (StepEvent::stages, chain_prob). Costs a copy and a
  // partial sort per stage per step; turn off when no one reads the events.
  bool stages = true;
  AttentionTrace attention;           // off: no observer is installed, no extra work
  LensPoints lens = LensPoints::Off;  // off: no residual row is kept, no extra product
};

// The facts of one finished step, as the engine loop has them.
struct StepFacts {
  const char* phase = "decode";             // "prefill" | "decode"
  int step = 0, pos = 0;
  std::span<const std::int32_t> input;      // the tokens fed this step
  std::span<const float> logits;            // the model's output for the last of them
  SampleResult pick;                        // the chain's own choice
  std::int32_t token = -1;                  // the token appended (pick.id, or a forced one)
  bool forced = false;
  std::int64_t attention_dots = 0;
  int batch = 0;                            // sequences in the batched pass that gave the logits (0: alone)
  int prefix_reused = 0;                    // prefill: prompt positions whose K/V came from a prefix cache
  double ms = 0;
};

class StepRecorder {
 public:
  // Checks the spec against the model (attention layer/head ranges): ConfigError naming them.
  StepRecorder(const WatchSpec& watch, Transformer& model, const Tokenizer& tok, const SamplerChain& chain);
  // Without a chain (a strategy that ranks the raw distribution itself: beam search): no stage records,
  // whatever watch.stages says.
  StepRecorder(const WatchSpec& watch, Transformer& model, const Tokenizer& tok);
  // Either of the above: with `chain` null, the second.
  StepRecorder(const WatchSpec& watch, Transformer& model, const Tokenizer& tok, const SamplerChain* chain);
  ~StepRecorder();
  const WatchSpec& watch() const { return watch_; }

  // What to hand the sampler chain and the forward pass of a step's last block (null: not watched).
  StageObserver* stage_observer() { return stages_ ? stages_.get() : nullptr; }
  AttentionObserver* attention_observer();
  LensCapture* lens() { return lens_ ? &*lens_ : nullptr; }

  // The step event of a finished step: the raw distribution (reusing the stage recorder's pass when it
  // ran), the stage records, the KV state of `kv`, attention rows and the lens. Valid until the next call.
  const StepEvent& record(const StepFacts& f, const KvStore& kv);

 private:
  void record_distribution(StepEvent& e, const StepFacts& f);
  void record_lens();

  WatchSpec watch_;
  Transformer& model_;
  const Tokenizer& tok_;
  int top_k_;
  std::unique_ptr<StageRecorder> stages_;
  class Collector;
  std::unique_ptr<Collector> attention_;
  std::optional<LensCapture> lens_;
  StepEvent event_;
  std::vector<float> w_;                    // (vocab_size) exp(l_i - max l), when no stage recorder kept them
  std::vector<std::int32_t> order_;         // (max(top_k, 1)) top ids
  std::vector<std::int32_t> top_scratch_;   // (vocab_size + vocab_size/16) top_logits' scratch
  std::vector<TokenProb> top_;              // (top_k)
  std::vector<float> lens_logits_;          // (vocab_size) the head's output at one lens point
  std::vector<LensRecord> lens_records_;    // (points) reused every step
  KvState kv_;                              // the module's state record, refilled each step
};

}  // namespace glassbox
