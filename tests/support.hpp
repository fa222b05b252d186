// Shared test helpers: where the reference data lives, running the CLI, reading files.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

// GBTEST_ASAN: the library under test is built with AddressSanitizer. tests/CMakeLists.txt defines it in the
// sanitizer build (the test code itself is not instrumented there); otherwise GCC says so with
// __SANITIZE_ADDRESS__, clang with __has_feature.
#if defined(GBTEST_ASAN)
#elif defined(__SANITIZE_ADDRESS__)
#define GBTEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GBTEST_ASAN 1
#endif
#endif

namespace gbtest {

// Time bounds in tests are set for the normal build. Under ASan (and the sanitizer build's coverage counters,
// tools/sanitize.sh) code runs several times slower, so bounds are this much looser there: still far below
// what a quadratic algorithm would take.
#if defined(GBTEST_ASAN)
inline constexpr double kTimeScale = 10;
#else
inline constexpr double kTimeScale = 1;
#endif
// The alternatives of the grammar the signal tests walk (w0 | w1 | ...): each step's walk takes about half a
// second natively; under the sanitizers a tenth as many keep a step within the grammar's 5 s walk limit.
inline constexpr int kLongGrammarAlternatives = kTimeScale > 1 ? 24000 : 240000;

// ../shared beside the project root, or $GLASSBOX_TEST_DATA; nullopt when absent.
std::optional<std::filesystem::path> shared_dir();
std::filesystem::path shared(const std::string& rel);  // requires shared_dir()

// A precondition for tests that need ../shared: they are skipped, with the reason, without it.
struct NeedsShared {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const;
};

struct CliResult {
  int rc = -1;
  std::string out, err;
};
// Runs the built `glassbox` binary with `args` (shell-quoted here), optional stdin text and env; behind
// $GLASSBOX_TEST_LAUNCHER when set (a command line such as "qemu-aarch64 -L SYSROOT -cpu max": docs/reliability.md).
CliResult run_cli(const std::vector<std::string>& args, const std::string& env = "");

std::string read_file(const std::filesystem::path& p);
void write_file(const std::filesystem::path& p, const std::string& data);
// Figures a test measured, shown in a doc between two marker lines: "" when the doc holds `now`; with
// GLASSBOX_UPDATE_DOCS set the block is rewritten (and "" returned); else what is wrong, for the test to report.
std::string check_doc_block(const std::filesystem::path& doc, const std::string& begin, const std::string& end,
                            const std::string& now, const std::string& how_to_update);
std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& p);
// A step line's every logit, whichever way the trace wrote them (numbers, or base64 of float32s), as the
// typed reader gives them.
std::vector<double> step_logits(const nlohmann::json& step);
// n floats drawn uniformly from [lo, hi) by std::mt19937(seed): test data for the kernels.
std::vector<float> uniform_floats(std::size_t n, unsigned seed, float lo, float hi);
// A fresh temporary folder for one test.
std::filesystem::path temp_dir(const std::string& tag);

// The stories260K model + tok512 args.
std::vector<std::string> stories_args();

}  // namespace gbtest
