// Options -> pipeline: YAML config merging, default model lookup, plugin creation and cross-checks.
#include "session.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <future>
#include <iostream>
#include <random>
#include <set>


#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/os.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/rng.hpp"
#include "glassbox/speculative.hpp"
#include "glassbox/traces/reader.hpp"

namespace fs = std::filesystem;

namespace glassbox::cli {

traces::WriterThread trace_writer_thread(TraceLevel level, bool attention) {
  return level == TraceLevel::Full || attention ? traces::WriterThread::EveryLine : traces::WriterThread::Batched;
}

void warn(const std::string& message) { std::cerr << "glassbox: warning: " << message << "\n"; }

namespace {

// --replay GOLDEN: the golden header's prompt, max_tokens, seed, trace level, sampler chain, attention and
// tokenizer plugin (and its model and tokenizer files, when none are named and both exist) for every
// option that `set(key)` says was not given (docs/golden-traces.md).
void apply_replay_defaults(RunOptions& o, const std::function<bool(const std::string&)>& set) {
  const traces::TraceHeader h = traces::read_trace_header(o.replay);
  auto spec = [](const traces::TracePlugin& p) {
    PluginSpec s{p.name, {}};
    for (const auto& [k, v] : p.params.values()) s.params.emplace_back(k, traces::param_text(v));
    return s;
  };
  if (!set("prompt")) o.prompt = h.prompt;
  if (!set("max_tokens")) o.max_tokens = h.max_tokens;
  if (!set("seed")) o.seed = h.seed;
  if (!set("trace_level")) o.trace_level = h.level;
  if (!set("sampler")) {
    o.sampler.clear();
    for (const auto& p : h.samplers) o.sampler.push_back(spec(p));
  }
  if (!set("attention")) o.attention = spec(h.attention);
  if (!set("tokenizer_plugin") && !set("tokenizer")) o.tokenizer.name = h.tokenizer.name;
  // The golden's model and tokenizer files, when none are named here and both still exist.
  std::error_code ec;
  const std::string model = h.model.path, tok = h.tokenizer_path;
  // (A GGUF model carries its tokenizer: then the trace names no tokenizer file.)
  if (!set("model") && !set("tokenizer")) {
    if (fs::exists(model, ec) && (tok.empty() || fs::exists(tok, ec))) {
      o.model = model;
      std::erase_if(o.tokenizer.params, [](const auto& p) { return p.first == "path" || p.first.empty(); });
      if (!tok.empty()) o.tokenizer.params.emplace_back("path", tok);
      return;
    }
    // Not found from here (a trace's paths are as given where it was recorded). The embedded default
    // model may be that very file (same SHA-256); any other model would replay another computation.
    const auto def = default_model();
    if (def && sha256_file_cached(def->first) == h.model.sha256) return;
    const std::string missing = fs::exists(model, ec) ? tok : model;
    throw ConfigError("--replay " + o.replay + ": its model file " + missing + " is not found from " +
                      fs::current_path(ec).string() + " (paths in a trace are as given when it was recorded): "
                      "run from there, or name the files with --model and --tokenizer");
  }
}

}  // namespace

namespace {
// A prompt piped in (`echo text | glassbox run`): stdin is a pipe or a file, not a terminal or /dev/null.
std::optional<std::string> piped_prompt() {
  struct stat st {};
  if (isatty(0) || fstat(0, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode))) return std::nullopt;
  constexpr std::size_t kMax = 16 << 20;  // a prompt, not a data set: refuse rather than swallow gigabytes
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(0, buf, sizeof buf)) > 0) {
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMax) throw InputError("the prompt on stdin is over 16 MiB");
  }
  if (text.ends_with('\n')) text.pop_back();  // echo's newline is not part of the prompt
  if (text.ends_with('\r')) text.pop_back();
  return text;
}
}  // namespace
RunOptions read_config(const std::string& path, std::set<std::string>* keys) {
  RunOptions o;
  load_run_config(path, o, keys);
  return o;
}

