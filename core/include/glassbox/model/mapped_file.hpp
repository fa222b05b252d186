// A read-only memory map of a whole file: model weights are used in place, never copied.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace glassbox {

// What identifies a file and says it has not changed: device, inode, size, and the modification and
// status-change times in nanoseconds (a write, truncate, chmod or rename moves ctime; nothing a user can
// do sets it back).
struct FileStamp {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

// The stamp of the regular file at `path`; false when there is none (missing, or not a regular file).
bool stamp_of(const std::filesystem::path& path, FileStamp& out);

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws ModelError naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  // The file's stamp when it was mapped (of the open descriptor, so of what the mapping shows).
  const FileStamp& stamp() const { return stamp_; }

 private:
  std::filesystem::path path_;
  FileStamp stamp_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace glassbox
