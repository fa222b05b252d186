// Shared test helpers: reference-data lookup, running the CLI, file utilities.
#include "support.hpp"

#include "glassbox/traces/writer.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <random>
#include <sstream>

namespace fs = std::filesystem;

namespace gbtest {

std::optional<fs::path> shared_dir() {
  fs::path d = std::getenv("GLASSBOX_TEST_DATA") ? fs::path(std::getenv("GLASSBOX_TEST_DATA"))
                                                  : fs::path(GLASSBOX_SOURCE_DIR) / ".." / "shared";
  if (fs::exists(d / "models" / "stories260K.bin")) return d.lexically_normal();
  return std::nullopt;
}

fs::path shared(const std::string& rel) { return *shared_dir() / rel; }

boost::test_tools::assertion_result NeedsShared::operator()(boost::unit_test::test_unit_id) const {
  boost::test_tools::assertion_result r(shared_dir().has_value());
  if (!r) r.message() << "reference data not found (../shared or $GLASSBOX_TEST_DATA)";
  return r;
}

namespace {
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& data) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << data;
}

std::string check_doc_block(const fs::path& doc, const std::string& begin, const std::string& end, const std::string& now,
                            const std::string& how_to_update) {
  std::string text = read_file(doc);
  const auto b = text.find(begin), e = text.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) return "markers missing in " + doc.string();
  const std::size_t at = b + begin.size();
  if (std::getenv("GLASSBOX_UPDATE_DOCS")) {
    text.replace(at, e - at, now);
    write_file(doc, text);
    return "";
  }
  if (text.compare(at, e - at, now) == 0) return "";
  return doc.string() + " is stale; " + how_to_update + " rewrites it. Now:\n" + now;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream f(p);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<float> uniform_floats(std::size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

std::vector<double> step_logits(const nlohmann::json& step) {
  const auto& l = step.at("logits");
  std::vector<double> out;
  if (l.is_string()) {
    const std::string& text = l.get_ref<const std::string&>();
    std::vector<float> f;
    const std::size_t n = text.size() / 4 * 3 / 4;  // (the padding's bytes are under one float)
    if (!glassbox::traces::read_float32_base64(text, n, f)) throw std::runtime_error("step.logits: not base64 float32s");
    for (float x : f) out.push_back(glassbox::traces::json_float(x));
  } else {
    for (const auto& x : l) out.push_back(x.get<double>());
  }
  return out;
}

namespace {

// The temporary folders temp_dir made, each with the test case that made it; removed when the executable's
// tests end, except those of a test case that failed, which stay for a look and are listed on stderr
// (GLASSBOX_KEEP_TEST_DIRS or GLASSBOX_KEEP_TEST_FILES keep them all).
struct TempDirs : boost::unit_test::test_observer {
  std::mutex m;
  std::vector<std::pair<fs::path, boost::unit_test::test_unit_id>> dirs;
  std::set<boost::unit_test::test_unit_id> failed;
  void fail() {
    std::lock_guard lock(m);
    failed.insert(boost::unit_test::framework::current_test_case_id());
  }
  void assertion_result(boost::unit_test::assertion_result r) override {
    if (r == boost::unit_test::AR_FAILED) fail();
  }
  void exception_caught(const boost::execution_exception&) override { fail(); }
  void test_unit_aborted(const boost::unit_test::test_unit&) override { fail(); }
  int priority() override { return 1000; }
};
TempDirs& temp_dirs() {
  static TempDirs t;
  return t;
}

struct TempDirCleanup {
  TempDirCleanup() { boost::unit_test::framework::register_observer(temp_dirs()); }
  ~TempDirCleanup() {
    TempDirs& t = temp_dirs();
    boost::unit_test::framework::deregister_observer(t);
    std::vector<fs::path> kept;
    std::lock_guard lock(t.m);
    for (const auto& [dir, test] : t.dirs) {
      std::error_code ec;
      if (t.failed.count(test) || std::getenv("GLASSBOX_KEEP_TEST_DIRS") || std::getenv("GLASSBOX_KEEP_TEST_FILES")) kept.push_back(dir);
      else fs::remove_all(dir, ec);
    }
    if (!kept.empty()) {
      std::cerr << "gbtest: kept " << kept.size() << " temporary folder(s) of failed tests (or GLASSBOX_KEEP_TEST_DIRS):\n";
      for (const auto& d : kept) std::cerr << "  " << d.string() << "\n";
    }
  }
};

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(TempDirCleanup);

fs::path temp_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("glassbox-test-" + std::to_string(::getpid()) + "-" + tag);
  fs::remove_all(d);
  fs::create_directories(d);
  TempDirs& t = temp_dirs();
  std::lock_guard lock(t.m);
  boost::unit_test::test_unit_id test = boost::unit_test::INV_TEST_UNIT_ID;
  try {
    test = boost::unit_test::framework::current_test_case_id();
  } catch (...) {  // (made outside a test case: removed with the rest)
  }
  t.dirs.emplace_back(d, test);
  return d;
}

CliResult run_cli(const std::vector<std::string>& args, const std::string& env) {
  static int counter = 0;
  const fs::path dir = temp_dir("cli" + std::to_string(counter++));
  // GLASSBOX_TEST_LAUNCHER, a command line put before the binary: an arm64 test build runs its arm64 CLI
  // under qemu-user on an x86-64 machine without binfmt (tools/cross-arm64.sh --test sets it).
  const char* launcher = std::getenv("GLASSBOX_TEST_LAUNCHER");
  std::string cmd = env + (env.empty() ? "" : " ") + (launcher && *launcher ? std::string(launcher) + " " : "") + quote(GLASSBOX_BIN);
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " </dev/null >" + quote((dir / "out").string()) + " 2>" + quote((dir / "err").string());
  // A hung command must fail the test, not the CI run.
  cmd = "timeout 120 sh -c " + quote(cmd);
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(dir / "out");
  r.err = read_file(dir / "err");
  fs::remove_all(dir);
  return r;
}

std::vector<std::string> stories_args() {
  return {"--model", shared("models/stories260K.bin").string(), "--tokenizer", shared("models/tok512.bin").string()};
}

}  // namespace gbtest