RunOptions RunOptionsBinder::finish() {
  RunOptions o = merge();
  // A prompt piped in is run's: chat reads its turns from stdin.
  if (command() == kRun && !given("prompt") && !given("replay"))
    if (auto p = piped_prompt(); p && !p->empty()) o.prompt = *p;
  if (!o.replay.empty()) apply_replay_defaults(o, [&](const std::string& key) { return given(key); });
  if (o.max_tokens < 0) throw ConfigError("--max-tokens = " + std::to_string(o.max_tokens) + " (expected >= 0)");
  // chat's summarize policy: only a conversation has exchanges to summarize, and the summary options
  // mean nothing without it (said, not ignored).
  if (o.summarize && command() != kChat)
    throw ConfigError("--context-policy summarize replaces a chat's oldest exchanges with a summary: only chat has exchanges "
                      "(here: refuse, stop, truncate-left or shift[:n_keep])");
  if (!o.summarize)
    for (const char* key : {"summary_model", "summary_tokenizer", "summary_tokens"})
      if (given(key))
        throw ConfigError(run_option(key).long_flag() + " " + run_option(key).show(o) + ": only --context-policy summarize writes a summary (the policy is " +
                          o.context_policy.to_string() + ")");
  o.summary_tokens_given = given("summary_tokens");
  if (given("summary_tokenizer") && o.summary_model.empty())
    throw ConfigError("--summary-tokenizer " + o.summary_tokenizer +
                      ": it is --summary-model's tokenizer, and no --summary-model is given (the chat's own model summarizes with its own tokenizer)");
  return o;
}

std::optional<std::pair<fs::path, fs::path>> default_model() {
  std::error_code ec;
  const fs::path exe = os::executable_path();
  std::vector<fs::path> dirs;
  if (!exe.empty()) dirs.push_back((exe.parent_path() / ".." / GLASSBOX_DATA_RELDIR / "models").lexically_normal());
  for (const auto& d : dirs) {
    const fs::path m = d / "toy.bin", t = d / "toy-tok.bin";
    if (fs::exists(m, ec) && fs::exists(t, ec)) return std::make_pair(m, t);
  }
  return std::nullopt;
}

void resolve_toy_model(std::string& model, std::string& tokenizer, const std::string& option) {
  std::error_code ec;
  if (model != "toy" || fs::exists(model, ec)) return;
  const auto def = default_model();
  if (!def) throw ConfigError(option + " toy: no embedded toy model is installed next to this glassbox");
  model = def->first.string();
  if (tokenizer.empty()) tokenizer = def->second.string();
}

std::vector<std::unique_ptr<Sampler>> check_plugins(const Registry& registry, const PluginSpec& tokenizer, const RunOptions& opt,
                                                    std::vector<std::string>& warnings) {
  if (!tokenizer.name.empty()) registry.resolve(PluginKind::Tokenizer, tokenizer);
  return check_run_spec(registry, run_spec(opt), warnings);
}

ModelSpec model_spec(const RunOptions& opt) {
  ModelSpec m;
  m.model = opt.model;
  m.tokenizer = opt.tokenizer;
  m.need_vocabulary = opt.need_vocabulary;
  m.model_hash = opt.model_hash;
  m.defer_model_hash = opt.defer_model_hash;
  m.gelu = opt.gelu;
  return m;
}

RunSpec run_spec(const RunOptions& opt) {
  RunSpec r;
  r.attention = opt.attention;
  r.sampler = opt.sampler;
  r.ignore_eos = opt.ignore_eos;
  if (!opt.grammar.empty() && !opt.json_schema.empty())
    throw ConfigError("--grammar and --json-schema both given: a run takes one grammar");
  if (!opt.grammar.empty()) r.extra_stages.push_back(PluginSpec{"grammar", {{"file", opt.grammar}}});
  if (!opt.json_schema.empty()) r.extra_stages.push_back(PluginSpec{"grammar", {{"schema_file", opt.json_schema}}});
  r.context = opt.context;
  r.seed = opt.seed;
  return r;
}

