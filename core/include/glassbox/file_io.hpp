// Files glassbox writes (atomically: a temporary file in the same folder, fsync, rename) and the checks on
// files it reads (regular files only, never one of its own outputs). docs/reliability.md says why.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace glassbox {

// Why `path` must not be opened as an input (a FIFO or device would block or never end; a folder),
// or nullopt when it is a regular file or does not exist (opening it then fails with its own message).
// Every input is checked here before it is opened, so this is also where the process learns its inputs:
// a regular file is recorded (note_input) and no OutputFile will replace it.
std::optional<std::string> not_a_regular_file(const std::filesystem::path& path);

// Whether this process records its inputs (off by default; the CLI turns it on, since one command is one
// process; a long-lived library user that reads and rewrites its own files leaves it off). Off clears them.
void record_inputs(bool on);
// Records `path` (when recording, and it is an existing file; by device, inode and status-change time, so
// links and symlinks count and a reused inode does not) as an input of this process: from now on an
// OutputFile naming it, under any name, is refused.
void note_input(const std::filesystem::path& path);
// The input (as it was named) that `path` is, or nullopt.
std::optional<std::string> recorded_input(const std::filesystem::path& path);

// Removes every temporary file of an OutputFile not yet committed or discarded. Async-signal-safe: the
// CLI's SIGINT/SIGTERM handler calls it before the process dies.
void remove_output_temporaries() noexcept;

// Throws ConfigError when `output` (given with `option`, e.g. "--trace") is the same file (device and
// inode) as one of `inputs` ({what, path}, e.g. {"--model", "m.bin"}): writing it would destroy the input.
void refuse_output_over_input(const std::string& output, const std::string& option,
                              const std::vector<std::pair<std::string, std::string>>& inputs);

// One output file: every file a glassbox command writes goes through this class, which is the one rule
// for outputs (docs/reliability.md). Refused, as an OutputError naming the path: a folder; a FIFO or
// device (unless `live`, below); a path that is, or resolves to, an input of this process (note_input),
// checked when it is opened and again just before the rename (an input read later counts too). Writes
// go to a fresh temporary file beside `path` (so concurrent writers never share bytes); commit() makes
// it durable (fsync) and renames it over `path` in one step. Destroyed without commit(), the temporary
// file is removed and `path` is untouched; a signal that ends the process removes it too
// (remove_output_temporaries).
// Live::Allowed is for a stream someone may read as it is made (`run --trace /dev/stdout` or a FIFO
// a viewer reads): a device or FIFO is then written in place. The process's own descriptors
// (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N) open on a regular file (a shell's 2>log) are
// written in place through a copy of the descriptor, in either mode; a symbolic link to a regular file
// has the file it names replaced, the link kept.
// Errors (cannot create, disk full, file size limit) are OutputErrors naming the path.
class OutputFile {
 public:
  enum class Live { Refused, Allowed };
  explicit OutputFile(std::filesystem::path path, Live live = Live::Refused);
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
  // Run on the complete temporary file just before it is renamed into place (e.g. "the trace
  // validates"); what it throws abandons the output and leaves `path` as it was.
  void check_before_commit(std::function<void(const std::filesystem::path& tmp)> check) { check_ = std::move(check); }

 private:
  void close_fd();
  std::filesystem::path path_, tmp_;
  std::filesystem::path target_;  // what the rename replaces: path_, or the file a symbolic link path_ names
  std::function<void(const std::filesystem::path&)> check_;
  int fd_ = -1;
  int temp_slot_ = -1;  // this file's slot in the signal handler's list of temporaries (-1: none)
  bool in_place_ = false;
};

// The whole of `data` to `path`, atomically, by OutputFile's rule.
void write_file_atomically(const std::filesystem::path& path, std::string_view data);

// Whether `path` names an existing regular file (a complete earlier output that a cut-short one must not replace).
bool regular_file_exists(const std::filesystem::path& path);

}  // namespace glassbox
