// Options -> pipeline: YAML config merging, default model lookup, plugin creation and cross-checks.
#include "session.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <future>
#include <iostream>
#include <random>
#include <set>

#include <yaml-cpp/yaml.h>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/rng.hpp"
#include "glassbox/traces/reader.hpp"

namespace fs = std::filesystem;

namespace glassbox::cli {

void warn(const std::string& message) { std::cerr << "glassbox: warning: " << message << "\n"; }

RunOptionsBinder::RunOptionsBinder(CLI::App* cmd, bool with_generation) : cmd_(cmd), with_generation_(with_generation) {
  cmd->add_option("--config", config_, "YAML file setting any of these options by name");
  cmd->add_option("--model,-m", model_, "model file: GGUF or llama2.c checkpoint (default: the embedded toy model)");
  cmd->add_option("--tokenizer,-t", tokenizer_, "tokenizer file or folder (default: the one inside a GGUF model, or the embedded model's)");
  cmd->add_option("--tokenizer-plugin", tokenizer_plugin_, "tokenizer plugin (default: llama2c, or what a GGUF model's tokenizer.ggml.model names)");
  cmd->add_option("--context", context_, "positions the run may use, at most the model's context length (default: min(model's, 4096))")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--attention", attention_, "attention plugin, NAME or NAME:VALUE (default: kv-cache)");
  cmd->add_option("--plugin-path", plugin_path_, "extra folder of plugin modules (repeatable)");
  cmd->add_option("--context-policy", context_policy_,
                  "when prompt + generation outgrow the context: refuse | stop | truncate-left | shift[:n_keep] (default: stop)");
  if (!with_generation) return;  // bench has its own --threads (a list)
  cmd->add_option("--threads", threads_, "threads for the matrix products (default: one per physical core)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--prompt,-p", prompt_, "prompt text (default: empty, start from BOS)");
  cmd->add_option("--max-tokens,-n", max_tokens_, "tokens to generate at most (default: 256)");
  cmd->add_option("--sampler,-s", sampler_, "sampler chain, e.g. top-k:40,temperature:0.8 (default: default)");
  cmd->add_option("--seed", seed_, "random seed (default: chosen at random, recorded in the trace)");
  cmd->add_option("--trace", trace_, "write a JSON Lines trace (glassbox.trace/1) to this file");
  cmd->add_flag("--trace-keep-partial", trace_keep_partial_,
               "let a run cut short (error, SIGINT) replace an existing --trace file (default: it goes to TRACE.partial)");
  cmd->add_option("--trace-level", trace_level_, "basic | full (full adds every logit of every step)");
  cmd->add_option("--trace-top", trace_top_, "candidates listed per step and per sampler stage (default 10)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--echo", echo_, "print the prompt before the continuation");
  cmd->add_flag("--show-probs", show_probs_, "draw each step's top candidates on stderr");
  cmd->add_option("--replay", replay_, "teacher-force the tokens chosen in this trace");
  cmd->add_flag("--json", json_, "stdout: one JSON object per token (id, token, logprob, top_logprobs), then a summary object");
  cmd->add_option("--top-logprobs", top_logprobs_, "alternatives listed per token with --json (default 5)")->check(CLI::Range(0, 1000));
  cmd->add_option("--pace", pace_ms_, "wait MS milliseconds before each streamed token (for watching)")->check(CLI::Range(0.0, 60000.0));
  cmd->add_option("--pace-tps", pace_tps_, "stream at most R tokens per second (for watching)")->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--trace-attention", trace_attention_,
                  "record the newest position's attention weights each step: LAYER:HEAD or all (into the --trace)");
}

namespace {

std::string yaml_scalar(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) throw ConfigError(where + ": expected a single value");
  return n.as<std::string>();
}

PluginSpec yaml_plugin(const YAML::Node& n, const std::string& where, const std::string& kind) {
  if (n.IsScalar()) return parse_plugin_spec(n.as<std::string>(), kind);
  if (!n.IsMap()) throw ConfigError(where + ": expected NAME, NAME:VALUE or a map with 'name'");
  PluginSpec spec;
  for (const auto& kv : n) {
    const auto key = kv.first.as<std::string>();
    if (key == "name") spec.name = yaml_scalar(kv.second, where + ".name");
    else spec.params.emplace_back(key, yaml_scalar(kv.second, where + "." + key));
  }
  if (spec.name.empty()) throw ConfigError(where + ": missing 'name'");
  return spec;
}

