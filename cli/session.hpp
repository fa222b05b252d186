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
#include "glassbox/run_spec.hpp"
#include "glassbox/sampling.hpp"
#include "glassbox/trace_events.hpp"
#include "glassbox/traces/writer.hpp"
#include "run_options.hpp"

namespace glassbox::cli {

// The options a --config YAML file sets, over the defaults (its tokenizer path and plugin folded into
// `tokenizer`); `keys` receives each option it names, underscored. Throws ConfigError naming the file.
// (tests/fuzz/fuzz_config.cpp feeds it arbitrary bytes.)
RunOptions read_config(const std::string& path, std::set<std::string>* keys = nullptr);

// The command line and --config, merged (run_options.hpp's table), then what depends on the run: a
// prompt piped on stdin (run only) and a --replay golden's settings for every option not given.
class RunOptionsBinder : public RunOptionTableBinder {
 public:
  using RunOptionTableBinder::RunOptionTableBinder;
  RunOptions finish();
};

// Where the embedded default model and tokenizer live (next to the binary, or compiled-in path).
std::optional<std::pair<std::filesystem::path, std::filesystem::path>> default_model();
// `toy` as a model name (serve --model toy, check's `model: toy`): the embedded default model, and its tokenizer
// when none is named; a file called `toy` in the current folder wins. ConfigError when none is installed.
void resolve_toy_model(std::string& model, std::string& tokenizer, const std::string& option);

// Everything one run needs, built and cross-checked (tokenizer vs model vocabulary): core's Pipeline
// (glassbox/run_spec.hpp), over a model loaded for this run alone.
using Session = Pipeline;

// The model part and the run part of the options, as core's specs (model path and tokenizer as given).
ModelSpec model_spec(const RunOptions& opt);
RunSpec run_spec(const RunOptions& opt);

// Every plugin name and parameter the options name, checked before any model is read (the tokenizer's
// only when it is named): returns the sampler stages, adds chain warnings to `warnings`.
std::vector<std::unique_ptr<Sampler>> check_plugins(const Registry& registry, const PluginSpec& tokenizer, const RunOptions& opt,
                                                    std::vector<std::string>& warnings);

// Loads the registry (reporting rejected modules as warnings on stderr), then the model,
// tokenizer, attention and sampler chain (core's load_model and build_pipeline, with the embedded default
// model when none is named). Throws glassbox errors with one-line messages.
std::unique_ptr<Session> open_session(const RunOptions& opt);

// The engine's options for run and chat: the token budget, the session's seed, what each step records
// (watch_spec) and the context policy. Warns when --trace-attention or --trace-lens has no trace to go to.
GenerateOptions generate_options(const RunOptions& opt, const Session& s);

// Whether the file begins as a GGUF does (a GGUF carries its vocabulary; a llama2.c checkpoint reads a
// tokenizer file). False for a file that cannot be read: opening it says why.
bool is_gguf(const std::string& path);

// Speculative decoding's draft (opt.draft_model, opt.draft_tokenizer): a second session from the same options
// but the model and tokenizer files, its vocabulary checked against the target's (ConfigError naming both).
// `run --draft-model` and compare's speculative strategies.
std::unique_ptr<Session> open_draft(const RunOptions& opt, const Session& target);

// chat --context-policy summarize: the pipeline that writes the summaries, greedy over its model's own
// context: --summary-model (its tokenizer --summary-tokenizer, else a GGUF's own, else --tokenizer's file),
// or the chat's loaded model itself. A missing file is a ConfigError naming the option.
std::unique_ptr<Session> open_summarizer(const RunOptions& opt, const Session& chat);

void warn(const std::string& message);

// How a trace's writer thread is woken (traces/writer.hpp): for each full-logit line, or each line with
// attention weights (64 such lines waiting in a batch could hold tens of MB); once per batch of basic
// lines, whose formatting costs less than a wake-up. Measured on stories260K (bench/trace_cost.py), the
// batched thread beat formatting on the decode thread with one decoding thread and with two.
traces::WriterThread trace_writer_thread(TraceLevel level, bool attention = false);

}  // namespace glassbox::cli
