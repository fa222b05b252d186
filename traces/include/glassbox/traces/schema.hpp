// The glassbox.trace schema (versions 1 and 2) as C++ types: one struct per line kind, converted to and from JSON in one
// place (traces/src/schema.cpp) that validates as it converts. The writer serializes these types and every
// reader (validate, diff, render, html, replay) uses them; no other code reads a trace line by string key.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/params.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox::traces {

// The format's version (docs/trace-format.md, "Versions"). A change to what a field holds (its type or its
// meaning) bumps it, and readers keep reading the versions before; a new optional field, absent when its
// feature is off, does not. Writers write kSchema; readers accept every entry of kReadableSchemas.
//   glassbox.trace/1  the first version: `logits` an array of numbers
//   glassbox.trace/2  `logits` may be one base64 string (--trace-logits base64, the default)
// Legacy allowance: glassbox releases between --trace-logits base64 and the bump to /2 wrote base64 logits
// under /1; readers take them (`trace validate` says so in a note).
inline constexpr const char* kSchema = "glassbox.trace/2";
inline constexpr std::array<const char*, 2> kReadableSchemas = {"glassbox.trace/1", "glassbox.trace/2"};
// What every version's name starts with: a file whose header names "glassbox.trace/N" is a glassbox trace,
// of a version this glassbox reads or not (the reader then names the value and the versions it reads).
inline constexpr std::string_view kSchemaPrefix = "glassbox.trace/";
// The version number of a readable schema string (1, 2), or 0 when this glassbox does not read it.
int schema_version(std::string_view schema);
// "glassbox.trace/1 or glassbox.trace/2", for messages.
std::string readable_schemas_text();

// How a full trace writes every logit of a step: a JSON array of numbers (each float's shortest decimal
// text), or one string, the base64 (RFC 4648, padded) of the logits as little-endian IEEE float32 — exact by
// construction, ~2/3 the size, and ~15× cheaper to write. Readers take either; the values read are the same.
enum class LogitsEncoding { Decimal, Base64 };

// Writes the base64 text of `v`'s float32 bytes (little-endian) at `out` (4·ceil(4·n/3)/4 characters,
// no quotes, no terminator); returns its end.
char* write_float32_base64(char* out, std::span<const float> v);
std::size_t float32_base64_size(std::size_t n);
// The floats back from such a text; false when it is not canonical padded base64 of exactly n floats.
bool read_float32_base64(std::string_view text, std::size_t n, std::vector<float>& out);

// header.model.config: the checkpoint's shape as the run saw it.
struct TraceModelConfig {
  int dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
  bool shared_classifier = true;
  int format_version = 0;
  double rope_theta = 0;
  std::optional<double> norm_eps;  // written since GGUF support; older traces lack it
  bool operator==(const TraceModelConfig&) const = default;
};

struct TraceModel {
  std::string path, sha256;
  std::optional<std::string> format, architecture, weight_types;  // newer writers only
  // The architecture's description and resolved facts (docs/architectures.md), as name → text pairs:
  // norm, position, ffn, ..., head_dim, attn_scale, windows. Written since glassbox 0.4; optional.
  std::optional<std::map<std::string, std::string>> arch;
  TraceModelConfig config;
  bool operator==(const TraceModel&) const = default;
};

// A plugin as configured: name and resolved parameters.
struct TracePlugin {
  std::string name;
  Params params;
  bool operator==(const TracePlugin& o) const { return name == o.name && params.values() == o.params.values(); }
};

// header.imported: the trace was made by `glassbox trace import` from another engine's output (optional,
// since glassbox 0.5; docs/trace-format.md). `distribution` says what each step's `top`/`prob` hold:
// "raw" the model's distribution (log-softmax of the logits), "post" the engine's distribution after its
// own sampler chain, "logits" raw with every logit (the step's `logits` are the engine's).
struct TraceImport {
  std::string dialect, file, distribution;
  bool operator==(const TraceImport&) const = default;
};

// header.speculative (run --draft-model; optional, docs/speculative.md): which draft proposed how many tokens.
struct TraceSpeculativeSetup {
  std::string draft_model;
  std::optional<std::string> draft_tokenizer;  // absent: a GGUF draft's own vocabulary
  int k = 0;                                   // tokens drafted per round
  bool operator==(const TraceSpeculativeSetup&) const = default;
};

