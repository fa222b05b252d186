// Helpers for the trace test suites (test_trace_*.cpp, test_golden.cpp): traces of stories260K made
// once per test program, and line-level edits of trace files.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support.hpp"

namespace gbtest {

// (temp_dir() folders are removed when the test program ends, unless their test failed: support.cpp.)

// Runs `glassbox run` on stories260K with `args` and `--trace` into a folder kept for the whole test
// program; the same key returns the same file without running again. Fails the test if the run fails.
inline std::filesystem::path stories_trace(const std::string& key, const std::vector<std::string>& args) {
  static const std::filesystem::path dir = temp_dir("traces");
  static std::map<std::string, std::filesystem::path> made;
  if (auto it = made.find(key); it != made.end()) return it->second;
  const auto path = dir / (key + ".jsonl");
  std::vector<std::string> a = {"run"};
  for (const auto& x : stories_args()) a.push_back(x);
  for (const auto& x : args) a.push_back(x);
  a.push_back("--trace");
  a.push_back(path.string());
  const auto r = run_cli(a);
  BOOST_TEST_REQUIRE(r.rc == 0, "glassbox run for trace '" << key << "' failed: " << r.err);
  made[key] = path;
  return path;
}

// A greedy run with every logit: the base most trace tests edit.
inline std::filesystem::path greedy_full_trace() {
  return stories_trace("greedy-full", {"--prompt", "Once upon a time", "--max-tokens", "12", "--sampler", "greedy",
                                       "--seed", "1", "--trace-level", "full"});
}
// A seeded sampling run, top-K lists only.
inline std::filesystem::path sampled_basic_trace() {
  return stories_trace("sampled-basic", {"--prompt", "Lily and Ben went to the park", "--max-tokens", "16", "--sampler",
                                         "top-k:40,temperature:0.8", "--seed", "7"});
}

inline std::vector<std::string> read_lines(const std::filesystem::path& p) {
  std::vector<std::string> out;
  std::ifstream f(p, std::ios::binary);
  std::string line;
  while (std::getline(f, line)) out.push_back(line);
  return out;
}

inline void write_lines(const std::filesystem::path& p, const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  write_file(p, s);
}

inline void write_jsonl(const std::filesystem::path& p, const std::vector<nlohmann::json>& lines) {
  std::vector<std::string> text;
  for (const auto& j : lines) text.push_back(j.dump());
  write_lines(p, text);
}

}  // namespace gbtest