std::unique_ptr<Session> open_session(const RunOptions& opt) {
  if (opt.threads > 0) kernels::set_threads(opt.threads);
  std::vector<std::string> warnings;
  auto registry = load_registry(opt.plugin_path, warnings);
  for (const auto& w : warnings) warn(w);

  // Model and tokenizer: given, or the embedded default (both must then come from it). A GGUF
  // model carries its own tokenizer, so --model alone is enough for it.
  ModelSpec ms = model_spec(opt);
  if (ms.model.empty()) {
    const auto def = default_model();
    if (!def) throw ConfigError("no --model given and no embedded default model installed next to the binary");
    ms.model = def->first;
    if (ms.tokenizer.params.empty()) ms.tokenizer.params.emplace_back("path", def->second.string());
  }
  // Every plugin name and parameter is checked before the model is read (the chain's warnings are
  // said once, by build_pipeline).
  warnings.clear();
  check_plugins(*registry, ms.tokenizer, opt, warnings);
  auto loaded = load_model(registry, ms);
  warnings.clear();
  auto s = build_pipeline(std::move(loaded), run_spec(opt), warnings);
  for (const auto& w : warnings) warn(w);
  return s;
}

GenerateOptions generate_options(const RunOptions& opt, const Session& s) {
  GenerateOptions g;
  g.max_tokens = opt.max_tokens;
  g.seed = s.seed;
  g.watch = watch_spec(opt);
  g.policy = opt.context_policy;
  if (opt.trace_attention.on && opt.trace.empty()) warn("--trace-attention records into the trace: name one with --trace");
  if (opt.trace_lens != LensPoints::Off && opt.trace.empty()) warn("--trace-lens records into the trace: name one with --trace");
  return g;
}

bool is_gguf(const std::string& path) {
  char magic[4] = {};
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    if (std::fread(magic, 1, 4, f) != 4) magic[0] = 0;
    std::fclose(f);
  }
  return std::string_view(magic, 4) == "GGUF";
}

std::unique_ptr<Session> open_summarizer(const RunOptions& opt, const Session& chat) {
  RunSpec r;
  r.sampler = {PluginSpec{"greedy", {}}};  // deterministic: the same chat writes the same summary
  r.context = 0;                           // the summary model's own context (capped), not --context
  r.seed = chat.seed;
  std::shared_ptr<const LoadedModel> loaded = chat.loaded;
  if (!opt.summary_model.empty()) {
    for (const auto& [flag, path] : {std::pair<std::string, std::string>{"--summary-model", opt.summary_model},
                                     {"--summary-tokenizer", opt.summary_tokenizer}}) {
      std::error_code ec;
      if (!path.empty() && !fs::exists(path, ec)) throw ConfigError(flag + " " + path + ": no such file");
    }
    ModelSpec ms;
    ms.model = opt.summary_model;
    ms.model_hash = opt.model_hash;
    ms.gelu = opt.gelu;
    if (!opt.summary_tokenizer.empty()) ms.tokenizer.params.emplace_back("path", opt.summary_tokenizer);
    else if (!is_gguf(opt.summary_model) && !chat.header.tokenizer_path.empty())
      ms.tokenizer.params.emplace_back("path", chat.header.tokenizer_path);
    loaded = load_model(chat.registry, ms);
  }
  std::vector<std::string> warnings;
  auto s = build_pipeline(std::move(loaded), r, warnings);
  for (const auto& w : warnings) warn("the summary model: " + w);
  return s;
}

// Speculative decoding's draft: a second session from the same options but the model (and tokenizer)
// files, its vocabulary checked against the target's.
std::unique_ptr<Session> open_draft(const RunOptions& opt, const Session& target) {
  RunOptions d = opt;
  d.model = opt.draft_model;
  d.model_hash = false;
  d.defer_model_hash = false;
  d.seed = target.seed;
  d.tokenizer = PluginSpec{"", {}};
  if (!opt.draft_tokenizer.empty()) {
    d.tokenizer.params.emplace_back("path", opt.draft_tokenizer);
  } else {
    // A GGUF draft carries its vocabulary; a llama2.c checkpoint reads the target's tokenizer file.
    if (!is_gguf(opt.draft_model) && !target.header.tokenizer_path.empty())
      d.tokenizer.params.emplace_back("path", target.header.tokenizer_path);
  }
  auto draft = open_session(d);
  check_draft_vocabulary(*target.tokenizer, target.config.vocab_size, target.header.model_path, *draft->tokenizer,
                         draft->config.vocab_size, draft->header.model_path);
  return draft;
}

}  // namespace glassbox::cli