struct TraceHeader {
  TraceModel model;
  std::string tokenizer_path;
  TracePlugin tokenizer, attention;   // header.plugins.tokenizer / .attention
  std::vector<TracePlugin> samplers;  // header.plugins.sampler, in chain order (never empty)
  std::uint64_t seed = 0;
  std::string rng, prompt;
  std::vector<std::int32_t> prompt_ids;  // never empty (starts with BOS)
  int max_tokens = 0;
  TraceLevel level = TraceLevel::Basic;
  std::optional<std::string> kernels;
  std::optional<int> threads;
  std::optional<TraceImport> imported;  // made by `trace import` (another engine's numbers)
  std::optional<TraceSpeculativeSetup> speculative;  // run --draft-model
  // How the header was written: the version it names (as read; kSchema for a header made here, which is what
  // every writer writes). to_json writes it back the same way, so a trace read and written again is the same
  // bytes, an older version's included. Not part of what the run says: a /1 golden and a /2 trace of one run
  // compare equal.
  struct Written {
    std::string schema = kSchema;
    bool operator==(const Written&) const { return true; }
  } written;
  bool operator==(const TraceHeader&) const = default;
};

// One candidate of a distribution. The raw distribution's candidates have a logit; a stage's do not.
struct TraceCandidate {
  std::int32_t id = 0;
  std::string text;
  std::optional<double> logit;
  double prob = 0;
  bool operator==(const TraceCandidate&) const = default;
};

// The distribution after one sampler stage.
struct TraceStage {
  std::string name;
  Params params;
  int kept = 0;
  double mass = 0, entropy = 0;
  std::vector<TraceCandidate> top;
  std::optional<double> u;  // the uniform number a non-selecting stage drew (xtc); absent: none
  bool operator==(const TraceStage& o) const {
    return name == o.name && params.values() == o.params.values() && kept == o.kept && mass == o.mass &&
           entropy == o.entropy && top == o.top && u == o.u;
  }
};

struct TraceDraw {
  std::optional<double> u;  // none: an argmax, nothing drawn
  std::int32_t selected = 0;  // the chain's own pick
  double prob = 0;            // of the pick after the whole chain
  bool operator==(const TraceDraw&) const = default;
};

// The attention module's state after a step. Older traces have only tokens, capacity and bytes.
struct TraceKv {
  std::int64_t tokens = 0, capacity = 0, bytes = 0;
  std::optional<std::string> module;
  std::optional<Params> params;
  std::optional<std::int64_t> first_pos, evicted;
  struct Blocks {  // a paged module's
    std::int64_t block_size = 0, blocks_used = 0, blocks_free = 0, last_block_unused = 0;
    std::vector<std::int64_t> block_table;
    bool operator==(const Blocks&) const = default;
  };
  std::optional<Blocks> blocks;
  bool operator==(const TraceKv& o) const {
    return tokens == o.tokens && capacity == o.capacity && bytes == o.bytes && module == o.module &&
           params.has_value() == o.params.has_value() && (!params || params->values() == o.params->values()) &&
           first_pos == o.first_pos && evicted == o.evicted && blocks == o.blocks;
  }
};

struct TraceAttentionRow {
  int layer = 0, head = 0, pos = 0, first_pos = 0;
  std::vector<double> weights;  // weights[i] belongs to position first_pos + i
  bool operator==(const TraceAttentionRow&) const = default;
};

// The logit lens at one point of the residual stream (run --trace-lens): the output head applied there.
struct TraceLens {
  int layer = 0;                     // 1..n_layers
  bool attn = false;                 // "point": "attn" — inside the block, after its attention; else after the block
  double entropy = 0;
  std::vector<TraceCandidate> top;   // sorted by logit, each with its logit
  bool operator==(const TraceLens&) const = default;
};

// step.beams (beam search only, docs/beam-search.md): one continuation a step ranked. `parent` indexes the
// previous step's `live` list (at step 0: 0, the prompt); finished entries also carry length and normalized.
struct TraceBeamEntry {
  int parent = 0;
  std::int32_t token = 0;
  std::string text;
  double logprob = 0, score = 0;
  std::optional<int> length;          // finished only
  std::optional<double> normalized;   // finished only: score / length^length_penalty
  bool operator==(const TraceBeamEntry&) const = default;
};
struct TraceBeams {
  int width = 0;
  std::vector<TraceBeamEntry> live, finished, pruned;
  bool operator==(const TraceBeams&) const = default;
};
// summary.beam: the kept hypotheses (best first: [0] is the winner, the steps' tokens) and the search's cost.
struct TraceBeamHypothesis {
  std::vector<std::int32_t> tokens;
  std::string text;
  double score = 0, normalized = 0;
  int length = 0, step = 0;
  std::string ended;  // "stop_token" | "max_tokens" | "context_full"
  bool operator==(const TraceBeamHypothesis&) const = default;
};
struct TraceBeamSummary {
  int width = 0;
  double length_penalty = 1;
  std::string early_stopping;
  int search_steps = 0;
  std::int64_t forwards = 0, kv_copies = 0;
  std::vector<TraceBeamHypothesis> hypotheses;
  std::vector<TraceBeams> after;  // steps searched after the winner's last one
  bool operator==(const TraceBeamSummary&) const = default;
};

