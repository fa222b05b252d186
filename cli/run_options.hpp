// The options of `glassbox run` as one table, from which the command line, the YAML config, the help
// text and docs/options.md are all made; chat, bench and compare take the entries they share from it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "glassbox/engine.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/speculative.hpp"
#include "glassbox/trace_events.hpp"
#include "glassbox/traces/schema.hpp"

namespace YAML {
class Node;
}

namespace glassbox::cli {

// Every option a run takes. The YAML config (--config) sets any of them by its key (dashes or
// underscores); an option given on the command line wins. Defaults are here; the table says them in words.
struct RunOptions {
  std::string model;                       // empty: the embedded default model
  PluginSpec tokenizer{"", {}};           // name empty: chosen from the model; path set from --tokenizer
  PluginSpec attention{"kv-cache", {}};
  std::vector<PluginSpec> sampler;         // empty: "default"
  bool ignore_eos = false;                 // ban the end-of-generation tokens (a logit-bias stage first in the chain)
  std::string grammar;                     // GBNF file: a "grammar" stage first in the chain
  std::string json_schema;                 // JSON schema file: the same, converted to a grammar
  std::string prompt;
  int beam_width = 0;                      // beam search with this many beams (0: off, sample with the chain)
  double length_penalty = 1.0;             // beam search: score / length^A
  int max_tokens = 256;
  int context = 0;                         // positions the run may use (0: the model's, capped at 4096)
  int threads = 0;                         // threads for the matrix products (0: one per physical core)
  std::optional<std::uint64_t> seed;
  std::string trace;
  bool trace_keep_partial = false;         // a cut-short trace may replace an existing file (else: TRACE.partial)
  std::string config;                      // the --config file, if any (an input --trace must not overwrite)
  TraceLevel trace_level = TraceLevel::Basic;
  traces::LogitsEncoding trace_logits = traces::LogitsEncoding::Base64;  // how a full trace writes its logits
  int trace_top = 10;                      // candidates listed per step and per stage
  bool echo = false;
  bool show_probs = false;
  bool json = false;                       // stdout: one JSON object per token, then a summary object
  int top_logprobs = 5;                    // alternatives listed per token with --json
  double pace_ms = 0;                      // pause before each streamed token (demonstrations)
  double pace_tps = 0;                     // or a rate in tokens per second (the slower of the two wins)
  std::string replay;
  // SHA-256 of the model file for the run header (0.3 s for a 438 MB model). Commands that write no
  // trace and check no golden turn it off; header.model_sha256 is then empty. (Not an option.)
  bool model_hash = true;
  // With model_hash: leave the digest to header.model_sha256_pending, for the trace writer to wait for
  // once the run has started (run --trace), when the matrix products leave a core free. (Not an option.)
  bool defer_model_hash = false;
  // A llama2.c checkpoint without --tokenizer is an error unless the command uses no vocabulary (bench
  // feeds token ids): the session then has no tokenizer. (Not an option.)
  bool need_vocabulary = true;
  std::vector<std::filesystem::path> plugin_path;
  ContextPolicy context_policy;            // when prompt + generation outgrow the context (default: stop)
  GeluKind gelu = GeluKind::Tanh;          // GELU's form for GELU models (GPT-2, Gemma)
  AttentionTrace trace_attention;          // --trace-attention LAYER:HEAD | all
  LensPoints trace_lens = LensPoints::Off; // --trace-lens [blocks | all]
  std::string draft_model;                 // speculative decoding's draft (empty: off)
  std::string draft_tokenizer;             // its tokenizer file (empty: a GGUF draft's own, else the model's)
  int draft_tokens = 4;                    // K: tokens drafted per round
  // chat's summarize policy (--context-policy summarize; context_policy then stays stop, which governs
  // a single reply that outgrows the window): the oldest exchanges are replaced by a summary.
  bool summarize = false;
  std::string summary_model;               // the model that writes the summary (empty: the chat's own)
  std::string summary_tokenizer;           // its tokenizer file (empty: a GGUF model's own, else --tokenizer's)
  int summary_tokens = 32;                 // the summary's length at most, in the summary model's tokens
  bool summary_tokens_given = false;       // --summary-tokens was set: a bound the request must leave room for; the
                                           // default gives way to the room the summary model's context leaves
};

// `--context-policy summarize`: chat's third policy (drop, summarize, refuse), handled by chat itself.
inline constexpr std::string_view kSummarizePolicy = "summarize";

// What each step records, decided in one place from the options (run and chat): stage records when a
// trace or --show-probs reads them, the raw distribution also for --json, attention and lens into a trace.
WatchSpec watch_spec(const RunOptions& o);

// The commands that take an option (bits).
enum RunCommand : unsigned { kRun = 1, kChat = 2, kBench = 4, kCompare = 8, kImport = 16, kServe = 32 };  // kImport: trace import
const char* command_name(RunCommand c);  // "run", "trace import", ...

// One option: its spellings, its words, and the one function that sets it. The same `set` runs for a
// command-line value (a YAML scalar made from the text; a sequence for a repeated option) and a YAML
// value, so both spellings have the same effect and the same checks.
struct RunOption {
  enum class Kind { Value, Flag, List };  // --x V | --x | --x V, repeatable
  std::string key;         // the YAML key and the name used in messages: "max_tokens"
  std::string flags;       // CLI11 names: "--max-tokens,-n" (the first is the one messages use)
  std::string value_name;  // "N", "FILE", ... ("" for a flag)
  std::string help;        // what it does, one line
  std::string values;      // allowed values or range ("1..1000", "basic | full"); "" when any text
  std::string default_text;  // the default in words ("" when there is nothing to say)
  std::string example;     // a valid value other than the default (tests and docs)
  unsigned commands = 0;   // RunCommand bits
  Kind kind = Kind::Value;
  bool in_yaml = true;     // false: command line only (--config)
  bool value_optional = false;  // Value: `--x` alone is allowed (set() then gets an empty text)
  std::function<void(RunOptions&, const YAML::Node& value, const std::string& where)> set;
  std::function<std::string(const RunOptions&)> show;  // the value in `o`, as text (for tests)

