// glassbox/os.hpp, the operating system calls in one place: file maps and stamps, temporary files, the
// binary's path, the interrupt mask and peak memory, each against what the system itself says.
#define BOOST_TEST_MODULE os
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "glassbox/error.hpp"
#include "glassbox/os.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
namespace os = glassbox::os;

BOOST_AUTO_TEST_CASE(a_map_holds_the_files_bytes_and_its_stamp) {
  const fs::path dir = gbtest::temp_dir("os-map");
  const std::string bytes("glassbox\0maps\nthis file", 23);
  gbtest::write_file(dir / "f.bin", bytes);
  const os::FileMap m = os::map_file(dir / "f.bin");
  BOOST_TEST_REQUIRE(m.size == bytes.size());
  BOOST_TEST(std::memcmp(m.data, bytes.data(), bytes.size()) == 0);
  glassbox::FileStamp s;
  BOOST_TEST_REQUIRE(os::file_stamp(dir / "f.bin", s));
  BOOST_TEST((s == m.stamp));
  BOOST_TEST(m.stamp.size == bytes.size());
  os::unmap_file(m);

  gbtest::write_file(dir / "empty", "");
  const os::FileMap e = os::map_file(dir / "empty");
  BOOST_TEST(e.size == 0u);
  BOOST_TEST(e.data == nullptr);
}

BOOST_AUTO_TEST_CASE(special_and_missing_files_are_refused_by_name) {
  const fs::path dir = gbtest::temp_dir("os-fifo");
  BOOST_TEST_REQUIRE(::mkfifo((dir / "pipe").c_str(), 0600) == 0);
  BOOST_CHECK_EXCEPTION(os::map_file(dir / "pipe"), glassbox::ModelError, [&](const glassbox::ModelError& e) {
    return std::string(e.what()) == (dir / "pipe").string() + ": not a regular file (expected a model file)";
  });
  BOOST_CHECK_THROW(os::map_file(dir / "missing"), glassbox::ModelError);
  glassbox::FileStamp s;
  BOOST_TEST(!os::file_stamp(dir / "pipe", s));
  BOOST_TEST(!os::file_stamp(dir / "missing", s));
}

BOOST_AUTO_TEST_CASE(a_temporary_is_a_new_close_on_exec_file) {
  const fs::path dir = gbtest::temp_dir("os-tmp");
  std::string a = (dir / "x.tmp-XXXXXX").string(), b = a;
  const int fa = os::create_temporary(a), fb = os::create_temporary(b);
  BOOST_TEST_REQUIRE(fa >= 0);
  BOOST_TEST_REQUIRE(fb >= 0);
  BOOST_TEST(a != b);
  BOOST_TEST(a.find("XXXXXX") == std::string::npos);
  BOOST_TEST(fs::is_regular_file(a));
  BOOST_TEST((::fcntl(fa, F_GETFD) & FD_CLOEXEC) != 0);
  ::close(fa);
  ::close(fb);
  std::string bad = (dir / "no-such-folder" / "x-XXXXXX").string();
  BOOST_TEST(os::create_temporary(bad) == -1);
}

BOOST_AUTO_TEST_CASE(the_binarys_path_is_this_test) {
#if defined(__linux__)
  BOOST_TEST(os::executable_path().filename() == "test_os");
#else
  BOOST_TEST_MESSAGE("executable_path: " << os::executable_path());
#endif
}

BOOST_AUTO_TEST_CASE(interrupts_are_held_back_while_blocked) {
  auto blocked = [](int sig) {
    sigset_t now;
    ::pthread_sigmask(SIG_SETMASK, nullptr, &now);
    return sigismember(&now, sig) == 1;
  };
  BOOST_TEST_REQUIRE(!blocked(SIGINT));
  {
    const os::InterruptsBlocked b;
    BOOST_TEST(blocked(SIGINT));
    BOOST_TEST(blocked(SIGTERM));
    BOOST_TEST(!blocked(SIGHUP));
    {
      const os::InterruptsBlocked all(true);
      BOOST_TEST(blocked(SIGHUP));
      BOOST_TEST(blocked(SIGQUIT));
    }
    BOOST_TEST(!blocked(SIGHUP));
  }
  BOOST_TEST(!blocked(SIGINT));
}

BOOST_AUTO_TEST_CASE(peak_memory_counts_what_was_touched) {
  const std::uint64_t before = os::peak_resident_bytes();
  BOOST_TEST(before > 0u);
  std::vector<char> touched(96u << 20);
  for (std::size_t i = 0; i < touched.size(); i += 4096) touched[i] = 1;
  BOOST_TEST(os::peak_resident_bytes() >= (96u << 20));
  BOOST_TEST(touched[4096] == 1);
}
