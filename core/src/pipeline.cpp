// Building sampler chains from user specs, and file digests for the trace header.
#include "glassbox/pipeline.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "glassbox/codec.hpp"
#include "glassbox/error.hpp"
#include "glassbox/model/mapped_file.hpp"
#include "glassbox/model.hpp"
#include "glassbox/os.hpp"

namespace glassbox {

// llama.cpp's order (truncate first, then reshape): top-k bounds the work, top-p and min-p trim
// the tail relative to the mass and to the best token, temperature 0.8 sharpens what is left,
// and the automatically appended "dist" draws. Documented in docs/samplers.md.
const char* const kDefaultSamplerChain = "top-k:40,top-p:0.95,min-p:0.05,temperature:0.8";

std::vector<std::unique_ptr<Sampler>> build_sampler_stages(const Registry& reg, std::vector<PluginSpec> specs,
                                                          std::vector<std::string>& warnings, const PluginContext& context) {
  // "default" (without a value) stands for the default chain wherever it appears.
  std::vector<PluginSpec> expanded;
  for (auto& s : specs) {
    if (s.name == "default" && s.params.empty()) {
      for (auto& d : parse_plugin_chain(kDefaultSamplerChain, "sampler")) expanded.push_back(std::move(d));
    } else {
      expanded.push_back(std::move(s));
    }
  }
  specs = std::move(expanded);
  // Validate every stage before creating any: errors name the first bad one.
  for (const auto& s : specs) reg.resolve(PluginKind::Sampler, s);
  std::vector<std::unique_ptr<Sampler>> stages;
  for (const auto& s : specs) stages.push_back(reg.make_sampler(s, context));
  std::string selector;
  for (const auto& st : stages) {
    if (!selector.empty())
      warnings.push_back("sampler stage '" + st->name() + "' comes after '" + selector +
                         "', which already chooses the token: it has no effect");
    if (st->selects() && selector.empty()) selector = st->name();
  }
  // The one place core names a stage: the default draw, when nothing in the chain selects.
  if (selector.empty()) stages.push_back(reg.make_sampler(PluginSpec{"dist", {}}, context));
  noop_stage_warnings(stages, warnings);
  return stages;
}

void noop_stage_warnings(const std::vector<std::unique_ptr<Sampler>>& stages, std::vector<std::string>& warnings) {
  for (const auto& s : stages)
    if (const std::string why = s->noop_reason(); !why.empty())
      warnings.push_back("sampler stage '" + s->name() + "' changes nothing: " + why);
}


std::string sha256_bytes(const void* data, std::size_t size) {
  return hex(sha256(data, size));
}

std::string sha256_file(const std::filesystem::path& path) {
  // Streamed through a fixed buffer: mapping the file a second time would count its pages twice in
  // the resident set of a process that has the model mapped already.
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open for hashing");
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) sha.update(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw InputError(path.string() + ": read error while hashing");
  return hex(sha.finish());
}

namespace {
constexpr const char* kDigestEntry = "glassbox.digest/1";

std::filesystem::path entry_path(const std::filesystem::path& dir, const FileStamp& s) {
  return dir / "digests" / (std::to_string(s.dev) + "-" + std::to_string(s.ino));
}

bool lower_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
}  // namespace

std::filesystem::path digest_cache_dir() {
  const char* own = std::getenv("GLASSBOX_CACHE_DIR");
  if (own && std::string(own) == "off") return {};
  if (own && *own) return own;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') return std::filesystem::path(xdg) / "glassbox";
  if (const char* home = std::getenv("HOME"); home && *home == '/') return std::filesystem::path(home) / ".cache" / "glassbox";
  return {};
}

namespace {
// The digest cache around `hash` (sha256_file_cached's rules). `mapped`, when given, is the stamp of
// the bytes `hash` reads: the file at `path` must still be that file for its entry to be used or written.
template <class Hash>
std::string cached_digest(const std::filesystem::path& path, const FileStamp* mapped, Hash&& hash) {
  const std::filesystem::path dir = digest_cache_dir();
  FileStamp before;
  if (dir.empty() || !stamp_of(path, before) || (mapped && !(*mapped == before))) return hash();
  const std::filesystem::path entry = entry_path(dir, before);
  {
    // "glassbox.digest/1 SIZE MTIME_NS CTIME_NS SHA256": anything else is no entry
    std::ifstream in(entry);
    std::string tag, digest, rest;
    FileStamp had = before;
    if (in >> tag >> had.size >> had.mtime_ns >> had.ctime_ns >> digest && !(in >> rest) && tag == kDigestEntry &&
        had == before && lower_hex64(digest))
      return digest;
  }
  const auto began_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  std::string digest = hash();
  if (digest.empty()) return digest;  // stopped
  FileStamp after;
  constexpr std::int64_t kTick = 2'000'000'000;  // well above any file system's timestamp granularity
  if (!stamp_of(path, after) || !(after == before) || std::max(before.mtime_ns, before.ctime_ns) > began_ns - kTick)
    return digest;
  // Written beside, then renamed over the entry: a reader never sees half an entry.
  std::error_code ec;
  std::filesystem::create_directories(entry.parent_path(), ec);
  if (ec) return digest;
  const std::filesystem::path tmp = entry.string() + ".tmp" + std::to_string(::getpid()) + "-" +
                                    std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kDigestEntry << ' ' << before.size << ' ' << before.mtime_ns << ' ' << before.ctime_ns << ' ' << digest << '\n';
    if (!out.flush()) {
      std::filesystem::remove(tmp, ec);
      return digest;
    }
  }
  std::filesystem::rename(tmp, entry, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  return digest;
}
}  // namespace

std::string sha256_file_cached(const std::filesystem::path& path) {
  return cached_digest(path, nullptr, [&] { return sha256_file(path); });
}

std::string sha256_mapped_cached(const MappedFile& file, const std::atomic<bool>* stop) {
  return cached_digest(file.path(), &file.stamp(), [&]() -> std::string {
    Sha256 sha;
    constexpr std::size_t kPiece = 4 << 20;  // how far a hash runs on after it was told to stop
    for (std::size_t at = 0; at < file.size(); at += kPiece) {
      if (stop && stop->load(std::memory_order_relaxed)) return {};
      sha.update(file.data() + at, std::min(kPiece, file.size() - at));
    }
    return hex(sha.finish());
  });
}

DigestThread::DigestThread(std::shared_ptr<const MappedFile> file)
    : stop_(std::make_shared<std::atomic<bool>>(false)), uncaught_(std::uncaught_exceptions()) {
  // Without threads (the web build) the digest is taken when it is first asked for.
  digest_ = std::async(os::kThreads ? std::launch::async : std::launch::deferred, [file = std::move(file), stop = stop_] {
              return sha256_mapped_cached(*file, stop.get());
            }).share();
}

DigestThread::~DigestThread() {
  if (std::uncaught_exceptions() > uncaught_) stop_->store(true);
}

}  // namespace glassbox
