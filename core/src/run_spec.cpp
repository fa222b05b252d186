// Run assembly: a model loaded once (tokenizer chosen from its metadata, digest on its own thread), and
// pipelines over it (the run's context, attention module, sampler chain, seed and trace header).
#include "glassbox/run_spec.hpp"

#include <algorithm>
#include <cstdlib>
#include <random>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/model/mapped_file.hpp"
#include "glassbox/rng.hpp"

namespace glassbox {

std::shared_ptr<const Registry> load_registry(const std::vector<std::filesystem::path>& extra, std::vector<std::string>& warnings) {
  auto reg = std::make_shared<Registry>();
  reg->load_default(extra);
  for (const auto& r : reg->rejections()) warnings.push_back("module rejected: " + r.to_string());
  return reg;
}

std::string tokenizer_for(const Registry& registry, const Metadata& meta, const std::string& model_path) {
  // Each tokenizer says which vocabularies it reads (its Accepts): core names no family.
  const auto chosen = registry.accepting(PluginKind::Tokenizer, meta);
  if (chosen.size() == 1) return chosen.front();
  const auto family = meta.get_string("tokenizer.ggml.model");
  const std::string what = family ? "tokenizer.ggml.model = '" + *family + "'" : "a model without tokenizer.ggml.model";
  std::string names;
  for (const auto& n : chosen) names += (names.empty() ? "'" : ", '") + n + "'";
  if (!chosen.empty())
    throw ConfigError(model_path + ": " + what + " is accepted by several tokenizers (" + names + "); name one with --tokenizer-plugin");
  std::string supported;
  for (const auto& e : registry.list())
    if (e.kind == PluginKind::Tokenizer && e.accepts) supported += (supported.empty() ? "" : ", ") + *e.accepts + " (" + e.info.name + ")";
  // A build without the bpe module (-DGLASSBOX_BPE_TOKENIZER=OFF) says so: the vocabulary may be fine, the
  // build lacks the tokenizer.
#ifdef GLASSBOX_NO_BPE_TOKENIZER
  const std::string lacking = "; this build has no bpe tokenizer (GPT-2, Llama 3, Qwen2 vocabularies): run this model with a native glassbox";
#else
  const std::string lacking;
#endif
  throw ConfigError(model_path + ": " + what + " is not supported (supported: " + (supported.empty() ? "none" : supported) + ")" + lacking);
}

std::shared_ptr<const LoadedModel> load_model(std::shared_ptr<const Registry> registry, const ModelSpec& spec) {
  auto m = std::make_shared<LoadedModel>();
  m->registry = registry;
  m->path = spec.model;
  m->defer_model_hash = spec.defer_model_hash;
  PluginSpec tok_spec = spec.tokenizer;
  if (!tok_spec.name.empty()) registry->resolve(PluginKind::Tokenizer, tok_spec);

  // The digest is computed on another thread, from the model's own mapping, while this one checks
  // every weight: the hash trails the check over pages already faulted in, and no page is read or
  // counted in the resident set twice. The thread shares the mapping, so a model that fails its
  // check is not unmapped under it (the DigestThread tells it to stop when this function throws).
  auto mapped = std::make_shared<const MappedFile>(spec.model);
  if (spec.model_hash) m->digest_thread = std::make_shared<DigestThread>(mapped);
  m->source = ModelSource::open(std::move(mapped));
  const Metadata& meta = m->source->metadata();
  if (tok_spec.name.empty()) {
    tok_spec.name = tokenizer_for(*registry, meta, spec.model.string());
    registry->resolve(PluginKind::Tokenizer, tok_spec);
  }
  const bool no_vocabulary = tok_spec.params.empty() && !m->source->gguf();
  if (no_vocabulary && spec.need_vocabulary)
    throw ConfigError("--model " + spec.model.string() + " is a llama2.c checkpoint, which holds no vocabulary: name its tokenizer file with --tokenizer");
  m->config = m->source->config();
  m->config.gelu = spec.gelu;
  for (const auto& [k, v] : tok_spec.params)
    if (k == "path" || k.empty()) m->tokenizer_path = v;
  if (!no_vocabulary) {
    PluginContext context;
    context.model = &meta;
    context.vocab_size = m->config.vocab_size;
    m->tokenizer = registry->make<Tokenizer>(tok_spec, context);
  }
  if (m->tokenizer && m->tokenizer->vocab_size() != m->config.vocab_size)
    throw ConfigError("tokenizer " + (m->tokenizer_path.empty() ? spec.model.string() : m->tokenizer_path) + " has " +
                      std::to_string(m->tokenizer->vocab_size()) + " tokens but model " + spec.model.string() +
                      " has a vocabulary of " + std::to_string(m->config.vocab_size) + ": they do not belong together");
  if (m->digest_thread) m->digest = m->digest_thread->digest();
  return m;
}

std::vector<std::unique_ptr<Sampler>> check_run_spec(const Registry& registry, const RunSpec& spec, std::vector<std::string>& warnings,
                                                     const PluginContext& context) {
  registry.resolve(PluginKind::Attention, spec.attention);
  for (const auto& s : spec.extra_stages) registry.resolve(PluginKind::Sampler, s);
  auto stages = build_sampler_stages(registry, spec.sampler.empty() ? std::vector<PluginSpec>{{"default", {}}} : spec.sampler,
                                     warnings, context);
  // The stages other options add go where each says: first when it must see the raw distribution (a
  // grammar: llama.cpp applies its grammar before the chain), otherwise just before the selecting stage.
  // The stages written in --sampler keep the user's order.
  std::size_t front = 0;
  for (const auto& s : spec.extra_stages) {
    auto st = registry.make_sampler(s, context);
    if (st->runs_first()) {
      stages.insert(stages.begin() + static_cast<std::ptrdiff_t>(front++), std::move(st));
    } else {
      auto sel = std::find_if(stages.begin(), stages.end(), [](const auto& x) { return x->selects(); });
      stages.insert(sel, std::move(st));
    }
  }
  return stages;
}

std::unique_ptr<Sampler> make_ignore_eos_stage(const Registry& registry, const Tokenizer& tokenizer) {
  // As llama.cpp's --ignore-eos: every end-of-generation id gets a -inf bias before any other stage
  // runs, so the chain never picks one; the stage is in the trace like any other.
  std::string bias;
  for (auto id : tokenizer.eog_ids()) bias += (bias.empty() ? "" : ";") + std::to_string(id) + "=-inf";
  if (bias.empty()) return nullptr;
  return registry.make_sampler(PluginSpec{"logit-bias", {{"bias", bias}}});
}

std::uint64_t run_memory_bytes(const Config& cfg, int prefill_block) {
  using U = std::uint64_t;
  const U ctx = static_cast<U>(std::max(cfg.seq_len, 0));
  const U block = std::min<U>(static_cast<U>(std::max(prefill_block, 1)), std::max<U>(ctx, 1));
  const U f = sizeof(float);
  // K and V for every layer and position: (n_layers, seq_len, kv_dim) twice.
  const U kv = 2 * static_cast<U>(cfg.n_layers) * ctx * static_cast<U>(cfg.kv_dim()) * f;
  // A prefill block's activations (x, xb, q, k, v, att, hb, hb2 and the fused forms), the RoPE tables
  // (seq_len, head_size) for up to two bases, and the logits.
  const U per_pos = 2 * U(cfg.dim) + 2 * U(cfg.q_dim()) + 4 * U(cfg.kv_dim()) + 4 * U(cfg.hidden_dim);
  const U act = block * per_pos * f + 2 * ctx * static_cast<U>(cfg.head_size()) * f + static_cast<U>(cfg.vocab_size) * f;
  return kv + act;
}

void check_run_memory(const Config& cfg, const std::filesystem::path& model_file, int prefill_block) {
  // What a run allocates up front grows with the context and the layer count, which a small file
  // can declare freely (512 thin layers in 2.5 MB reserved 528 MB of KV cache). A real model's KV cache
  // at its context is within a few times its file (Phi-3-mini Q4 at 4,096 positions: 3.2 GB beside
  // 2.2 GB), so the bound is a multiple of the file, plus room for small models' long contexts.
  std::error_code ec;
  const std::uint64_t file = std::filesystem::file_size(model_file, ec);
  if (ec) return;  // not a plain file (the loader has read it already): nothing to compare with
  const std::uint64_t need = run_memory_bytes(cfg, prefill_block);
  const std::uint64_t limit = kRunMemoryFileMultiple * file + kRunMemoryAllowance;
  if (need <= limit) return;
  auto mib = [](std::uint64_t b) { return std::to_string((b + (1u << 20) - 1) >> 20); };
  // The longest context that fits, for the message.
  Config c = cfg;
  int lo = 0, hi = cfg.seq_len;
  while (lo < hi) {
    c.seq_len = lo + (hi - lo + 1) / 2;
    if (run_memory_bytes(c, prefill_block) <= limit) lo = c.seq_len;
    else hi = c.seq_len - 1;
  }
  throw ModelError(model_file.string() + ": a run of " + std::to_string(cfg.seq_len) + " positions over " + std::to_string(cfg.n_layers) +
                   " layers (kv_dim " + std::to_string(cfg.kv_dim()) + ") would need " + mib(need) +
                   " MiB for its KV cache and activations, more than the limit of " + std::to_string(kRunMemoryFileMultiple) +
                   " x the file (" + mib(file) + " MiB) + " + std::to_string(kRunMemoryAllowance >> 20) + " MiB = " + mib(limit) + " MiB" +
                   (lo > 0 ? "; use --context " + std::to_string(lo) + " or less" : std::string("; the model's shape alone exceeds it")));
}

std::unique_ptr<Pipeline> build_pipeline(std::shared_ptr<const LoadedModel> loaded, const RunSpec& spec,
                                         std::vector<std::string>& warnings, std::shared_ptr<KvBlockPool> kv_pool) {
  // The stages learn the run's vocabulary and tokenizer through their context (logit-bias checks its ids).
  PluginContext stage_context;
  stage_context.model = &loaded->source->metadata();
  stage_context.vocab_size = loaded->config.vocab_size;
  stage_context.tokenizer = loaded->tokenizer.get();
  auto stages = check_run_spec(*loaded->registry, spec, warnings, stage_context);
  auto p = std::make_unique<Pipeline>();
  p->loaded = loaded;
  p->registry = loaded->registry;
  p->source = loaded->source.get();
  p->tokenizer = loaded->tokenizer.get();
  p->config = loaded->config;
  Config& cfg = p->config;
  // The run's context: what was asked, or the model's capped at 4096 (a 128k-context model would
  // otherwise reserve gigabytes of KV cache up front). The model's own Config stays as the file says.
  if (spec.context > 0) {
    if (spec.context > cfg.seq_len)
      throw ConfigError("--context " + std::to_string(spec.context) + " exceeds the model's context length " + std::to_string(cfg.seq_len));
    cfg.seq_len = spec.context;
  } else if (cfg.seq_len > kDefaultContextCap) {
    warnings.push_back("using a context of " + std::to_string(kDefaultContextCap) + " positions of the model's " +
                       std::to_string(cfg.seq_len) + " (set --context to change)");
    cfg.seq_len = kDefaultContextCap;
  }
  // Prefill streams every weight matrix once per block, so a block must be long enough that reading
  // the weights again costs little beside its multiply-adds: float32 weights cost 4 bytes per
  // multiply-add per block, so it needs about 4·FMA peak / (2·bandwidth) ≈ 30 positions per block
  // to break even here (175 GFLOP/s, 12 GB/s) and ten times that to make the re-reads a few
  // percent. Measured on 110M, 256-token prompt: blocks of 64 3.42, 128 3.15, 256 3.08 CPU ms per
  // token. The activations of 256 positions are 9 MB for 110M (capped at the context length).
  constexpr int kPrefillBlock = 256;
  check_run_memory(cfg, loaded->path, kPrefillBlock);
  p->model = std::make_unique<Transformer>(p->config, loaded->source->weights(), kPrefillBlock);
  // Test-only (docs/golden-traces.md): a wrong RoPE base, the perturbation the golden suite must catch.
  // The trace header keeps the checkpoint's rope_theta, as a silent bug would.
  if (const char* theta = std::getenv("GLASSBOX_TEST_ROPE_THETA"); theta && *theta) {
    char* end = nullptr;
    const float v = std::strtof(theta, &end);
    if (*end || !(v > 0)) throw ConfigError(std::string("GLASSBOX_TEST_ROPE_THETA = '") + theta + "' (expected a number > 0)");
    p->model->set_rope_theta(v);
    warnings.push_back(std::string("test-only GLASSBOX_TEST_ROPE_THETA: RoPE base set to ") + theta + " (results are deliberately wrong)");
  }
  PluginContext context;
  context.model = &loaded->source->metadata();
  context.vocab_size = cfg.vocab_size;
  context.attention = cfg.attention_shape();
  context.kv_pool = std::move(kv_pool);
  p->attention = loaded->registry->make<KvStore>(spec.attention, context);
  p->seed = spec.seed ? *spec.seed : std::random_device{}();
  if (spec.ignore_eos) {
    if (!p->tokenizer) throw ConfigError("--ignore-eos: this run has no vocabulary to name its end-of-generation tokens");
    if (auto ban = make_ignore_eos_stage(*loaded->registry, *p->tokenizer)) stages.insert(stages.begin(), std::move(ban));
  }
  p->sampler = std::make_unique<SamplerChain>(std::move(stages), cfg.vocab_size, p->seed);

  RunHeader& h = p->header;
  h.model_path = loaded->path.string();
  if (loaded->digest) {
    // Deferred only where a core is left free for it: on a core the matrix products use, hashing
    // would slow the run by as much as it saves at the start (measured, 15M on 2 threads: a basic
    // trace cost 13% of decode throughput with the digest deferred, 4% without).
    if (loaded->defer_model_hash && kernels::threads() < kernels::cores()) h.model_sha256_pending = [f = *loaded->digest] { return f.get(); };
    else h.model_sha256 = loaded->digest->get();
  }
  h.config = cfg;
  h.weight_types = loaded->source->weights().type_summary();
  h.tokenizer_path = loaded->tokenizer_path;
  // Every plugin describes itself (name + resolved parameters) the same way.
  if (p->tokenizer) h.plugins.push_back({"tokenizer", p->tokenizer->name(), p->tokenizer->params()});
  h.plugins.push_back({"attention", p->attention->name(), p->attention->params()});
  for (const auto& st : p->sampler->stages()) h.plugins.push_back({"sampler", st->name(), st->params()});
  h.seed = p->seed;
  h.rng = Rng::kName;
  h.kernels = std::string(kernels::kernel_set());
  h.threads = kernels::threads();
  return p;
}

}  // namespace glassbox
