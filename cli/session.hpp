// Turning command-line and YAML options into a ready pipeline: registry, model, tokenizer, attention, sampler chain.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "glassbox/engine.hpp"
#include "glassbox/model.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/sampling.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox::cli {

// Every option a run takes. The YAML config (--config) sets any of them by the same name
// (dashes or underscores); an option given on the command line wins.
struct RunOptions {
  std::string model;                       // empty: the embedded default model
  PluginSpec tokenizer{"", {}};           // name empty: chosen from the model; path set from --tokenizer
  PluginSpec attention{"kv-cache", {}};
  std::vector<PluginSpec> sampler;         // empty: "default"
  std::string prompt;
  int max_tokens = 256;
  int context = 0;                         // positions the run may use (0: the model's, capped at 4096)
  int threads = 0;                         // threads for the matrix products (0: one per physical core)
  std::optional<std::uint64_t> seed;
  std::string trace;
  bool trace_keep_partial = false;         // a cut-short trace may replace an existing file (else: TRACE.partial)
  std::string config;                      // the --config file, if any (an input --trace must not overwrite)
  TraceLevel trace_level = TraceLevel::Basic;
  int trace_top = 10;                      // candidates listed per step and per stage
  bool echo = false;
  bool show_probs = false;
  bool json = false;                       // stdout: one JSON object per token, then a summary object
  int top_logprobs = 5;                    // alternatives listed per token with --json
  double pace_ms = 0;                      // pause before each streamed token (demonstrations)
  double pace_tps = 0;                     // or a rate in tokens per second (the slower of the two wins)
  std::string replay;
  // SHA-256 of the model file for the run header (0.3 s for a 438 MB model). Commands that write no
  // trace and check no golden turn it off; header.model_sha256 is then empty.
  bool model_hash = true;
  std::vector<std::filesystem::path> plugin_path;
  ContextPolicy context_policy;            // when prompt + generation outgrow the context (default: stop)
  AttentionTrace trace_attention;          // --trace-attention LAYER:HEAD | all
};

// The options a --config YAML file sets, over the defaults (its tokenizer path and plugin folded into
// `tokenizer`); `keys` receives each option it names, underscored. Throws ConfigError naming the file.
// (tests/fuzz/fuzz_config.cpp feeds it arbitrary bytes.)
RunOptions read_config(const std::string& path, std::set<std::string>* keys = nullptr);

// Adds the options shared by commands that build a pipeline (run, bench, ...) to `cmd`.
// Call finish() after parsing to apply --config and the command-line overrides.
class RunOptionsBinder {
 public:
  RunOptionsBinder(CLI::App* cmd, bool with_generation);
  RunOptions finish();

 private:
  CLI::App* cmd_;
  bool with_generation_;
  std::string config_, model_, tokenizer_, tokenizer_plugin_, attention_, sampler_, prompt_, trace_,
      trace_level_, replay_, context_policy_, trace_attention_;
  std::vector<std::string> plugin_path_;
  int max_tokens_ = 256, trace_top_ = 10, context_ = 0, top_logprobs_ = 5, threads_ = 0;
  double pace_ms_ = 0, pace_tps_ = 0;
  std::string seed_;
  bool echo_ = false, show_probs_ = false, json_ = false, trace_keep_partial_ = false;
};

// Where the embedded default model and tokenizer live (next to the binary, or compiled-in path).
std::optional<std::pair<std::filesystem::path, std::filesystem::path>> default_model();

// Everything one run needs, built and cross-checked (tokenizer vs model vocabulary).
struct Session {
  Registry registry;
  std::unique_ptr<ModelSource> source;     // the mapped model file
  Config config;                           // the run's: the model's, with seq_len = the run's context
  std::unique_ptr<Transformer> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<KvStore> attention;
  std::unique_ptr<SamplerChain> sampler;
  RunHeader header;  // model, plugins, seed: ready for Engine::generate
  std::uint64_t seed = 0;
};

// Every plugin name and parameter the options name, checked before any model is read (the tokenizer's
// only when it is named): returns the sampler stages, adds chain warnings to `warnings`.
std::vector<std::unique_ptr<Sampler>> check_plugins(const Registry& registry, const PluginSpec& tokenizer, const RunOptions& opt,
                                                    std::vector<std::string>& warnings);

// Loads the registry (reporting rejected modules as warnings on stderr), then the model,
// tokenizer, attention and sampler chain. Throws glassbox errors with one-line messages.
std::unique_ptr<Session> open_session(const RunOptions& opt);

void warn(const std::string& message);

// Throws ConfigError when a stage names a token id outside the vocabulary (logit-bias).
void check_token_ids(const std::vector<std::unique_ptr<Sampler>>& stages, int vocab_size);

}  // namespace glassbox::cli
