// A read-only memory map of a whole file: model weights are used in place, never copied.
#pragma once
#include <cstddef>
#include <filesystem>

namespace glassbox {

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws ModelError naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace glassbox
