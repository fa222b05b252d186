// GGUF (v2/v3) model files: a reader that validates every field of a file already in memory before
// using it, and a writer (for `glassbox convert` and for tests that build files).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/model/dtype.hpp"
#include "glassbox/model/metadata.hpp"

namespace glassbox {

// True when the data starts with GGUF's magic "GGUF".
bool is_gguf(const std::byte* data, std::size_t size);

// ggml's name for a ggml type id ("Q5_0"), including the types glassbox does not read; "" for
// ids ggml never assigned. For error messages such as "Q5_0 (ggml type 6)".
std::string_view ggml_type_name(std::uint32_t ggml_type_id);

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  int n_dims = 0;
  std::array<std::int64_t, 4> ne{};  // ggml order: ne[0] innermost (a matrix's row length); unused dims are 1
  std::uint64_t offset = 0;          // relative to the data section
  std::size_t bytes = 0;
};

// Parses a whole GGUF file that the caller has in memory (usually mmapped) and keeps pointers into
// it: the bytes must outlive this object. Every count, length, offset and shape is checked against
// the file size before it is used, so a corrupt or hostile file gives a ModelError, "PATH: what is
// wrong (what was expected)", and never a crash or a huge allocation.
class GgufFile {
 public:
  GgufFile(std::string path, const std::byte* data, std::size_t size);

  const std::string& path() const { return path_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::size_t data_offset() const { return data_offset_; }  // file byte where the tensor data starts
  const Metadata& metadata() const { return metadata_; }    // metadata().source == path
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // in file order
  const GgufTensorInfo* find(std::string_view name) const;
  // A view of one of this file's tensors: row-major shape = reversed ne, data points into the file.
  Tensor tensor(const GgufTensorInfo& info) const;

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::size_t data_offset_ = 0;
  Metadata metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> by_name_;
};

// Builds a GGUF v3 file: metadata in insertion order, then the tensors in the order added, each
// tensor's data aligned (and padded) to the alignment, the layout ggml's own writer produces.
class GgufWriter {
 public:
  // Setting a key again replaces its value and keeps its first position. Values are checked when
  // the file is written (an integer must fit its type, array items must have the element type).
  void set(std::string key, MetaValue v);
  // shape_row_major is outermost first ({rows, cols}); data holds exactly the tensor's bytes in
  // `t`'s storage layout. Throws ModelError for a bad shape, size or a duplicate name.
  void add_tensor(std::string name, DType t, std::vector<std::int64_t> shape_row_major, std::vector<std::byte> data);
  // Writes to a temporary file in the same folder and renames it over `path`, so a failure never
  // leaves a half-written file. An alignment other than 32 is recorded as `general.alignment`
  // (a `general.alignment` set by the caller is replaced by `alignment`).
  void write(const std::filesystem::path& path, std::uint32_t alignment = 32) const;

  const Metadata& metadata() const { return metadata_; }

 private:
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::vector<std::byte> data;
  };
  Metadata metadata_;
  std::vector<Pending> tensors_;
};

}  // namespace glassbox