// A seed: a decimal integer in [0, 2^64 - 1]; "-1" or "1e3" is an error, not a wrapped value.
std::uint64_t parse_seed(const std::string& text, const std::string& where) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || text[0] == '-' || text[0] == '+' || ec != std::errc() || p != end)
    throw ConfigError(where + " = '" + text + "' (expected an integer in 0.." + std::to_string(UINT64_MAX) + ")");
  return v;
}

TraceLevel parse_level(const std::string& s) {
  if (s == "basic") return TraceLevel::Basic;
  if (s == "full") return TraceLevel::Full;
  throw ConfigError("trace level '" + s + "' (expected basic or full)");
}

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
    if (def && sha256_file(def->first) == h.model.sha256) return;
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
void check_token_ids(const std::vector<std::unique_ptr<Sampler>>& stages, int vocab_size) {
  // logit-bias names token ids; one the model does not have would silently do nothing.
  for (const auto& st : stages) {
    if (st->name() != "logit-bias" || !st->params().has("bias")) continue;
    const std::string& text = st->params().get_string("bias");
    std::size_t at = 0;
    while (at <= text.size()) {
      const std::size_t semi = std::min(text.find(';', at), text.size());
      const std::string item = text.substr(at, semi - at);
      at = semi + 1;
      const auto b = item.find_first_not_of(" \t");
      if (b == std::string::npos) continue;
      long long id = -1;
      std::from_chars(item.data() + b, item.data() + item.size(), id);
      if (id >= vocab_size)
        throw ConfigError("sampler 'logit-bias': token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                          std::to_string(vocab_size) + " tokens");
    }
  }
}

RunOptions read_config(const std::string& path, std::set<std::string>* keys) {
  RunOptions o;
  std::string tok_path, tok_plugin;
  YAML::Node root;
  if (auto why = not_a_regular_file(path)) throw ConfigError("--config " + path + ": " + *why + " (expected a YAML file)");
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw ConfigError(path + ": cannot read config file");
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ": invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap() && !root.IsNull()) throw ConfigError(path + ": expected a map of option: value");
  try {
    for (const auto& kv : root) {
      std::string key = kv.first.as<std::string>();
      for (auto& c : key) if (c == '-') c = '_';
      const std::string where = path + ": " + key;
      const YAML::Node& v = kv.second;
      if (keys) keys->insert(key);
      if (key == "model") o.model = yaml_scalar(v, where);
      else if (key == "tokenizer") {
        if (v.IsScalar()) tok_path = v.as<std::string>();
        else o.tokenizer = yaml_plugin(v, where, "tokenizer");
      } else if (key == "tokenizer_plugin") tok_plugin = yaml_scalar(v, where);
      else if (key == "attention") o.attention = yaml_plugin(v, where, "attention");
      else if (key == "sampler") {
        if (v.IsScalar()) o.sampler = parse_plugin_chain(v.as<std::string>(), "sampler");
        else if (v.IsSequence()) {
          for (std::size_t i = 0; i < v.size(); ++i) o.sampler.push_back(yaml_plugin(v[i], where + "[" + std::to_string(i) + "]", "sampler"));
        } else o.sampler.push_back(yaml_plugin(v, where, "sampler"));
      } else if (key == "prompt") o.prompt = yaml_scalar(v, where);
      else if (key == "max_tokens") o.max_tokens = v.as<int>();
      else if (key == "context") o.context = v.as<int>();
      else if (key == "threads") o.threads = v.as<int>();
      else if (key == "seed") o.seed = parse_seed(yaml_scalar(v, where), where);
      else if (key == "trace") o.trace = yaml_scalar(v, where);
      else if (key == "trace_keep_partial") o.trace_keep_partial = v.as<bool>();
      else if (key == "trace_level") o.trace_level = parse_level(yaml_scalar(v, where));
      else if (key == "trace_top") o.trace_top = v.as<int>();
      else if (key == "echo") o.echo = v.as<bool>();
      else if (key == "show_probs") o.show_probs = v.as<bool>();
      else if (key == "replay") o.replay = yaml_scalar(v, where);
      else if (key == "json") o.json = v.as<bool>();
      else if (key == "top_logprobs") o.top_logprobs = v.as<int>();
      else if (key == "pace") o.pace_ms = v.as<double>();
      else if (key == "pace_tps") o.pace_tps = v.as<double>();
      else if (key == "context_policy") o.context_policy = parse_context_policy(yaml_scalar(v, where));
      else if (key == "trace_attention") o.trace_attention = parse_attention_trace(yaml_scalar(v, where));
      else if (key == "plugin_path") {
        if (v.IsSequence()) for (const auto& p : v) o.plugin_path.emplace_back(p.as<std::string>());
        else o.plugin_path.emplace_back(yaml_scalar(v, where));
      } else
        throw ConfigError(where + ": unknown option (known: model, tokenizer, tokenizer_plugin, context, context_policy, threads, "
                          "attention, sampler, prompt, max_tokens, seed, trace, trace_keep_partial, trace_level, trace_top, "
                          "trace_attention, echo, show_probs, replay, json, top_logprobs, pace, pace_tps, plugin_path)");
    }
  } catch (const YAML::BadConversion& e) {
    throw ConfigError(path + ": line " + std::to_string(e.mark.line + 1) + ": value has the wrong type");
  }
  if (!tok_plugin.empty()) o.tokenizer.name = tok_plugin;
  if (!tok_path.empty()) {
    std::erase_if(o.tokenizer.params, [](const auto& p) { return p.first == "path" || p.first.empty(); });
    o.tokenizer.params.emplace_back("path", tok_path);
  }
  return o;
}

RunOptions RunOptionsBinder::finish() {
  std::set<std::string> from_config;  // keys the --config file set (underscored)
  RunOptions o = config_.empty() ? RunOptions{} : read_config(config_, &from_config);
  std::string tok_path, tok_plugin;
  auto given = [&](const char* name) { return cmd_->get_option_no_throw(name) && cmd_->get_option(name)->count() > 0; };

  if (given("--model")) o.model = model_;
  if (given("--tokenizer")) tok_path = tokenizer_;
  if (given("--tokenizer-plugin")) tok_plugin = tokenizer_plugin_;
  if (!tok_plugin.empty()) o.tokenizer.name = tok_plugin;
  if (!tok_path.empty()) {
    std::erase_if(o.tokenizer.params, [](const auto& p) { return p.first == "path" || p.first.empty(); });
    o.tokenizer.params.emplace_back("path", tok_path);
  }
  if (given("--attention")) o.attention = parse_plugin_spec(attention_, "attention");
  if (given("--plugin-path")) for (const auto& p : plugin_path_) o.plugin_path.emplace_back(p);
  if (given("--prompt")) o.prompt = prompt_;
  else if (with_generation_ && !from_config.count("prompt") && !given("--replay") && !from_config.count("replay"))
    if (auto p = piped_prompt(); p && !p->empty()) o.prompt = *p;
  if (given("--max-tokens")) o.max_tokens = max_tokens_;
  if (given("--context")) o.context = context_;
  if (o.context < 0) throw ConfigError("context = " + std::to_string(o.context) + " (expected >= 1)");
  if (given("--threads")) o.threads = threads_;
  if (o.threads < 0 || o.threads > 1024) throw ConfigError("threads = " + std::to_string(o.threads) + " (expected 1..1024)");
  if (given("--sampler")) o.sampler = parse_plugin_chain(sampler_, "sampler");
  if (given("--seed")) o.seed = parse_seed(seed_, "--seed");
  if (given("--trace")) o.trace = trace_;
  if (given("--trace-keep-partial")) o.trace_keep_partial = trace_keep_partial_;
  o.config = config_;
  if (given("--trace-level")) o.trace_level = parse_level(trace_level_);
  if (given("--trace-top")) o.trace_top = trace_top_;
  if (o.trace_top < 1 || o.trace_top > 1000) throw ConfigError("trace_top = " + std::to_string(o.trace_top) + " (expected 1..1000)");
  if (given("--echo")) o.echo = echo_;
  if (given("--show-probs")) o.show_probs = show_probs_;
  if (given("--replay")) o.replay = replay_;
  if (given("--json")) o.json = json_;
  if (given("--top-logprobs")) o.top_logprobs = top_logprobs_;
  if (o.top_logprobs < 0 || o.top_logprobs > 1000) throw ConfigError("top_logprobs = " + std::to_string(o.top_logprobs) + " (expected 0..1000)");
  if (given("--pace")) o.pace_ms = pace_ms_;
  if (given("--pace-tps")) o.pace_tps = pace_tps_;
  if (!(o.pace_ms >= 0 && o.pace_ms <= 60000)) throw ConfigError("pace = " + std::to_string(o.pace_ms) + " ms (expected 0..60000)");
  if (!(o.pace_tps >= 0)) throw ConfigError("pace_tps = " + std::to_string(o.pace_tps) + " (expected >= 0)");
  if (given("--context-policy")) o.context_policy = parse_context_policy(context_policy_);
  if (given("--trace-attention")) o.trace_attention = parse_attention_trace(trace_attention_);
  if (!o.replay.empty()) {
    apply_replay_defaults(o, [&](const std::string& key) {
      std::string opt = "--" + key;
      for (auto& c : opt) if (c == '_') c = '-';
      return from_config.count(key) > 0 || given(opt.c_str());
    });
  }
  if (o.max_tokens < 0) throw ConfigError("--max-tokens = " + std::to_string(o.max_tokens) + " (expected >= 0)");
  return o;
}

std::optional<std::pair<fs::path, fs::path>> default_model() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> dirs;
  if (!ec) dirs.push_back((exe.parent_path() / ".." / GLASSBOX_DATA_RELDIR / "models").lexically_normal());
  for (const auto& d : dirs) {
    const fs::path m = d / "toy.bin", t = d / "toy-tok.bin";
    if (fs::exists(m, ec) && fs::exists(t, ec)) return std::make_pair(m, t);
  }
  return std::nullopt;
}

