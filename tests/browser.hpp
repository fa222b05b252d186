// Headless Chromium for the HTML page suites (test_trace_html.cpp, test_compare.cpp): finding it,
// loading a local page offline, and the console lines it logged. Tests needing it are skipped without it.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support.hpp"

namespace gbtest {

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// $GLASSBOX_CHROMIUM, else the first of the usual names on PATH; empty when none.
inline std::string chromium() {
  if (const char* c = std::getenv("GLASSBOX_CHROMIUM"); c && *c) return c;
  const char* path = std::getenv("PATH");
  if (!path) return "";
  for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
    std::string dirs = path;
    std::size_t start = 0;
    while (start <= dirs.size()) {
      const auto end = dirs.find(':', start);
      const std::filesystem::path p = std::filesystem::path(dirs.substr(start, end == std::string::npos ? std::string::npos : end - start)) / name;
      if (::access(p.c_str(), X_OK) == 0) return p.string();
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return "";
}

struct NeedsChromium {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    boost::test_tools::assertion_result r(!chromium().empty());
    if (!r) r.message() << "Chromium not found (GLASSBOX_DEPS_EXTRA=browser tools/install-deps.sh installs it, "
                           "or set GLASSBOX_CHROMIUM)";
    return r;
  }
};

struct Browser {
  int rc = -1;
  std::string out, err;
};

// Chromium headless, isolated and offline, on a local page; `mode` is "--dump-dom" or "--screenshot=FILE ...".
inline Browser browse(const std::filesystem::path& page, const std::string& mode, const std::string& fragment = "") {
  static int n = 0;
  const std::filesystem::path dir = temp_dir("chromium" + std::to_string(n++));
  const std::string cmd = "timeout 90 " + quote(chromium()) +
                          " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                          " --disable-background-networking --disable-component-update --disable-sync"
                          " --disable-extensions --hide-scrollbars --enable-logging=stderr --v=0"
                          " --user-data-dir=" + quote((dir / "profile").string()) + " " + mode + " " +
                          quote("file://" + std::filesystem::absolute(page).string() + fragment) + " >" + quote((dir / "out").string()) +
                          " 2>" + quote((dir / "err").string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  Browser b;
  b.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  b.out = read_file(dir / "out");
  b.err = read_file(dir / "err");
  std::filesystem::remove_all(dir);
  return b;
}

// Console messages and uncaught errors Chromium logged for the page (its own dbus/GPU noise is ignored).
inline std::vector<std::string> console_lines(const std::string& err) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < err.size()) {
    auto end = err.find('\n', start);
    if (end == std::string::npos) end = err.size();
    const std::string line = err.substr(start, end - start);
    if (line.find(":CONSOLE") != std::string::npos || line.find("Uncaught") != std::string::npos) out.push_back(line);
    start = end + 1;
  }
  return out;
}

}  // namespace gbtest
