// What the engine reports while it runs: a header, one event per step, a summary. Sinks format them.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/forward/attention.hpp"
#include "glassbox/model/config.hpp"
#include "glassbox/params.hpp"

namespace glassbox {

enum class TraceLevel { Basic, Full };  // Full adds every logit of every step

struct PluginRecord {
  std::string kind;  // "tokenizer", "attention", "sampler"
  std::string name;
  Params params;
};

// Speculative decoding's setup (speculative.hpp), for the header: which draft proposes how many tokens.
struct SpeculativeSetup {
  std::string draft_model;      // its file
  std::string draft_tokenizer;  // its tokenizer's file ("" when the model carries its vocabulary)
  int k = 0;                    // tokens drafted per round
};

struct RunHeader {
  std::string model_path;
  std::string model_sha256;
  // Set (with model_sha256 empty) while the digest is still being computed on another thread: a sink
  // that records it calls this, which waits for it, as late as it can (the trace writer: before its
  // first line after the header), so hashing the model overlaps the run instead of delaying it.
  std::function<std::string()> model_sha256_pending;
  Config config;
  std::string weight_types;           // e.g. "Q8_0:32, F16:5, F32:11"
  std::string tokenizer_path;
  std::vector<PluginRecord> plugins;  // tokenizer, attention, then the sampler chain in order
  std::uint64_t seed = 0;
  std::string rng;                    // generator name
  std::string prompt;
  std::vector<std::int32_t> prompt_ids;
  int max_tokens = 0;
  TraceLevel level = TraceLevel::Basic;
  std::string kernels;                // the SIMD kernel set that ran ("avx512", "avx2", "sse4.2"); empty: not recorded
  int threads = 0;                    // threads the matrix products used (0: not recorded)
  std::optional<SpeculativeSetup> speculative;  // run --draft-model only
};

struct TokenProb {
  std::int32_t id;
  float logit;
  float prob;
};

// One query position's attention weights for one (layer, head): weights[i] belongs to position first_pos + i.
struct AttentionRow {
  int layer = 0, head = 0, pos = 0, first_pos = 0;
  std::vector<float> weights;
};

// The distribution after one sampler stage.
struct StageRecord {
  std::string name;
  const Params* params = nullptr;
  int kept = 0;          // candidates left
  float mass = 0;        // raw model probability mass of the kept candidates
  float entropy = 0;     // entropy (nats) of the renormalised distribution after the stage
  float u = -1;          // the uniform number a non-selecting stage drew (xtc), -1: none
  std::vector<TokenProb> top;  // its most likely candidates (prob renormalised)
};

// The logit lens at one point of the residual stream: the output head applied there,
// softmax(Wcls·Norm_final(h)), as if the model ended at that point.
struct LensRecord {
  int layer = 0;             // 1..n_layers: after block `layer`, or inside it (attn)
  bool attn = false;         // inside the block: after its attention, before its FFN
  float entropy = 0;         // of that distribution (nats)
  std::vector<TokenProb> top;  // its most likely tokens
};

// Beam search (beam_search.hpp): one candidate continuation of a beam. `parent` is the index of the beam
// it extends in the previous step's `live` list (at step 0: 0, the prompt).
struct BeamEntry {
  int parent = 0;
  std::int32_t token = -1;
  std::string text;          // the token's piece, decoded after the parent's last token
  double logprob = 0;        // log p(token | the parent's tokens) under the model's distribution
  double score = 0;          // the sequence's total log-probability: the parent's score + logprob
  int length = 0;            // finished only: generated tokens, the end-of-generation token included
  double normalized = 0;     // finished only: score / length^length_penalty
};
// What one step of a beam search did: every beam it kept, every hypothesis it finished, every
// candidate it ranked (the best 2·width) but dropped.
struct BeamStep {
  int width = 0;
  std::vector<BeamEntry> live;      // the beams kept, best score first
  std::vector<BeamEntry> finished;  // hypotheses ended here (an end-of-generation token among the best width)
  std::vector<BeamEntry> pruned;    // ranked candidates neither kept nor finished, best first
};
// The search as a whole, in the run's summary.
struct BeamHypothesis {
  std::vector<std::int32_t> tokens;  // the generated tokens (the end-of-generation one included)
  std::string text;
  double score = 0, normalized = 0;
  int length = 0;
  int step = 0;                      // the step whose record lists it (finished, or live at the last step)
  std::string ended;                 // "stop_token" | "max_tokens" | "context_full"
};
struct BeamSummary {
  int width = 0;
  double length_penalty = 1;
  std::string early_stopping = "heuristic";  // Hugging Face's early_stopping=False (docs/beam-search.md)
  int search_steps = 0;                 // steps searched (the winner may have ended earlier)
  std::int64_t forwards = 0;            // single-position forward passes (the prefill counts as one)
  std::int64_t kv_copies = 0;           // beams whose K/V rows were copied from another's
  std::vector<BeamHypothesis> hypotheses;  // the best `width` finished, best first: [0] is the winner
  std::vector<BeamStep> after;          // records of the steps searched after the winner's last step
};

// One drafted token of a speculative round and what the target made of it.
struct SpecProposal {
  enum Verdict { Accepted, Rejected, Unchecked };
  std::int32_t id = -1;
  float q = 0;                 // its probability under the draft's chain distribution
  float p = -1;                // under the target's (-1: unchecked, an earlier proposal was rejected)
  float u = -1;                // the acceptance draw, accepted when u < p/q (-1: none drawn: greedy, or unchecked)
  Verdict verdict = Unchecked;
};

// Where a step's token came from in a speculative round (one target forward over the round's positions).
struct SpeculativeStep {
  int round = 0;                            // the round (target forward), from 0
  int index = 0;                            // this token's place in the round, from 0
  const char* outcome = "accepted";         // "accepted" (the draft's token) | "resampled" (from the residual) | "bonus"
  const SpecProposal* draft = nullptr;      // the proposal at this place (null for the bonus token)
  bool last = false;                        // the round ends with this step; then also:
  std::span<const SpecProposal> proposals;  //   every drafted token of the round, with its verdict
  int accepted = 0;                         //   how many of them the target accepted
  std::span<const TokenProb> residual;      // "resampled" only: top of norm(max(0, p − q)) (logit unused)
};

struct StepEvent {
  const char* phase = "decode";          // "prefill" | "decode"
  int step = 0;                          // 0 = prefill
  int pos = 0;                           // position of the last input token
  std::span<const std::int32_t> input_ids;
  std::int32_t token = -1;               // the chosen next token
  std::string_view token_text;           // its piece as decoded after the input
  float prob = 0, logprob = 0;           // of the chosen token under the raw model distribution
  float chain_prob = 0;                  // of the chosen token after the whole sampler chain
  float entropy = 0;                     // of the raw distribution (nats)
  std::span<const TokenProb> top;        // raw distribution's top candidates
  std::span<const float> logits;         // every logit, only at TraceLevel::Full
  std::span<const StageRecord> stages;   // distribution after each sampler stage
  float draw_u = -1;                     // uniform number of the final draw (-1: none, argmax)
  std::int32_t sampled = -1;             // the sampler chain's own choice (differs from token when forced)
  bool forced = false;                   // token was teacher-forced (replay), not the sampler's choice
  const KvState* kv = nullptr;           // the attention module's state after the step
  std::int64_t attention_dots = 0;       // query·key dot products this step (positions × heads × layers)
  int batch = 0;                         // > 1: the forward pass that gave this step's logits decoded that many sequences
  int prefix_reused = 0;                 // > 0 (prefill): the first positions' K/V were copied from a prefix cache, not computed
  std::span<const AttentionRow> attention;  // newest position's weights, only with --trace-attention
  std::span<const LensRecord> lens;      // the logit lens at each point asked for, only with --trace-lens
  const SpeculativeStep* speculative = nullptr;  // only with a draft model (run --draft-model)
  double ms = 0;                         // forward + sampling time of this step
  const BeamStep* beams = nullptr;       // beam search only: the search's state at this step
};

// A context-window policy fired: what it dropped to make room.
struct PolicyEvent {
  std::string policy;                    // "truncate-left" | "shift" | "prune-turns" (chat; also its summarize policy)
  int step = 0;                          // the step about to run (0: the prompt, before prefill)
  int limit = 0;                         // positions the run may use (model context or module capacity)
  int dropped_from = 0, dropped_to = 0;  // positions [from, to) of the sequence before the drop
  std::vector<std::int32_t> dropped_ids; // the tokens dropped
  int kept = 0;                          // tokens left in the context afterwards
  std::string detail;                    // one line for people (e.g. "re-rotated 17 keys by -22")
  // prune-turns: the messages dropped. Positions then count in the conversation's ids before the
  // drop, and `kept` is the prompt the header holds (the drop came before encoding it).
  int turns = 0;
  // prune-turns under `chat --context-policy summarize`: what took the dropped messages' place, a
  // message the summary model wrote, as it encodes on its own (at position dropped_from of the prompt).
  struct Replacement {
    std::string text;                    // the summary message's content
    std::vector<std::int32_t> ids;       // the whole message (the template's markers included)
  };
  std::optional<Replacement> summary;
};

// A speculative run's figures.
struct SpeculativeSummary {
  int k = 0;                     // tokens drafted per round (fewer near the end of the context)
  int rounds = 0;                // target forwards that verified a round
  int draft_forwards = 0;        // the draft's forward calls in those rounds
  int proposed = 0;              // tokens drafted
  int accepted = 0;              // of them, accepted by the target
  int tokens = 0;                // tokens the rounds decided (accepted + resampled + bonus; steps of the trace)
  double acceptance_rate() const { return proposed > 0 ? static_cast<double>(accepted) / proposed : 0; }
  double tokens_per_target_forward() const { return rounds > 0 ? static_cast<double>(tokens) / rounds : 0; }
};

struct Summary {
  int generated = 0;
  std::string stop_reason;  // "stop_token" | "max_tokens" | "context_full" | "stop_text"
  // stop_token: which end-of-generation token ended it (EOS, <|eot_id|>, <|im_end|>, <end_of_turn>, ...)
  std::int32_t stop_token = -1;
  std::string stop_token_text;
  int policy_firings = 0;   // times the context policy dropped tokens
  double ttft_ms = 0;       // start of prefill to the first chosen token
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
  std::optional<BeamSummary> beam;  // beam search only: the hypotheses and the winner
  std::optional<SpeculativeSummary> speculative;  // run --draft-model only
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void header(const RunHeader& h) = 0;
  virtual void step(const StepEvent& e) = 0;
  virtual void policy(const PolicyEvent&) {}
  // Called after the last step, before the run's rates are computed: a sink that finishes its records
  // elsewhere (a writer thread) completes them here, so that the printed tok/s counts that work too.
  virtual void flush() {}
  // Only called when the run completed; a trace without it was cut short.
  virtual void summary(const Summary& s) = 0;
};

// Fans events out to several sinks (trace file, terminal view, ...).
class TeeSink : public TraceSink {
 public:
  void add(TraceSink* s) { sinks_.push_back(s); }
  void header(const RunHeader& h) override { for (auto* s : sinks_) s->header(h); }
  void step(const StepEvent& e) override { for (auto* s : sinks_) s->step(e); }
  void policy(const PolicyEvent& e) override { for (auto* s : sinks_) s->policy(e); }
  void flush() override { for (auto* s : sinks_) s->flush(); }
  void summary(const Summary& x) override { for (auto* s : sinks_) s->summary(x); }
 private:
  std::vector<TraceSink*> sinks_;
};

}  // namespace glassbox
