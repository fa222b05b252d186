// Run assembly without a command line: a model loaded once (file, tokenizer chosen from its metadata,
// digest), then any number of pipelines over it (context, attention module, sampler chain, seed, header).
// `glassbox run`, chat, compare and bench build one; `glassbox serve` builds one per request.
#pragma once
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "glassbox/model.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/sampling.hpp"
#include "glassbox/tokenizer.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox {

// The built-in modules, then GLASSBOX_PLUGIN_PATH's, then `extra`; every module rejected adds a warning.
std::shared_ptr<const Registry> load_registry(const std::vector<std::filesystem::path>& extra, std::vector<std::string>& warnings);

// What is fixed once per model file.
struct ModelSpec {
  std::filesystem::path model;
  PluginSpec tokenizer{"", {}};  // name empty: chosen from the model's metadata; a "path" parameter names its file
  bool need_vocabulary = true;   // false: a llama2.c checkpoint without a tokenizer file is accepted (bench)
  bool model_hash = true;        // compute the file's SHA-256 (for trace headers)
  bool defer_model_hash = false; // headers then carry model_sha256_pending where a core is free for the hash
  GeluKind gelu = GeluKind::Tanh;
};

// The tokenizer plugin that accepts a model's metadata (each says which through its Accepts: the
// built-in "llama2c" takes tokenizer.ggml.model "llama" or none, a llama2.c checkpoint; "bpe" takes
// "gpt2"). A one-line ConfigError naming the file, the value and what is supported when none accepts
// it, or the candidates when several do.
std::string tokenizer_for(const Registry& registry, const Metadata& meta, const std::string& model_path);

// A model file mapped and checked, with its tokenizer: read-only after loading, shared by pipelines on
// any number of threads (Tokenizer's methods are const; nothing here is written after load_model).
struct LoadedModel {
  std::shared_ptr<const Registry> registry;
  std::unique_ptr<ModelSource> source;
  std::filesystem::path path;
  std::string tokenizer_path;            // "" when the model file carries the vocabulary (GGUF)
  std::unique_ptr<Tokenizer> tokenizer;  // null only when ModelSpec::need_vocabulary was false and none exists
  Config config;                         // the model's (gelu applied); a pipeline's own is its run's context
  bool defer_model_hash = false;
  std::optional<std::shared_future<std::string>> digest;  // the file's SHA-256, when asked for
  std::shared_ptr<DigestThread> digest_thread;
};

// Maps, checks and hashes the model, picks and builds its tokenizer and checks it against the model's
// vocabulary. Throws glassbox errors with one-line messages.
std::shared_ptr<const LoadedModel> load_model(std::shared_ptr<const Registry> registry, const ModelSpec& spec);

// What may differ from one run over the same model to the next.
struct RunSpec {
  PluginSpec attention{"kv-cache", {}};
  std::vector<PluginSpec> sampler;  // empty: "default"
  bool ignore_eos = false;          // a logit-bias stage banning every end-of-generation token, first in the chain
  // Stages that options other than --sampler add to the chain (--grammar's and --json-schema's grammar
  // stage), placed by what each declares: in front when it runs_first() (a grammar), else just before
  // the selecting stage. Stages written in `sampler` keep the order given.
  std::vector<PluginSpec> extra_stages;
  int context = 0;                  // positions the run may use (0: the model's, capped at kDefaultContextCap)
  std::optional<std::uint64_t> seed;  // none: a random one
};
constexpr int kDefaultContextCap = 4096;

// What a run allocates up front (KV cache, activations of a prefill block, RoPE tables, logits), in
// bytes, for a config whose seq_len is the run's context.
std::uint64_t run_memory_bytes(const Config& cfg, int prefill_block);
// The bound on it (docs/reliability.md): kRunMemoryFileMultiple x the model file's size +
// kRunMemoryAllowance. Beyond it, a ModelError naming the file, what it would need and the longest
// --context that fits; build_pipeline calls it before anything is allocated.
constexpr std::uint64_t kRunMemoryFileMultiple = 8;
constexpr std::uint64_t kRunMemoryAllowance = std::uint64_t{256} << 20;
void check_run_memory(const Config& cfg, const std::filesystem::path& model_file, int prefill_block);

// The attention and sampler plugins a RunSpec names, checked without a model (or with what `context` knows
// of it): returns the chain's stages (build_sampler_stages, "dist" appended when nothing selects, then
// RunSpec::extra_stages placed) and adds chain warnings to `warnings`.
std::vector<std::unique_ptr<Sampler>> check_run_spec(const Registry& registry, const RunSpec& spec, std::vector<std::string>& warnings,
                                                     const PluginContext& context = {});

// --ignore-eos's stage: a logit-bias of -inf on each of the tokenizer's end-of-generation ids (null when it
// has none), to go first in a chain. build_pipeline adds it for RunSpec::ignore_eos; compare's chains too.
std::unique_ptr<Sampler> make_ignore_eos_stage(const Registry& registry, const Tokenizer& tokenizer);


// Everything one generation needs, over a shared LoadedModel: its own activations, KV store and chain.
struct Pipeline {
  std::shared_ptr<const LoadedModel> loaded;
  std::shared_ptr<const Registry> registry;
  const ModelSource* source = nullptr;
  Config config;                          // the run's: the model's with seq_len = the run's context
  std::unique_ptr<Transformer> model;
  const Tokenizer* tokenizer = nullptr;   // the loaded model's (null: no vocabulary)
  std::unique_ptr<KvStore> attention;
  std::unique_ptr<SamplerChain> sampler;
  RunHeader header;  // model, plugins, seed: ready for Engine::generate
  std::uint64_t seed = 0;
};

// One pipeline over `loaded`. Warnings (chain order, context capped, test-only settings) go to `warnings`.
// `kv_pool`: a block pool shared with other pipelines (serve --kv-pool) that the attention module may take its
// blocks from (PluginContext::kv_pool); null, as `glassbox run`: the module allocates its own.
std::unique_ptr<Pipeline> build_pipeline(std::shared_ptr<const LoadedModel> loaded, const RunSpec& spec,
                                         std::vector<std::string>& warnings, std::shared_ptr<KvBlockPool> kv_pool = nullptr);

}  // namespace glassbox
