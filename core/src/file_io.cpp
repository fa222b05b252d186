// Atomic output files (temp + fsync + rename) and the input-kind checks of file_io.hpp.
#include "glassbox/file_io.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "glassbox/error.hpp"
#include "glassbox/os.hpp"

namespace fs = std::filesystem;

namespace glassbox {

namespace {

std::string err() { return std::strerror(errno); }

// The mode a plain creat() would give (0666 minus the umask): mkstemp's 0600 would surprise.
mode_t default_mode() {
  static const mode_t mode = [] {
    const mode_t m = ::umask(022);
    ::umask(m);
    return static_cast<mode_t>(0666 & ~m);
  }();
  return mode;
}

// The inputs of this process, by device and inode.
// The status-change time too: a deleted input's inode number may be reused by a new file, which must
// not inherit its protection.
struct InputRecord {
  dev_t dev;
  ino_t ino;
  struct timespec ctime;
  std::string name;
};
bool same(const InputRecord& r, const struct stat& st) {
  return r.dev == st.st_dev && r.ino == st.st_ino && r.ctime.tv_sec == st.st_ctim.tv_sec && r.ctime.tv_nsec == st.st_ctim.tv_nsec;
}
std::atomic<bool> g_recording{false};
std::mutex g_inputs_mutex;
std::vector<InputRecord>& inputs() {
  static std::vector<InputRecord> v;
  return v;
}

// The temporary files not yet renamed or removed, where a signal handler can read them: fixed slots of
// heap copies of their paths, claimed and released atomically (a handler never takes a lock).
constexpr int kTempSlots = 256;
std::atomic<char*> g_temp_slots[kTempSlots];

// Returns the claimed slot, or -1. Only the owner releases its slot, by index: another thread's
// unregister that read a slot's path while its owner freed it would read freed memory.
int register_temporary(const std::string& path) {
  char* copy = ::strdup(path.c_str());
  if (!copy) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    char* expected = nullptr;
    if (g_temp_slots[i].compare_exchange_strong(expected, copy)) return i;
  }
  std::free(copy);  // more than kTempSlots at once: this one is only removed by its owner
  return -1;
}

void unregister_temporary(int& slot) {
  if (slot < 0) return;
  std::free(g_temp_slots[slot].exchange(nullptr));
  slot = -1;
}

std::string kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return "not a regular file";
}

}  // namespace

void record_inputs(bool on) {
  g_recording = on;
  if (!on) {
    std::lock_guard lock(g_inputs_mutex);
    inputs().clear();
  }
}

void note_input(const fs::path& path) {
  if (!g_recording) return;
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  std::lock_guard lock(g_inputs_mutex);
  for (const auto& r : inputs())
    if (same(r, st)) return;
  inputs().push_back({st.st_dev, st.st_ino, st.st_ctim, path.string()});
}