// step.speculative (run --draft-model): a drafted token and the target's verdict on it.
struct TraceProposal {
  std::int32_t id = 0;
  std::string text;
  double q = 0;                 // the draft's chain probability
  std::optional<double> p, u;   // the target's, and the acceptance draw (absent: unchecked; u also absent for greedy)
  std::string verdict;          // "accepted" | "rejected" | "unchecked"
  bool operator==(const TraceProposal&) const = default;
};

// Where a step's token came from in a speculative round (one target forward).
struct TraceSpeculative {
  int round = 0, index = 0;
  std::string outcome;                                  // "accepted" | "resampled" | "bonus"
  std::optional<TraceProposal> draft;                   // the proposal at this place (absent for the bonus)
  std::optional<std::vector<TraceProposal>> proposals;  // the round's last step: every proposal ...
  std::optional<int> accepted;                          // ... and how many were accepted
  std::optional<std::vector<TraceCandidate>> residual;  // resampled: top of norm(max(0, p − q))
  bool operator==(const TraceSpeculative&) const = default;
};

enum class TracePhase { Prefill, Decode };

struct TraceStep {
  TracePhase phase = TracePhase::Decode;
  int step = 0, pos = 0;
  std::vector<std::int32_t> input_ids;
  std::int32_t token = 0;  // the appended token ...
  std::string token_text;  // ... and its text
  double prob = 0, logprob = 0, entropy = 0;
  std::vector<TraceCandidate> top;  // raw distribution, sorted by logit (each has one)
  std::vector<TraceStage> stages;
  TraceDraw draw;
  TraceKv kv;
  std::optional<std::int64_t> attention_dots;
  std::optional<std::int64_t> batch;  // sequences in the batched pass that gave this step's logits (absent: alone)
  std::optional<std::int64_t> prefix_reused;  // prefill: prompt positions whose K/V a prefix cache gave (absent: none)
  std::optional<std::vector<TraceAttentionRow>> attention;
  std::optional<std::vector<TraceLens>> lens;  // only with --trace-lens
  std::optional<TraceSpeculative> speculative;  // only with --draft-model
  double ms = 0;
  std::vector<double> logits;  // every logit (vocab_size of them) at trace level full; empty at basic
  // How the step is written. Not part of what the step says, so two steps with the same numbers compare
  // equal however each was written.
  struct Written {
    LogitsEncoding logits = LogitsEncoding::Decimal;  // as read; to_json writes them back the same way
    // The reals hold float32 values exactly: the writer's copy of an engine step (writer.cpp, step_into).
    // Each is then written as the float's shortest text; a read step's as nlohmann-json prints the double.
    bool float32 = false;
    bool operator==(const Written&) const { return true; }
  } written;
  bool forced = false;         // teacher-forced (a replay): token is the golden's, draw.selected the chain's
  // A partial distribution (imported top-N): the probability mass of every candidate `top` does not list.
  // 1 with an empty `top`: the engine reported nothing for this step (llama.cpp's held-back tokens).
  // Absent: glassbox's own step, whose rest is 1 - sum(top.prob) of a complete softmax.
  std::optional<double> unlisted;
  std::optional<TraceBeams> beams;  // beam search only
  bool operator==(const TraceStep&) const = default;
};

// A context policy dropped tokens before step `step`.
struct TraceContext {
  std::string policy;  // "truncate-left" | "shift" | "prune-turns"
  int step = 0, limit = 0;
  int dropped_from = 0, dropped_to = 0;
  std::vector<std::int32_t> dropped_ids;
  std::optional<std::string> dropped_text;
  int kept = 0;
  std::optional<std::string> detail;
  // prune-turns (a chat dropped whole messages before encoding): how many; positions then count in the
  // conversation's ids before the drop, and `kept` is the prompt the header holds.
  std::optional<int> turns;
  // prune-turns under chat's summarize policy (optional, absent from older traces): the message written in the
  // dropped ones' place, its text and ids as it encodes on its own, at `dropped_from` of the prompt.
  struct Summary {
    std::string text;
    std::vector<std::int32_t> ids;
    bool operator==(const Summary&) const = default;
  };
  std::optional<Summary> summary;
  bool operator==(const TraceContext&) const = default;
};

