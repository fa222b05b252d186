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


#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/rng.hpp"
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

  // The digest is computed on another thread, from the model's own mapping, while this one checks
  // every weight: the hash trails the check over pages already faulted in, and no page is read or
  // counted in the resident set twice. The thread shares the mapping, so a model that fails its
  // check is not unmapped under it.
  auto mapped = std::make_shared<const MappedFile>(model_path);
  std::optional<DigestThread> model_sha256;  // stopped if this function throws
  if (opt.model_hash) model_sha256.emplace(mapped);
  s->source = ModelSource::open(std::move(mapped));
  const Metadata& meta = s->source->metadata();
  if (tok_spec.name.empty()) {
    // The tokenizer family a GGUF file names (tokenizer.ggml.model); llama2.c's format otherwise.
    const auto family = meta.get_string("tokenizer.ggml.model");
    if (!family || *family == "llama") tok_spec.name = "llama2c";
    else if (*family == "gpt2") tok_spec.name = "bpe";
    else throw ConfigError(model_path.string() + ": tokenizer.ggml.model = '" + *family + "' is not supported (supported: llama, gpt2)");
    s->registry.resolve(PluginKind::Tokenizer, tok_spec);
  }
  const bool no_vocabulary = tok_spec.params.empty() && !s->source->gguf();
  if (!no_vocabulary || !opt.need_vocabulary) {
    // A file named, the model's own vocabulary, or none needed.
  } else {
    throw ConfigError("--model " + model_path.string() + " is a llama2.c checkpoint, which holds no vocabulary: name its tokenizer file with --tokenizer");
  }
  s->config = s->source->config();
  Config& cfg = s->config;
  cfg.gelu = opt.gelu;
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
  if (!no_vocabulary) s->tokenizer = s->registry.make_tokenizer(tok_spec, meta);
  std::string tok_path;
  for (const auto& [k, v] : tok_spec.params)
    if (k == "path" || k.empty()) tok_path = v;
  if (s->tokenizer && s->tokenizer->vocab_size() != cfg.vocab_size)
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
  if (opt.ignore_eos) {
    // As llama.cpp's --ignore-eos: every end-of-generation id gets a -inf bias before any other stage
    // runs, so the chain never picks one; the stage is in the trace like any other.
    if (!s->tokenizer) throw ConfigError("--ignore-eos: this run has no vocabulary to name its end-of-generation tokens");
    std::string bias;
    for (auto id : s->tokenizer->eog_ids()) bias += (bias.empty() ? "" : ";") + std::to_string(id) + "=-inf";
    if (!bias.empty()) stages.insert(stages.begin(), s->registry.make_sampler(PluginSpec{"logit-bias", {{"bias", bias}}}));
  }
  check_token_ids(stages, cfg.vocab_size);
  s->sampler = std::make_unique<SamplerChain>(std::move(stages), cfg.vocab_size, s->seed);

  RunHeader& h = s->header;
  h.model_path = model_path.string();
  if (model_sha256) {
    // Deferred only where a core is left free for it: on a core the matrix products use, hashing
    // would slow the run by as much as it saves at the start (measured, 15M on 2 threads: a basic
    // trace cost 13% of decode throughput with the digest deferred, 4% without).
    if (opt.defer_model_hash && kernels::threads() < kernels::cores()) h.model_sha256_pending = [f = model_sha256->digest()] { return f.get(); };
    else h.model_sha256 = model_sha256->digest().get();
  }
  h.config = cfg;
  h.weight_types = s->source->weights().type_summary();
  h.tokenizer_path = tok_path;
  // Every plugin describes itself (name + resolved parameters) the same way.
  if (s->tokenizer) h.plugins.push_back({"tokenizer", s->tokenizer->name(), s->tokenizer->params()});
  h.plugins.push_back({"attention", s->attention->name(), s->attention->params()});
  for (const auto& st : s->sampler->stages()) h.plugins.push_back({"sampler", st->name(), st->params()});
  h.seed = s->seed;
  h.rng = Rng::kName;
  h.kernels = std::string(kernels::kernel_set());
  h.threads = kernels::threads();
  return s;
}

}  // namespace glassbox::cli
