// What a class meets first: `run --json` for tools, paced streaming, piped prompts, greedy runs without a seed.
#define BOOST_TEST_MODULE classroom
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <sstream>

#include "support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using gbtest::run_cli;

namespace {

std::vector<json> parse_lines(const std::string& out) {
  std::vector<json> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line));  // throws: not one object per line
  return lines;
}

}  // namespace

// Every stdout line is one JSON object; the chosen tokens' logprobs, ids and top alternatives are the
// trace's for the same seed, and the summary's text is what the plain run prints.
BOOST_DATA_TEST_CASE(json_matches_trace, boost::unit_test::data::make({"top-k:40,temperature:0.8,dist", "greedy"}), chain) {
  const fs::path dir = gbtest::temp_dir("json");
  const std::vector<std::string> common = {"run", "--prompt", "The weather", "--max-tokens", "12", "--sampler", chain,
                                           "--seed", "7"};
  auto with = [&](std::vector<std::string> more) {
    auto a = common;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  const auto js = run_cli(with({"--json", "--top-logprobs", "3"}));
  BOOST_TEST_REQUIRE(js.rc == 0, js.err);
  const auto plain = run_cli(with({"--trace", (dir / "t.jsonl").string()}));
  BOOST_TEST_REQUIRE(plain.rc == 0, plain.err);
  std::vector<json> lines;
  BOOST_REQUIRE_NO_THROW(lines = parse_lines(js.out));
  const auto trace = gbtest::read_jsonl(dir / "t.jsonl");
  std::vector<json> steps;
  for (const auto& l : trace)
    if (l["type"] == "step") steps.push_back(l);
  BOOST_TEST_REQUIRE(lines.size() == steps.size() + 1, js.out);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const json& j = lines[i];
    BOOST_TEST(j["type"] == "token");
    BOOST_TEST(j["step"] == steps[i]["step"]);
    BOOST_TEST(j["id"] == steps[i]["token"]["id"]);
    BOOST_TEST(j["token"] == steps[i]["token"]["text"]);
    BOOST_TEST(j["logprob"].get<double>() == steps[i]["logprob"].get<double>(), "step " << i);  // the same float
    BOOST_TEST_REQUIRE(j["top_logprobs"].size() == 3u);
    for (std::size_t k = 0; k < 3; ++k) {
      const json& a = j["top_logprobs"][k];
      const json& b = steps[i]["top"][k];
      BOOST_TEST(a["id"] == b["id"]);
      std::string bytes;
      for (const auto& c : a["bytes"]) bytes += static_cast<char>(c.get<int>());
      BOOST_TEST(bytes == a["token"].get<std::string>());
      const double p = b["prob"].get<double>();
      if (p > 1e-6) BOOST_TEST(std::abs(a["logprob"].get<double>() - std::log(p)) < 1e-4, "step " << i << " #" << k);
    }
  }
  const json& s = lines.back();
  BOOST_TEST(s["type"] == "summary");
  BOOST_TEST(s["text"] == plain.out);
  BOOST_TEST(s["generated"] == trace.back()["generated"]);
  BOOST_TEST(s["stop_reason"] == trace.back()["stop_reason"]);
}

// --pace MS waits before each streamed token: n tokens at 80 ms take at least n * 80 ms; the text is unchanged.
BOOST_AUTO_TEST_CASE(pace_slows_streaming) {
  const std::vector<std::string> a = {"run", "--prompt", "The weather", "--max-tokens", "6", "--sampler", "greedy"};
  const auto fast = run_cli(a);
  auto json_args = a;
  json_args.push_back("--json");
  const int n = parse_lines(run_cli(json_args).out).back()["generated"].get<int>();
  BOOST_TEST_REQUIRE(n >= 3);
  auto paced_args = a;
  paced_args.insert(paced_args.end(), {"--pace", "80"});
  const auto t0 = std::chrono::steady_clock::now();
  const auto paced = run_cli(paced_args);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_REQUIRE(paced.rc == 0, paced.err);
  BOOST_TEST(paced.out == fast.out);
  BOOST_TEST(s >= 0.08 * n, s << " s for " << n << " tokens");
  auto tps = a;
  tps.insert(tps.end(), {"--pace-tps", "-1"});
  BOOST_TEST(run_cli(tps).rc == 2);
}

// A prompt piped on stdin is the prompt when --prompt is absent; --prompt wins over it.
BOOST_AUTO_TEST_CASE(prompt_from_stdin) {
  const fs::path dir = gbtest::temp_dir("stdin");
  const fs::path in = dir / "prompt.txt";
  gbtest::write_file(in, "The weather\n");
  const auto given = run_cli({"run", "--prompt", "The weather", "--max-tokens", "5", "--sampler", "greedy"});
  // run_cli feeds /dev/null; a shell redirection inside the env prefix cannot reach the command, so use sh.
  const std::string bin = GLASSBOX_BIN;
  const std::string cmd = "'" + bin + "' run --max-tokens 5 --sampler greedy --trace '" + (dir / "t.jsonl").string() +
                          "' < '" + in.string() + "' > '" + (dir / "out").string() + "' 2>/dev/null";
  BOOST_TEST_REQUIRE(std::system(cmd.c_str()) == 0);
  BOOST_TEST(gbtest::read_file(dir / "out") == given.out);
  BOOST_TEST(gbtest::read_jsonl(dir / "t.jsonl").front()["prompt"] == "The weather");
}

// A greedy run draws no random number: its seed changes nothing and is not announced; a sampled run's is.
BOOST_AUTO_TEST_CASE(greedy_run_announces_no_seed) {
  const auto g = run_cli({"run", "--prompt", "The weather", "--max-tokens", "3", "--sampler", "greedy"});
  BOOST_TEST_REQUIRE(g.rc == 0, g.err);
  BOOST_TEST(g.err.find("seed") == std::string::npos, g.err);
  const auto gj = run_cli({"run", "--prompt", "The weather", "--max-tokens", "3", "--sampler", "greedy", "--json"});
  BOOST_TEST(!parse_lines(gj.out).back().contains("seed"), gj.out);
  const auto d = run_cli({"run", "--prompt", "The weather", "--max-tokens", "3", "--sampler", "temperature:1.0,dist", "--seed", "5"});
  BOOST_TEST_REQUIRE(d.rc == 0, d.err);
  BOOST_TEST(d.err.find("seed 5") != std::string::npos, d.err);
}