struct TraceSummary {
  int generated = 0;
  std::string stop_reason;  // "stop_token" | "max_tokens" | "context_full" | "stop_text"
  double ttft_ms = 0, prefill_tok_s = 0, decode_tok_s = 0;
  std::optional<int> policy_firings;
  std::optional<std::int32_t> stop_token;     // the end-of-generation id that stopped it (stop_token only)
  std::optional<std::string> stop_token_text; // its text, e.g. "<|im_end|>"
  std::optional<TraceBeamSummary> beam;       // beam search only
  // run --draft-model: the rounds' figures (docs/speculative.md)
  struct Speculative {
    int k = 0, rounds = 0, draft_forwards = 0, proposed = 0, accepted = 0, tokens = 0;
    double acceptance_rate = 0, tokens_per_target_forward = 0;
    bool operator==(const Speculative&) const = default;
  };
  std::optional<Speculative> speculative;
  bool operator==(const TraceSummary&) const = default;
};

// The last line of a run cut short: type "error" or "interrupted".
struct TraceEnd {
  std::string type, message;
  std::optional<std::string> signal;  // interrupted only
  bool operator==(const TraceEnd&) const = default;
};

// Limits on what a trace file may ask of the reader (docs/reliability.md): a longer line or deeper
// nesting is a TraceError naming the line, before anything is allocated for it.
inline constexpr std::size_t kMaxTraceLineBytes = std::size_t{64} << 20;  // a full step of a 1M-token vocabulary fits
inline constexpr int kMaxTraceJsonDepth = 64;                                // the schema itself needs 5

// One line's text -> JSON object with a string "type" (checks length-independent limits: nesting depth,
// number range). Throws TraceError "WHERE: what is wrong".
nlohmann::json parse_trace_line(const std::string& text, const std::string& where);
std::string line_type(const nlohmann::json& line);  // its "type" (parse_trace_line checked it is a string)

// JSON -> typed, validating every field as docs/trace.schema.json says. `where` prefixes messages
// ("t.jsonl:3"). A step needs the header's vocab_size and trace level. Unknown fields are ignored.
TraceHeader parse_header(const nlohmann::json& j, const std::string& where);
TraceStep parse_step(const nlohmann::json& j, const std::string& where, int vocab_size, bool full);
TraceContext parse_context(const nlohmann::json& j, const std::string& where);
TraceSummary parse_summary(const nlohmann::json& j, const std::string& where);
TraceEnd parse_end(const nlohmann::json& j);  // tolerant: a missing message reads "(no message)"

// typed -> JSON, as the writer writes it (keys sorted; a trace read and written back is byte-identical).
nlohmann::json to_json(const TraceHeader& h);
nlohmann::json to_json(const TraceModelConfig& c);
nlohmann::json to_json(const TracePlugin& p);
// The logits as the step was written (s.written), or as numbers with `decimal_logits` (for JSON consumers).
nlohmann::json to_json(const TraceStep& s, bool with_logits = true, bool decimal_logits = false);
nlohmann::json to_json(const TraceKv& kv);
nlohmann::json to_json(const TraceContext& c);
nlohmann::json to_json(const TraceSummary& s);
nlohmann::json to_json(const TraceEnd& e);
nlohmann::json to_json(const TraceBeams& b);
nlohmann::json to_json(const TraceBeamSummary& b);
nlohmann::json to_json(const Params& p);

// JSON dump that never throws on invalid UTF-8 (a byte-fallback piece may be half a character).
std::string dump(const nlohmann::json& j);

// A parameter value as the user would type it (strings bare, numbers as JSON writes them).
std::string param_text(const ParamValue& v);
// "top-k(k=40)", "greedy": a plugin for messages.
std::string plugin_text(const TracePlugin& p);
// "[1,403,407]": ids for messages.
std::string ids_text(const std::vector<std::int32_t>& ids);
const char* level_name(TraceLevel level);  // "basic" | "full"
const char* phase_name(TracePhase phase);  // "prefill" | "decode"

}  // namespace glassbox::traces
