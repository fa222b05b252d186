// Headless Chromium for the HTML page suites (test_trace_html.cpp, test_compare.cpp, test_serve.cpp): finding it,
// loading a local page offline, driving a live page over the DevTools protocol, and the console lines it logged.
// Tests needing it are skipped without it.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
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

// A page that keeps working after it loads (a served page streaming tokens): --dump-dom dumps at the load event
// and --virtual-time-budget does not wait for a streamed response body, so the test drives Chromium over the
// DevTools protocol on a pipe (--remote-debugging-pipe: commands on fd 3, replies on fd 4, each JSON ended by NUL)
// and waits in real time for a condition the page reaches. Chromium's stderr is kept for console_lines().
class LivePage {
 public:
  LivePage(const std::string& url, const std::filesystem::path& dir) : err_path_(dir / "err") {
    int to[2], from[2];
    if (::pipe(to) != 0 || ::pipe(from) != 0) throw std::runtime_error("LivePage: pipe failed");
    const std::string profile = "--user-data-dir=" + (dir / "profile").string(), bin = chromium();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("LivePage: fork failed");
    if (pid_ == 0) {
      const int null = ::open("/dev/null", O_RDWR);
      const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(err, 2);
      // fd 3 and 4 are the protocol's; the pipe ends may themselves sit on 3 or 4, so move them out of the way first.
      const int in = ::fcntl(to[0], F_DUPFD, 10), out = ::fcntl(from[1], F_DUPFD, 10);
      ::dup2(in, 3);
      ::dup2(out, 4);
      const char* argv[] = {bin.c_str(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update", "--disable-sync",
                            "--disable-extensions", "--enable-logging=stderr", "--v=0", "--remote-debugging-pipe",
                            profile.c_str(), url.c_str(), nullptr};
      ::execv(bin.c_str(), const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(to[0]);
    ::close(from[1]);
    to_ = to[1];
    from_ = from[0];
    ::signal(SIGPIPE, SIG_IGN);  // a browser that died answers EPIPE, reported by call()
    // The page given on the command line is the browser's first target: attach to it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (session_.empty()) {
      const auto targets = call("Target.getTargets", nlohmann::json::object());  // kept: a range-for over a temporary's member dangles
      for (const auto& t : targets["targetInfos"])
        if (t["type"] == "page")
          session_ = call("Target.attachToTarget", {{"targetId", t["targetId"]}, {"flatten", true}})["sessionId"];
      if (session_.empty()) {
        if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("LivePage: Chromium opened no page");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }
  LivePage(const LivePage&) = delete;
  LivePage& operator=(const LivePage&) = delete;
  ~LivePage() {
    try {
      send("Browser.close", nlohmann::json::object(), "");
    } catch (...) {
    }
    ::close(to_);
    bool closed = false;
    for (int i = 0; i < 100 && !closed; ++i) {  // 10 s for Chromium to close, then it is killed
      closed = ::waitpid(pid_, nullptr, WNOHANG) == pid_;
      if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!closed) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(from_);
  }

  // The value of a JavaScript expression in the page (Runtime.evaluate, returned by value).
  nlohmann::json evaluate(const std::string& expression) {
    const auto r = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}}, session_);
    if (r.contains("exceptionDetails")) throw std::runtime_error("LivePage: " + expression + " threw " + r["exceptionDetails"].dump());
    return r["result"].value("value", nlohmann::json());
  }
  // Polls `expression` until it is true; false after `limit` of real time.
  bool wait_for(const std::string& expression, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (evaluate(expression) == true) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::string html() { return evaluate("document.documentElement.outerHTML").get<std::string>(); }
  // The value a JavaScript promise resolves to (Runtime.evaluate with awaitPromise).
  nlohmann::json evaluate_promise(const std::string& expression) {
    const auto r = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}}, session_);
    if (r.contains("exceptionDetails")) throw std::runtime_error("LivePage: a promise threw " + r["exceptionDetails"].dump());
    return r["result"].value("value", nlohmann::json());
  }
  // Lays the page out as in a window of w × h CSS pixels (Emulation.setDeviceMetricsOverride): a projector's 1024×768.
  void set_viewport(int w, int h) {
    call("Emulation.setDeviceMetricsOverride", {{"width", w}, {"height", h}, {"deviceScaleFactor", 1}, {"mobile", false}}, session_);
  }
  // The viewport as the compositor drew it (Page.captureScreenshot), a base64 PNG.
  std::string screenshot_png_base64() {
    return call("Page.captureScreenshot", {{"format", "png"}}, session_)["data"].get<std::string>();
  }

 private:
  int send(const std::string& method, const nlohmann::json& params, const std::string& session) {
    nlohmann::json m = {{"id", next_id_}, {"method", method}, {"params", params}};
    if (!session.empty()) m["sessionId"] = session;
    const std::string text = m.dump() + '\0';
    for (std::size_t at = 0; at < text.size();) {
      const auto n = ::write(to_, text.data() + at, text.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error("LivePage: Chromium closed its pipe (see " + err_path_.string() + ")");
      at += static_cast<std::size_t>(n);
    }
    return next_id_++;
  }
  // One command and its reply; events arriving meanwhile are skipped. 60 s at most.
  nlohmann::json call(const std::string& method, const nlohmann::json& params, const std::string& session = "") {
    const int id = send(method, params, session);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      for (std::size_t end; (end = buf_.find('\0')) != std::string::npos;) {
        const auto reply = nlohmann::json::parse(buf_.substr(0, end));
        buf_.erase(0, end + 1);
        if (reply.value("id", -1) != id) continue;
        if (reply.contains("error")) throw std::runtime_error("LivePage: " + method + ": " + reply["error"].dump());
        return reply["result"];
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) throw std::runtime_error("LivePage: no answer to " + method + " within 60 s");
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[65536];
      const auto n = ::read(from_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error("LivePage: Chromium closed its pipe during " + method + " (see " + err_path_.string() + ")");
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  std::filesystem::path err_path_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1, next_id_ = 1;
  std::string buf_, session_;
};

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