std::vector<std::unique_ptr<Sampler>> check_plugins(const Registry& registry, const PluginSpec& tokenizer, const RunOptions& opt,
                                                    std::vector<std::string>& warnings) {
  if (!tokenizer.name.empty()) registry.resolve(PluginKind::Tokenizer, tokenizer);
  registry.resolve(PluginKind::Attention, opt.attention);
  return build_sampler_stages(registry, opt.sampler.empty() ? std::vector<PluginSpec>{{"default", {}}} : opt.sampler, warnings);
}

std::unique_ptr<Session> open_session(const RunOptions& opt) {
  auto s = std::make_unique<Session>();
  if (opt.threads > 0) kernels::set_threads(opt.threads);
  s->registry.load_default(opt.plugin_path);
  for (const auto& r : s->registry.rejections()) warn("module rejected: " + r.to_string());

  // Model and tokenizer: given, or the embedded default (both must then come from it). A GGUF
  // model carries its own tokenizer, so --model alone is enough for it.
  fs::path model_path = opt.model;
  PluginSpec tok_spec = opt.tokenizer;
  const bool tok_given = !tok_spec.params.empty();
  std::optional<std::pair<fs::path, fs::path>> def;
  if (model_path.empty()) {
    def = default_model();
    if (!def) throw ConfigError("no --model given and no embedded default model installed next to the binary");
    model_path = def->first;
    if (!tok_given) tok_spec.params.emplace_back("path", def->second.string());
  }
  // Every plugin name and parameter is checked before the model is read.
  std::vector<std::string> warnings;
  auto stages = check_plugins(s->registry, tok_spec, opt, warnings);
  for (const auto& w : warnings) warn(w);

  // The digest is computed on another thread while this one maps and validates the model: a streamed
  // read (no second mapping, whose pages would count twice in the resident set).
  std::future<std::string> model_sha256;
  if (opt.model_hash) model_sha256 = std::async(std::launch::async, [model_path] { return sha256_file(model_path); });
  s->source = ModelSource::open(model_path);
  const Metadata& meta = s->source->metadata();
  if (tok_spec.name.empty()) {
    // The tokenizer family a GGUF file names (tokenizer.ggml.model); llama2.c's format otherwise.
    const auto family = meta.get_string("tokenizer.ggml.model");
    if (!family || *family == "llama") tok_spec.name = "llama2c";
    else if (*family == "gpt2") tok_spec.name = "bpe";
    else throw ConfigError(model_path.string() + ": tokenizer.ggml.model = '" + *family + "' is not supported (supported: llama, gpt2)");
    s->registry.resolve(PluginKind::Tokenizer, tok_spec);
  }
  if (!tok_spec.params.empty() || s->source->gguf()) {
    // A file named, or the model's own vocabulary.
  } else {
    throw ConfigError("--model " + model_path.string() + " is a llama2.c checkpoint, which holds no vocabulary: name its tokenizer file with --tokenizer");
  }
  s->config = s->source->config();
  Config& cfg = s->config;
  // The run's context: what was asked, or the model's capped at 4096 (a 128k-context model would
  // otherwise reserve gigabytes of KV cache up front).
  constexpr int kDefaultContextCap = 4096;
  if (opt.context > 0) {
    if (opt.context > cfg.seq_len)
      throw ConfigError("--context " + std::to_string(opt.context) + " exceeds the model's context length " + std::to_string(cfg.seq_len));
    cfg.seq_len = opt.context;
  } else if (cfg.seq_len > kDefaultContextCap) {
    warn("using a context of " + std::to_string(kDefaultContextCap) + " positions of the model's " +
         std::to_string(cfg.seq_len) + " (set --context to change)");
    cfg.seq_len = kDefaultContextCap;
  }
  s->tokenizer = s->registry.make_tokenizer(tok_spec, meta);
  std::string tok_path;
  for (const auto& [k, v] : tok_spec.params)
    if (k == "path" || k.empty()) tok_path = v;
  if (s->tokenizer->vocab_size() != cfg.vocab_size)
    throw ConfigError("tokenizer " + (tok_path.empty() ? model_path.string() : tok_path) + " has " +
                      std::to_string(s->tokenizer->vocab_size()) + " tokens but model " + model_path.string() +
                      " has a vocabulary of " + std::to_string(cfg.vocab_size) + ": they do not belong together");
  // Prefill streams every weight matrix once per block, so a block must be long enough that reading
  // the weights again costs little beside its multiply-adds: float32 weights cost 4 bytes per
  // multiply-add per block, so it needs about 4·FMA peak / (2·bandwidth) ≈ 30 positions per block
  // to break even here (175 GFLOP/s, 12 GB/s) and ten times that to make the re-reads a few
  // percent. Measured on 110M, 256-token prompt: blocks of 64 3.42, 128 3.15, 256 3.08 CPU ms per
  // token. The activations of 256 positions are 9 MB for 110M (capped at the context length).
  constexpr int kPrefillBlock = 256;
  s->model = std::make_unique<Transformer>(cfg, s->source->weights(), kPrefillBlock);
  // Test-only (docs/golden-traces.md): a wrong RoPE base, the perturbation the golden suite must catch.
  // The trace header keeps the checkpoint's rope_theta, as a silent bug would.
  if (const char* theta = std::getenv("GLASSBOX_TEST_ROPE_THETA"); theta && *theta) {
    char* end = nullptr;
    const float v = std::strtof(theta, &end);
    if (*end || !(v > 0)) throw ConfigError(std::string("GLASSBOX_TEST_ROPE_THETA = '") + theta + "' (expected a number > 0)");
    s->model->set_rope_theta(v);
    warn(std::string("test-only GLASSBOX_TEST_ROPE_THETA: RoPE base set to ") + theta + " (results are deliberately wrong)");
  }
  s->attention = s->registry.make_attention(opt.attention, cfg.attention_shape());
  s->seed = opt.seed ? *opt.seed : std::random_device{}();
  check_token_ids(stages, cfg.vocab_size);
  s->sampler = std::make_unique<SamplerChain>(std::move(stages), cfg.vocab_size, s->seed);

  RunHeader& h = s->header;
  h.model_path = model_path.string();
  if (model_sha256.valid()) h.model_sha256 = model_sha256.get();
  h.config = cfg;
  h.weight_types = s->source->weights().type_summary();
  h.tokenizer_path = tok_path;
  // Every plugin describes itself (name + resolved parameters) the same way.
  h.plugins.push_back({"tokenizer", s->tokenizer->name(), s->tokenizer->params()});
  h.plugins.push_back({"attention", s->attention->name(), s->attention->params()});
  for (const auto& st : s->sampler->stages()) h.plugins.push_back({"sampler", st->name(), st->params()});
  h.seed = s->seed;
  h.rng = Rng::kName;
  h.kernels = std::string(kernels::kernel_set());
  h.threads = kernels::threads();
  return s;
}

}  // namespace glassbox::cli
