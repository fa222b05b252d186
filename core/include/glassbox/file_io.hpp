// Files glassbox writes (atomically: a temporary file in the same folder, fsync, rename) and the checks on
// files it reads (regular files only, never one of its own outputs). docs/reliability.md says why.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace glassbox {

// Why `path` must not be opened as an input (a FIFO or device would block or never end; a folder),
// or nullopt when it is a regular file or does not exist (opening it then fails with its own message).
std::optional<std::string> not_a_regular_file(const std::filesystem::path& path);

// Throws ConfigError when `output` (given with `option`, e.g. "--trace") is the same file (device and
// inode) as one of `inputs` ({what, path}, e.g. {"--model", "m.bin"}): writing it would destroy the input.
void refuse_output_over_input(const std::string& output, const std::string& option,
                              const std::vector<std::pair<std::string, std::string>>& inputs);

// One output file. Writes go to a fresh temporary file beside `path` (so concurrent writers never
// share bytes); commit() makes it durable (fsync) and renames it over `path` in one step. Destroyed
// without commit(), the temporary file is removed and `path` is untouched.
// When `path` already is a device or FIFO (/dev/stdout, /dev/null), it is written in place instead.
// Errors (cannot create, disk full, file size limit) are OutputErrors naming the path.
class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view data);
  void commit();                                      // to path()
  void commit_as(const std::filesystem::path& other);  // to another name beside it (e.g. NAME.partial)
  void discard();                                     // remove the temporary file now
  const std::filesystem::path& path() const { return path_; }
  bool in_place() const { return in_place_; }         // a device or FIFO, written directly
  bool open() const { return fd_ >= 0; }

 private:
  void close_fd();
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  bool in_place_ = false;
};

// The whole of `data` to `path`, atomically.
void write_file_atomically(const std::filesystem::path& path, std::string_view data);

// Whether `path` names an existing regular file (a complete earlier output that a cut-short one must not replace).
bool regular_file_exists(const std::filesystem::path& path);

}  // namespace glassbox
