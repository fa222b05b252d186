// Model file formats behind one interface: a file (llama2.c checkpoint or GGUF, told apart by its
// magic) yields a Config, typed weight views and the file's metadata. Nothing above this seam
// knows which format a model came from.
#pragma once
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

#include "glassbox/model/config.hpp"
#include "glassbox/model/gguf.hpp"
#include "glassbox/model/mapped_file.hpp"
#include "glassbox/model/metadata.hpp"
#include "glassbox/model/weights.hpp"

namespace glassbox {

class ModelSource {
 public:
  // Maps the file, detects its format and validates it in full before any weight is used.
  // Throws ModelError ("PATH: what is wrong (what was expected)").
  static std::unique_ptr<ModelSource> open(const std::filesystem::path& path);
  // The same for a file mapped already (shared: a digest of the mapping can run beside the check).
  static std::unique_ptr<ModelSource> open(std::shared_ptr<const MappedFile> file);

  const std::filesystem::path& path() const { return path_; }
  const Config& config() const { return config_; }
  const Weights& weights() const { return weights_; }
  // GGUF: the file's own key/values (tokenizer, chat template, ...). llama2.c: the keys its header
  // implies (general.architecture, llama.*), so consumers read one vocabulary of keys.
  const Metadata& metadata() const { return metadata_; }
  const MappedFile& file() const { return *file_; }
  const GgufFile* gguf() const { return gguf_.get(); }  // nullptr for llama2.c files

 private:
  ModelSource() = default;
  void open_llama2c();
  void open_gguf();

  std::filesystem::path path_;
  std::shared_ptr<const MappedFile> file_;
  std::unique_ptr<GgufFile> gguf_;
  Config config_;
  Weights weights_;
  Metadata metadata_;
};

// llama2.c: reads and checks only the header (used by the loader and by tests of bad headers).
Config read_config(const std::filesystem::path& path, const std::byte* data, std::size_t size);

// Metadata keys a llama2.c model implies (general.architecture, llama.embedding_length, ...).
Metadata llama2c_metadata(const Config& c, const std::filesystem::path& path);

}  // namespace glassbox
