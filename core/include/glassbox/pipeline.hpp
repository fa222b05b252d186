// Assembling a run from names: sampler chains from specs, file digests. Used by the CLI and tests.
#pragma once
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "glassbox/registry.hpp"
#include "glassbox/sampling.hpp"

namespace glassbox {

class MappedFile;

// The chain `--sampler default` stands for (documented in docs/samplers.md).
extern const char* const kDefaultSamplerChain;

// Expands "default", creates each stage in the order given with `context` (what is known of the run:
// vocabulary, tokenizer), and appends a weighted draw ("dist") when no stage selects. Stages placed after
// a selecting stage add a warning, and so does a stage that changes nothing (noop_stage_warnings).
std::vector<std::unique_ptr<Sampler>> build_sampler_stages(const Registry& reg, std::vector<PluginSpec> specs,
                                                          std::vector<std::string>& warnings,
                                                          const PluginContext& context = {});
// A warning for each stage whose parameters make it a no-op (Sampler::noop_reason), naming the stage
// and a value that turns it on: "sampler stage 'xtc' changes nothing: probability = 0 (…)". Called by
// build_sampler_stages, so run, chat, compare, explain and serve (check_run_spec) all get it.
void noop_stage_warnings(const std::vector<std::unique_ptr<Sampler>>& stages, std::vector<std::string>& warnings);

// Hex SHA-256 of a file's bytes.
std::string sha256_file(const std::filesystem::path& path);
// The same, remembered between runs (a model's digest is 0.3 s for 438 MB, 3 s for a 4 GB GGUF): the
// digest cache (digest_cache_dir()) keeps one entry per file, keyed by its device and inode and valid while
// its size, modification time and status-change time are what they were when it was hashed; any other
// file, or a changed one, is hashed again. An entry is written only for a file last changed more than
// 2 s before its hashing began (a change within the same timestamp tick would otherwise go unseen), and
// only when the file did not change while being hashed. A cache that cannot be read or written is
// passed over: the file is hashed.
std::string sha256_file_cached(const std::filesystem::path& path);
// The same for a file already mapped, hashed from its mapping (a model's own, so no second copy of its
// pages is read or counted in the resident set; run beside the loader's check of every weight, the
// hash follows it over pages already faulted in). The cache is used only while the file at its path
// is still the one mapped. Returns "" when *stop turns true before the hash is done (checked every 4 MiB).
std::string sha256_mapped_cached(const MappedFile& file, const std::atomic<bool>* stop = nullptr);

// sha256_mapped_cached(*file) on a thread of its own, started at construction (a loader checks the
// model meanwhile). Left by an exception (the model, its tokenizer or an option was refused), the
// destructor tells the hash to stop, so the error is not held back until a file that will not be used
// is hashed; digest() is then "".
class DigestThread {
 public:
  explicit DigestThread(std::shared_ptr<const MappedFile> file);
  ~DigestThread();
  DigestThread(const DigestThread&) = delete;
  DigestThread& operator=(const DigestThread&) = delete;
  const std::shared_future<std::string>& digest() const { return digest_; }

 private:
  std::shared_ptr<std::atomic<bool>> stop_;
  std::shared_future<std::string> digest_;
  int uncaught_;
};
// $GLASSBOX_CACHE_DIR, else $XDG_CACHE_HOME/glassbox, else $HOME/.cache/glassbox; empty (no cache) when
// GLASSBOX_CACHE_DIR is set to "off" or no folder can be named.
std::filesystem::path digest_cache_dir();
// SHA-256 of bytes already in memory (e.g. a model's own mapping), lowercase hex.
std::string sha256_bytes(const void* data, std::size_t size);

}  // namespace glassbox