std::optional<std::string> recorded_input(const fs::path& path) {
  struct stat st {};
  if (!g_recording || path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  std::lock_guard lock(g_inputs_mutex);
  for (const auto& r : inputs())
    if (same(r, st)) return r.name;
  return std::nullopt;
}

void remove_output_temporaries() noexcept {
  for (auto& slot : g_temp_slots)
    if (char* p = slot.load()) ::unlink(p);
}

std::optional<std::string> not_a_regular_file(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if (S_ISREG(st.st_mode)) {
    note_input(path);
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) return "is a folder, not a file";
  if (S_ISFIFO(st.st_mode)) return "is a FIFO, not a regular file";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "is a device, not a regular file";
  return "is not a regular file";
}

bool regular_file_exists(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void refuse_output_over_input(const std::string& output, const std::string& option,
                              const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (output.empty()) return;
  struct stat out {};
  if (::stat(output.c_str(), &out) != 0) return;  // a new file cannot be an input
  if (!S_ISREG(out.st_mode)) return;              // /dev/null, /dev/stdout: written in place, read by nobody
  for (const auto& [what, in] : inputs) {
    struct stat st {};
    if (in.empty() || ::stat(in.c_str(), &st) != 0) continue;
    if (st.st_dev == out.st_dev && st.st_ino == out.st_ino)
      throw ConfigError(option + " " + output + " is the same file as " + what + " " + in +
                        ": refusing to overwrite an input");
  }
}

namespace {
void refuse_input(const fs::path& target, const fs::path& named) {
  if (auto in = recorded_input(target))
    throw OutputError(named.string() + ": is the same file as the input " + *in + ": refusing to overwrite an input");
}
}  // namespace

namespace {
// The process's own descriptor a path names — /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N — or -1.
int own_descriptor(const fs::path& p) {
  const std::string s = p.lexically_normal().string();
  if (s == "/dev/stdout") return 1;
  if (s == "/dev/stderr") return 2;
  for (const char* dir : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::string d(dir);
    if (s.size() > d.size() && s.compare(0, d.size(), d) == 0 && s.find_first_not_of("0123456789", d.size()) == std::string::npos &&
        s.size() - d.size() <= 6)
      return std::stoi(s.substr(d.size()));
  }
  return -1;
}
}  // namespace

OutputFile::OutputFile(fs::path path, Live live) : path_(std::move(path)) {
  if (path_.empty()) throw OutputError("output file: empty path");
  struct stat st {};
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  // `--trace /dev/stderr 2>log`: the descriptor itself, written where the shell's redirection points (its
  // offset shared, as a shell's 2>&1 would), never a temporary beside /dev/stderr renamed over the link.
  if (const int own = own_descriptor(path_); own >= 0 && exists && S_ISREG(st.st_mode)) {
    refuse_input(path_, path_);
    fd_ = ::fcntl(own, F_DUPFD_CLOEXEC, 0);
    if (fd_ < 0) throw OutputError(path_.string() + ": cannot write: " + err());
    in_place_ = true;
    return;
  }
  if (exists && S_ISDIR(st.st_mode)) throw OutputError(path_.string() + ": is a folder, cannot write a file there");
  if (exists && !S_ISREG(st.st_mode)) {
    const bool stream = S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode);
    if (live == Live::Refused || !stream)
      throw OutputError(path_.string() + ": is " + kind_of(st.st_mode) +
                        ", not a regular file: refusing to replace it (outputs are regular files, written whole)");
    // A live stream (a trace someone reads as it is made): written in place, never renamed over.
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw OutputError(path_.string() + ": cannot write: " + err());
    in_place_ = true;
    return;
  }
  refuse_input(path_, path_);
  // A symbolic link to a file: the file is replaced and the link kept (a rename over the link's own name
  // would put a plain file where the link was).
  struct stat lst {};
  if (exists && ::lstat(path_.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    std::error_code ec;
    const fs::path resolved = fs::canonical(path_, ec);
    if (!ec) target_ = resolved;
  }
  if (target_.empty()) target_ = path_;
  const fs::path dir = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target_.filename().string() + ".tmp-XXXXXX")).string();
  // SIGINT/SIGTERM wait while the temporary is created and registered: a signal between the two
  // would find a file on disk that the cleanup handler does not know, and leave it behind.
  int made = 0;
  {
    const os::InterruptsBlocked blocked;
    fd_ = os::create_temporary(tmpl);
    made = errno;
    if (fd_ >= 0) {
      tmp_ = tmpl;
      temp_slot_ = register_temporary(tmp_.string());
    }
  }
  errno = made;
  if (fd_ < 0) throw OutputError(path_.string() + ": cannot write (creating a temporary file in " + dir.string() + "): " + err());
  ::fchmod(fd_, exists ? (st.st_mode & 07777) : default_mode());
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void OutputFile::discard() {
  close_fd();
  if (!tmp_.empty()) {
    ::unlink(tmp_.c_str());
    unregister_temporary(temp_slot_);
  }
  tmp_.clear();
}

void OutputFile::write(std::string_view data) {
  if (fd_ < 0) throw OutputError(path_.string() + ": write after the file was closed");
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    // EFBIG: a file size limit (SIGXFSZ is ignored by the CLI so that it arrives as this error).
    if (n <= 0) throw OutputError(path_.string() + ": write failed: " + (n < 0 ? err() : std::string("no progress")));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

void OutputFile::commit() { commit_as(target_.empty() ? path_ : target_); }

void OutputFile::commit_as(const fs::path& target) {
  if (in_place_) {
    close_fd();
    return;
  }
  if (fd_ < 0 || tmp_.empty()) throw OutputError(path_.string() + ": commit after the file was closed");
  if (::fsync(fd_) != 0) throw OutputError(path_.string() + ": cannot flush to disk: " + err());
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw OutputError(path_.string() + ": write failed on close: " + err());
  // Again now: an input read since the file was opened (a derived name, a model loaded later) counts.
  refuse_input(target, target);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw OutputError(target.string() + ": is " + (S_ISDIR(st.st_mode) ? std::string("a folder") : kind_of(st.st_mode)) +
                      ", not a regular file: refusing to replace it");
  if (check_) check_(tmp_);
  if (::rename(tmp_.c_str(), target.c_str()) != 0) throw OutputError(target.string() + ": cannot replace: " + err());
  unregister_temporary(temp_slot_);
  tmp_.clear();
}

void write_file_atomically(const fs::path& path, std::string_view data) {
  OutputFile f(path);
  f.write(data);
  f.commit();
}

}  // namespace glassbox
