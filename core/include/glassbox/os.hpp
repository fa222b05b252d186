// The operating system calls glassbox makes, in one place: read-only file maps, file stamps, temporary
// files, the running binary's path, interrupt signals and peak memory. core/src/platform/*_posix.cpp
// implements them for POSIX systems (Linux's extras where it has them); a port to another system is a new
// file per group there, not edits across the code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "glassbox/model/mapped_file.hpp"

namespace glassbox::os {

// --- files (platform/files_posix.cpp) ---

// A whole regular file mapped read-only (or, where maps are not supported, read into memory), with its
// stamp as of the open descriptor. Throws ModelError naming the file: missing, not a regular file (a FIFO
// is refused before it is opened: open() would wait for a writer), or not mappable.
struct FileMap {
  const std::byte* data = nullptr;  // null when the file is empty
  std::size_t size = 0;
  FileStamp stamp;
};
FileMap map_file(const std::filesystem::path& path);
void unmap_file(const FileMap& map);

// The stamp of the regular file at `path`; false when there is none (missing, or not a regular file).
bool file_stamp(const std::filesystem::path& path, FileStamp& out);

// Creates and opens (write-only, close-on-exec) a new file from `tmpl`, whose last six characters are
// "XXXXXX" and are replaced by the name chosen; returns the descriptor, or -1 with errno set.
int create_temporary(std::string& tmpl);

// The path of the running binary; empty where the system does not say. WebAssembly: under node the
// emscripten script's (its __filename), in a page /glassbox/bin/glassbox (the page's files are laid out under /glassbox).
std::filesystem::path executable_path();

// --- signals (platform/signals_posix.cpp) ---

// Calls `handler` on SIGINT and SIGTERM, restarting the reads and writes they interrupt.
void handle_interrupts(void (*handler)(int));
// Inside a handler: the signal's default action from now on, and the signal raised again (it ends the process).
void raise_with_default_action(int sig);
// SIGINT, SIGTERM (and with `all_stops`, SIGHUP and SIGQUIT) held back on this thread while it lives (and
// on threads started meanwhile, which inherit the mask); delivered when it ends.
class InterruptsBlocked {
 public:
  explicit InterruptsBlocked(bool all_stops = false);
  ~InterruptsBlocked();
  InterruptsBlocked(const InterruptsBlocked&) = delete;
  InterruptsBlocked& operator=(const InterruptsBlocked&) = delete;

 private:
  alignas(8) unsigned char previous_[128];  // the previous mask (a sigset_t, kept opaque here)
};

// --- threads ---

// Whether this build can start threads: false in WebAssembly built without -pthread (the web build,
// docs/web.md), where the trace writer and the model's digest run on the calling thread instead.
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
inline constexpr bool kThreads = false;
#else
inline constexpr bool kThreads = true;
#endif

// --- memory (platform/memory_posix.cpp) ---

// The most memory this process has had resident, in bytes; 0 where the system does not say.
std::uint64_t peak_resident_bytes();

}  // namespace glassbox::os
