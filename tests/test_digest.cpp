// The model digest cache (sha256_file_cached, sha256_mapped_cached): a remembered digest is used only while
// the file's identity and stamps are unchanged; a changed, too-fresh or unreadable case is hashed again.
#define BOOST_TEST_MODULE digest_cache
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <stdexcept>
#include <thread>

#include "glassbox/model/mapped_file.hpp"
#include "glassbox/pipeline.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using namespace gbtest;

namespace {
// A cache folder of this test's own, and a file old enough to be remembered (its last change over 2 s ago).
struct CacheFixture {
  fs::path dir = temp_dir("digest-cache");
  fs::path file = fs::path(GLASSBOX_SOURCE_DIR) / "README.md";
  CacheFixture() {
    ::setenv("GLASSBOX_CACHE_DIR", dir.c_str(), 1);
    struct stat st {};
    BOOST_TEST_REQUIRE(::stat(file.c_str(), &st) == 0);
    const auto changed = std::chrono::system_clock::time_point(std::chrono::seconds(std::max(st.st_mtim.tv_sec, st.st_ctim.tv_sec)));
    if (std::chrono::system_clock::now() - changed < std::chrono::seconds(4)) std::this_thread::sleep_for(std::chrono::seconds(4));
  }
  // An entry for `f` as it is now, as if it were old enough to be remembered.
  void plant_entry(const fs::path& f, const std::string& digest) const {
    struct stat st {};
    BOOST_TEST_REQUIRE(::stat(f.c_str(), &st) == 0);
    fs::create_directories(dir / "digests");
    write_file(dir / "digests" / (std::to_string(st.st_dev) + "-" + std::to_string(st.st_ino)),
               "glassbox.digest/1 " + std::to_string(st.st_size) + " " +
                   std::to_string(st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec) + " " +
                   std::to_string(st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec) + " " + digest + "\n");
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    if (fs::exists(dir / "digests"))
      for (const auto& e : fs::directory_iterator(dir / "digests")) out.push_back(e.path());
    return out;
  }
};

void replace_digest(const fs::path& entry, const std::string& digest) {
  std::string text = read_file(entry);
  BOOST_TEST_REQUIRE(text.size() > 65u);
  text.replace(text.size() - 65, 64, digest);
  write_file(entry, text);
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(digest_cache, CacheFixture)

BOOST_AUTO_TEST_CASE(first_hash_writes_an_entry_that_the_next_one_uses) {
  const std::string want = glassbox::sha256_file(file);
  BOOST_TEST(glassbox::sha256_file_cached(file) == want);
  const auto e = entries();
  BOOST_TEST_REQUIRE(e.size() == 1u);
  BOOST_TEST(read_file(e[0]).rfind("glassbox.digest/1 ", 0) == 0u);
  // The next call reads the entry (shown by an entry whose digest was changed under it) ...
  const std::string planted(64, 'a');
  replace_digest(e[0], planted);
  BOOST_TEST(glassbox::sha256_file_cached(file) == planted);
  // ... and only while every stamp matches: another size, mtime or ctime is no entry.
  for (int field = 1; field <= 3; ++field) {
    std::istringstream in(read_file(e[0]));
    std::vector<std::string> w(5);
    for (auto& x : w) in >> x;
    w[field] = "1" + w[field];
    write_file(e[0], w[0] + " " + w[1] + " " + w[2] + " " + w[3] + " " + w[4] + "\n");
    BOOST_TEST(glassbox::sha256_file_cached(file) == want, "field " << field);
    replace_digest(e[0], planted);  // rewritten with the right stamps by the call above
    BOOST_TEST(glassbox::sha256_file_cached(file) == planted);
  }
}

BOOST_AUTO_TEST_CASE(a_damaged_entry_is_hashed_again) {
  const std::string want = glassbox::sha256_file(file);
  BOOST_TEST(glassbox::sha256_file_cached(file) == want);
  const fs::path e = entries().at(0);
  for (const std::string& bad : std::vector<std::string>{"", "garbage\n", "glassbox.digest/1 1 2\n", read_file(e) + "extra\n"}) {
    write_file(e, bad);
    BOOST_TEST(glassbox::sha256_file_cached(file) == want, "entry '" << bad << "'");
  }
  replace_digest(e, std::string(64, 'G'));  // not lowercase hex
  BOOST_TEST(glassbox::sha256_file_cached(file) == want);
}

BOOST_AUTO_TEST_CASE(a_changed_file_is_hashed_again_and_a_fresh_one_is_not_remembered) {
  const fs::path f = dir / "model.bin";
  write_file(f, "first contents");
  // Just written: hashed, but not remembered (a change within the same timestamp tick could go unseen).
  BOOST_TEST(glassbox::sha256_file_cached(f) == glassbox::sha256_file(f));
  BOOST_TEST(entries().empty());
  // An entry for it as it is now (planted, as if it were old enough) ...
  plant_entry(f, std::string(64, 'b'));
  BOOST_TEST(glassbox::sha256_file_cached(f) == std::string(64, 'b'));
  // ... is not used once the file has been written to.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  write_file(f, "other contents, longer");
  BOOST_TEST(glassbox::sha256_file_cached(f) == glassbox::sha256_file(f));
}

BOOST_AUTO_TEST_CASE(off_means_no_cache) {
  ::setenv("GLASSBOX_CACHE_DIR", "off", 1);
  BOOST_TEST(glassbox::digest_cache_dir().empty());
  BOOST_TEST(glassbox::sha256_file_cached(file) == glassbox::sha256_file(file));
  BOOST_TEST(entries().empty());
}

BOOST_AUTO_TEST_CASE(an_unwritable_cache_is_passed_over) {
  ::setenv("GLASSBOX_CACHE_DIR", (dir / "not-a-folder" / "x").c_str(), 1);
  write_file(dir / "not-a-folder", "a file where the cache folder should be");
  BOOST_TEST(glassbox::sha256_file_cached(file) == glassbox::sha256_file(file));
}

// A mapped file is hashed from its mapping, with the same digest and the same cache entry as a path.
BOOST_AUTO_TEST_CASE(a_mapping_hashes_like_its_file_and_shares_the_cache) {
  const std::string want = glassbox::sha256_file(file);
  {
    const glassbox::MappedFile m(file);
    BOOST_TEST(glassbox::sha256_mapped_cached(m) == want);
  }
  const auto e = entries();
  BOOST_TEST_REQUIRE(e.size() == 1u);
  replace_digest(e[0], std::string(64, 'c'));
  const glassbox::MappedFile m(file);
  BOOST_TEST(glassbox::sha256_mapped_cached(m) == std::string(64, 'c'));  // the entry the path's hash wrote
  BOOST_TEST(glassbox::sha256_file_cached(file) == std::string(64, 'c'));
  // A file larger than one 4 MiB piece of the hash, with a tail.
  const fs::path big = dir / "big.bin";
  std::string bytes(9 * (1 << 20) + 12345, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  write_file(big, bytes);
  const glassbox::MappedFile mb(big);
  BOOST_TEST(glassbox::sha256_mapped_cached(mb) == glassbox::sha256_file(big));
}

// The cache names a path; a mapping is of whatever file was there when it was made. Once another file
// has taken the path, the mapping's own bytes are hashed and no entry is read or written for it.
BOOST_AUTO_TEST_CASE(a_mapping_of_a_replaced_file_is_hashed_not_looked_up) {
  const fs::path f = dir / "model.bin";
  write_file(f, "the file that was mapped");
  const glassbox::MappedFile m(f);
  const std::string mapped_digest = glassbox::sha256_file(f);
  write_file(dir / "new.bin", "the file that took its place");
  fs::rename(dir / "new.bin", f);
  plant_entry(f, std::string(64, 'd'));
  BOOST_TEST(glassbox::sha256_mapped_cached(m) == mapped_digest);
  BOOST_TEST(glassbox::sha256_file_cached(f) == std::string(64, 'd'));  // the path's entry is the new file's
}

// Told to stop (the model failed its check), the hash gives up: no digest, no entry.
BOOST_AUTO_TEST_CASE(a_stopped_hash_returns_nothing_and_remembers_nothing) {
  const glassbox::MappedFile m(file);
  std::atomic<bool> stop{true};
  BOOST_TEST(glassbox::sha256_mapped_cached(m, &stop).empty());
  BOOST_TEST(entries().empty());
  stop = false;
  BOOST_TEST(glassbox::sha256_mapped_cached(m, &stop) == glassbox::sha256_file(file));
}

// DigestThread: the mapping's digest from a thread of its own; left by an exception, it stops the hash
// (a 128 MiB sparse file takes ~80 ms to hash, the stop comes microseconds after the start).
BOOST_AUTO_TEST_CASE(a_digest_thread_hashes_and_is_stopped_by_an_exception) {
  {
    glassbox::DigestThread t(std::make_shared<const glassbox::MappedFile>(file));
    BOOST_TEST(t.digest().get() == glassbox::sha256_file(file));
  }
  const fs::path big = dir / "sparse.bin";
  { std::ofstream(big).flush(); }
  fs::resize_file(big, std::uintmax_t(128) << 20);
  std::shared_future<std::string> digest;
  try {
    glassbox::DigestThread t(std::make_shared<const glassbox::MappedFile>(big));
    digest = t.digest();
    throw std::runtime_error("the model was refused");
  } catch (const std::runtime_error&) {
  }
  BOOST_TEST(digest.get().empty());
}

BOOST_AUTO_TEST_SUITE_END()