  std::string long_flag() const;  // "--max-tokens"
  std::string help_line() const;  // help + values + default, as `--help` shows it
};

// The table, in the order `--help` and docs/options.md list it.
const std::vector<RunOption>& run_option_table();
const RunOption& run_option(const std::string& key);  // throws std::out_of_range for an unknown key

// Overlays a parsed YAML config on `o` (entries applied in table order, whatever the file's order).
// `file` names the config in messages. Throws ConfigError("FILE: key: ...") for an unknown key (listing
// the known ones), a wrong type or a value out of range. The keys set are added to `keys`, if given.
void apply_run_config(const YAML::Node& root, const std::string& file, RunOptions& o, std::set<std::string>* keys = nullptr);
// A YAML config given as text (what --config FILE holds), over the defaults: for fuzzing and tests.
RunOptions parse_run_config(const std::string& yaml_text, const std::string& name);
// Reads and applies a --config file (regular files only).
void load_run_config(const std::string& path, RunOptions& o, std::set<std::string>* keys = nullptr);

// "basic" | "full".
TraceLevel parse_level(const std::string& text);
traces::LogitsEncoding parse_logits_encoding(const std::string& text);

// Registers one table entry on a command whose own struct holds it as text (compare's experiment):
// same flags, value name and help as `run`.
CLI::Option* add_shared_option(CLI::App* cmd, const std::string& key, std::string& target);
CLI::Option* add_shared_option(CLI::App* cmd, const std::string& key, std::vector<std::string>& target);
CLI::Option* add_shared_flag(CLI::App* cmd, const std::string& key, bool& target);  // a flag entry (compare)

// Adds the table's options for `command` to a CLI11 command; merge() then reads --config and lays the
// values given on the command line over it.
class RunOptionTableBinder {
 public:
  RunOptionTableBinder(CLI::App* cmd, RunCommand command);
  // The config's values, then the command line's (only those given), all checked.
  RunOptions merge();
  // Whether `key` was set by the command line or the config (valid after merge()).
  bool given(const std::string& key) const { return given_.count(key) > 0; }
  RunCommand command() const { return command_; }

 private:
  struct Slot {
    const RunOption* entry;
    CLI::Option* option;
    std::string text;
    std::vector<std::string> list;
    bool flag = false;
  };
  CLI::App* cmd_;
  RunCommand command_;
  std::vector<std::unique_ptr<Slot>> slots_;  // stable addresses: CLI11 writes into them
  std::set<std::string> given_;
};

// docs/options.md's table of options, generated from the table.
std::string run_options_markdown();

}  // namespace glassbox::cli
