// What run and chat share when they stream a generation: --json token lines, --pace (with the prefill
// shown as one step of its real cost), control tokens by name, and the summary line's per-token costs.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "glassbox/model/config.hpp"
#include "glassbox/model/weights.hpp"
#include "glassbox/tokenizer.hpp"
#include "glassbox/trace_events.hpp"
#include "run_options.hpp"

namespace glassbox::cli {

// A control token (BOS, EOS, <|im_end|>) by its piece without the whitespace around it: llama2.c's
// vocabulary spells EOS "\n</s>\n", which is a marker, not text.
std::string control_name(const Tokenizer& tok, std::int32_t id);

// --json: one JSON object per chosen token on stdout, shaped like OpenAI's `logprobs.content[]` entries
// (token, bytes, logprob, top_logprobs) plus the token id, so tools that already parse those read these.
// Logprobs are the raw model distribution's, as in the trace's `logprob` and `top`. A control token
// is given by its name (`</s>`) and marked "special".
class JsonTokenSink final : public TraceSink {
 public:
  using Json = nlohmann::ordered_json;
  JsonTokenSink(const Tokenizer& tok, int top_n) : tok_(tok), top_n_(top_n) {}
  void header(const RunHeader&) override {}
  void step(const StepEvent& e) override;
  void summary(const Summary&) override {}
  // Key order as written (type first), invalid UTF-8 in half-character pieces replaced, never thrown on.
  static void print(const Json& j);
  // Extra members put first in every token line (chat: the turn).
  Json extra = Json::object();

 private:
  const Tokenizer& tok_;
  int top_n_;
};

// --pace MS / --pace-tps R: the pause before each streamed token, so a class can read along.
std::chrono::microseconds pace_delay(const RunOptions& o);

// --pace's cost model of one forward pass, a roofline: a pass takes the longer of its reads (every
// weight matrix once, whatever the number of tokens it carries, plus the K/V entries its queries look
// at) at kBytesPerSecond, and its arithmetic (2 FLOPs per matrix weight per token, plus attention's
// 4·q_dim per query-key pair) at kFlopsPerSecond. The two rates are one core of the reference machine
// in docs/performance.md (triad 12.5 GB/s, FMA peak 177 GFLOP/s): fixed, so the same run shows the
// same figure on every machine and every time, where a measured prefill of a small model is mostly
// noise (4.9 to 186 decode steps over four identical runs). The lesson it shows: a prefill of N
// tokens reads the weights once, as one decode step does, so until its arithmetic catches up with
// its reads (N ≈ 2 × 177 / 12.5 × bytes per weight / 4 ≈ 28 tokens of a float32 model) it costs about
// one step, and always far less than N.
struct PassCost {
  static constexpr double kBytesPerSecond = 12.5e9, kFlopsPerSecond = 177e9;
  double matrix_bytes = 0;     // the layers' matrices and the classifier, as stored (quantized or not)
  double layer_weights = 0;    // weights in the layers' matrices: 2 FLOPs each per token
  double classifier_weights = 0;  // the classifier's, once per pass (logits for the last position only)
  int n_layers = 0, q_dim = 0, kv_dim = 0;
  static PassCost of(const Weights& w, const Config& c);
  // A pass feeding n tokens whose last sits at position last_pos (0-based).
  double bytes(int n, int last_pos) const;
  double flops(int n, int last_pos) const;
  double seconds(int n, int last_pos) const { return std::max(bytes(n, last_pos) / kBytesPerSecond, flops(n, last_pos) / kFlopsPerSecond); }
  // The prefill of n tokens ending at last_pos, in decode steps (the step at last_pos + 1).
  double prefill_in_steps(int n, int last_pos) const { return seconds(n, last_pos) / seconds(1, last_pos + 1); }
};

// A paced stream. Each decode step's piece waits the pace; the prefill's piece (the first token) waits
// the pace times the prefill's cost in decode steps by the cost model (PassCost), so the time to the
// first token is seen in proportion to its cost, the same on every run. Without a cost model (a
// test's stream) it falls back to the measured prefill ms / decode-step ms, known once the first decode
// step has run; the stream always runs one piece behind the engine, finish() shows the last one. Used
// as a sink (for the prefill's size) and a stream.
class PacedStream final : public TraceSink {
 public:
  PacedStream(std::chrono::microseconds pace, std::function<void(std::string_view)> out, bool announce,
              std::optional<PassCost> cost = std::nullopt)
      : pace_(pace), out_(std::move(out)), announce_(announce), cost_(cost) {}
  void header(const RunHeader& h) override;
  void step(const StepEvent& e) override;
  void summary(const Summary&) override {}
  void piece(std::string_view p);
  void finish();  // shows the piece held back (call after generate, also when it stopped early)
  bool paced() const { return pace_.count() > 0; }
  // The longest the prefill is shown for, in paces (a 4k-token prompt would otherwise wait minutes).
  static constexpr double kMaxPrefillPaces = 40;

 private:
  void show_prefill(double decode_ms);
  std::chrono::microseconds pace_;
  std::function<void(std::string_view)> out_;
  bool announce_;
  std::optional<PassCost> cost_;
  int n_prompt_ = 0, n_fed_ = 0, last_pos_ = 0;  // the prompt; the prefill's tokens (a chat turn: the new ones) and last position
  double prefill_ms_ = 0, last_ms_ = 0;
  std::optional<std::string> held_;
  int shown_ = 0;
};

// The summary line's words for a run: "12 tokens, stop: max_tokens, ttft 3.1 ms, prefill 0.21 ms/token
// (14 prompt tokens), decode 0.95 ms/token" (no decode figure without a decode step; "1 token"), and,
// for a model narrower than kSmallModelDim, a note that it is too small for prefill's batching to show
// (decided by the model's shape, not the timings, so that the same run prints the same words).
constexpr int kSmallModelDim = 256;
std::string summary_line(const Summary& s, int n_prompt, int model_dim);

}  // namespace glassbox::cli
