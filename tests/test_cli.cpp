// `glassbox run/tokenize/plugins` end to end: llama2.c's greedy text and logits, traces, and clear errors.
#define BOOST_TEST_MODULE cli
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "glassbox/plugin.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;
using gbtest::run_cli;

namespace {

std::vector<json> golden() {
  if (!gbtest::shared_dir()) return {};
  return gbtest::read_jsonl(gbtest::shared("golden/llama2c-stories260K-greedy.jsonl"));
}

std::vector<std::string> args(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// A run that must fail: exit 2, and stderr's error is one line containing `part`.
void expect_error(const gbtest::CliResult& r, const std::string& part) {
  BOOST_TEST(r.rc == 2, "exit code " << r.rc << "; stderr: " << r.err);
  std::vector<std::string> errors;
  std::string line;
  std::istringstream in(r.err);
  while (std::getline(in, line))
    if (line.rfind("glassbox: error:", 0) == 0) errors.push_back(line);
  BOOST_TEST_REQUIRE(errors.size() == 1u, "one error line expected; stderr: " << r.err);
  BOOST_TEST(errors[0].find(part) != std::string::npos, "'" << part << "' not in: " << errors[0]);
}

const fs::path kTestPlugins = GLASSBOX_TEST_PLUGIN_DIR;

}  // namespace

BOOST_TEST_DONT_PRINT_LOG_VALUE(std::vector<std::string>)

BOOST_AUTO_TEST_SUITE(stories260K, *boost::unit_test::precondition(gbtest::NeedsShared()))

// stdout is exactly llama2.c's greedy continuation; every traced step's logits match its logits.
BOOST_DATA_TEST_CASE(greedy_run_matches_llama2c, bdata::xrange(4), i) {
  const auto g = golden().at(i);
  const int steps = static_cast<int>(g["steps"].size()), n_prompt = static_cast<int>(g["prompt_ids"].size());
  const fs::path dir = gbtest::temp_dir("golden" + std::to_string(i));
  const fs::path trace = dir / "t.jsonl";
  auto r = run_cli(args({"run"}, args(gbtest::stories_args(),
      {"--prompt", g["prompt"], "--max-tokens", std::to_string(steps - n_prompt + 1), "--sampler", "greedy",
       "--trace", trace.string(), "--trace-level", "full"})));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string want = g["greedy_continuation"];
  BOOST_TEST(r.out == want + "\n");  // stdout ends its line

  const auto lines = gbtest::read_jsonl(trace);
  BOOST_TEST_REQUIRE(lines.size() >= 3u);
  BOOST_TEST(lines.front()["type"] == "header");
  BOOST_TEST(lines.front()["schema"] == "glassbox.trace/2");  // the version this glassbox writes (trace-format.md)
  BOOST_TEST(lines.front()["prompt_ids"] == g["prompt_ids"]);
  BOOST_TEST(lines.back()["type"] == "summary");
  double worst = 0;
  int compared = 0;
  for (const auto& l : lines) {
    if (l["type"] != "step") continue;
    const int pos = l["pos"];
    const auto& gs = g["steps"][pos];
    BOOST_TEST(l["token"]["id"] == gs["next"], "token at pos " << pos);
    BOOST_TEST(l["phase"] == (compared == 0 ? "prefill" : "decode"));
    const auto ours = gbtest::step_logits(l), theirs = gbtest::step_logits(gs);
    BOOST_TEST_REQUIRE(ours.size() == theirs.size());
    for (std::size_t k = 0; k < theirs.size(); ++k) worst = std::max(worst, std::abs(ours[k] - theirs[k]));
    ++compared;
  }
  BOOST_TEST(compared == steps - n_prompt + 1);
  BOOST_TEST_MESSAGE("max |Δlogit| over " << compared << " steps: " << worst);
  BOOST_TEST(worst <= 1e-4);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(trace_steps_are_consistent) {
  const fs::path dir = gbtest::temp_dir("trace");
  const fs::path trace = dir / "t.jsonl";
  auto r = run_cli(args({"run"}, args(gbtest::stories_args(), {"--prompt", "The cat", "--max-tokens", "5", "--sampler", "greedy", "--trace", trace.string()})));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto lines = gbtest::read_jsonl(trace);
  BOOST_TEST_REQUIRE(lines.size() == 7u);  // header, prefill, 4 decode steps, summary
  const auto& h = lines[0];
  BOOST_TEST(h["model"]["sha256"] == "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696");
  BOOST_TEST(h["plugins"]["attention"]["name"] == "kv-cache");
  BOOST_TEST(h["plugins"]["sampler"][0]["name"] == "greedy");
  std::string text;
  for (int s = 1; s <= 5; ++s) {
    const auto& st = lines[s];
    BOOST_TEST(st["step"] == s - 1);
    BOOST_TEST(!st.contains("logits"));  // basic level
    // prob is the raw softmax of the chosen token; under greedy it is the top entry.
    BOOST_TEST(st["top"][0]["id"] == st["token"]["id"]);
    BOOST_TEST(st["prob"].get<double>() == st["top"][0]["prob"].get<double>());
    BOOST_TEST(std::exp(st["logprob"].get<double>()) == st["prob"].get<double>(), boost::test_tools::tolerance(1e-4));
    BOOST_TEST(st["kv"]["tokens"] == st["pos"].get<int>() + 1);
    BOOST_TEST(st["kv"]["capacity"] == 512);
    text += st["token"]["text"].get<std::string>();
  }
  BOOST_TEST(lines[1]["input_ids"].size() == h["prompt_ids"].size());
  BOOST_TEST(text + "\n" == r.out);
  BOOST_TEST(lines[6]["generated"] == 5);
  BOOST_TEST(lines[6]["stop_reason"] == "max_tokens");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(trace_top_sets_the_candidates_listed) {
  const fs::path dir = gbtest::temp_dir("top");
  auto r = run_cli(args({"run"}, args(gbtest::stories_args(), {"--max-tokens", "2", "--sampler", "top-k:40,dist", "--seed", "1",
                                                               "--trace", (dir / "t.jsonl").string(), "--trace-top", "3"})));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  for (const auto& l : gbtest::read_jsonl(dir / "t.jsonl"))
    if (l["type"] == "step") {
      BOOST_TEST(l["top"].size() == 3u);
      for (const auto& st : l["stages"]) BOOST_TEST(st["top"].size() == 3u);
    }
  expect_error(run_cli(args({"run"}, args(gbtest::stories_args(), {"--trace-top", "0"}))), "--trace-top");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(yaml_config_sets_options_and_the_command_line_wins) {
  const fs::path dir = gbtest::temp_dir("yaml");
  gbtest::write_file(dir / "c.yaml",
                     "model: " + gbtest::shared("models/stories260K.bin").string() + "\n" +
                     "tokenizer: " + gbtest::shared("models/tok512.bin").string() + "\n" +
                     "prompt: Once upon a time\nmax_tokens: 3\nsampler: [greedy]\nattention: {name: kv-cache, capacity: 64}\n");
  auto a = run_cli({"run", "--config", (dir / "c.yaml").string()});
  BOOST_TEST_REQUIRE(a.rc == 0, a.err);
  BOOST_TEST(a.out == ", there was\n");
  auto b = run_cli({"run", "--config", (dir / "c.yaml").string(), "--max-tokens", "1", "--echo"});
  BOOST_TEST(b.out == "Once upon a time,\n");
  gbtest::write_file(dir / "bad.yaml", "modle: x\n");
  expect_error(run_cli({"run", "--config", (dir / "bad.yaml").string()}), "modle: unknown option");
  fs::remove_all(dir);
}

// ---- Bad input: one clear line naming the file or value, exit code 2 ----

BOOST_AUTO_TEST_CASE(missing_tokenizer_file) {
  expect_error(run_cli({"run", "--model", gbtest::shared("models/stories260K.bin").string(), "--tokenizer", "/nonexistent/tok.bin"}),
               "/nonexistent/tok.bin: cannot open tokenizer file");
}

BOOST_AUTO_TEST_CASE(tokenizer_vocabulary_disagrees_with_model) {
  expect_error(run_cli({"run", "--model", gbtest::shared("models/stories260K.bin").string(), "--tokenizer",
                        gbtest::shared("models/tokenizer.bin").string(), "--prompt", "hi"}),
               "has 32000 tokens but model");
}

BOOST_AUTO_TEST_CASE(unknown_plugin_and_parameter) {
  expect_error(run_cli(args({"run"}, args(gbtest::stories_args(), {"--sampler", "nucleus"}))), "unknown sampler 'nucleus'; available:");
  expect_error(run_cli(args({"run"}, args(gbtest::stories_args(), {"--attention", "flash"}))), "unknown attention 'flash'; available: kv-cache, paged, recompute, sliding-window");
  expect_error(run_cli(args({"run"}, args(gbtest::stories_args(), {"--attention", "kv-cache:big"}))), "'capacity' = 'big' is not an integer");
  expect_error(run_cli(args({"run"}, args(gbtest::stories_args(), {"--sampler", "greedy:2"}))), "sampler 'greedy' takes no value");
  expect_error(run_cli(args({"run"}, args(gbtest::stories_args(), {"--trace-level", "verbose"}))), "trace level 'verbose'");
  expect_error(run_cli(args({"run"}, args(gbtest::stories_args(), {"--max-tokens", "-4"}))), "--max-tokens = -4");
}

BOOST_AUTO_TEST_CASE(module_built_for_another_abi) {
  auto r = run_cli(args({"run"}, args(gbtest::stories_args(), {"--sampler", "bad-abi"})),
                   "GLASSBOX_PLUGIN_PATH=" + (kTestPlugins / "bad_abi").string());
  expect_error(r, "unknown sampler 'bad-abi'");
  BOOST_TEST(r.err.find("bad_abi.so: ABI version 999, this glassbox expects " + std::to_string(GLASSBOX_ABI_VERSION)) != std::string::npos, r.err);
  // `glassbox plugins` lists the rejection and still lists the good modules.
  auto p = run_cli({"plugins", "--plugin-path", (kTestPlugins / "bad_abi").string()});
  BOOST_TEST(p.rc == 0);
  BOOST_TEST(p.out.find("rejected modules:") != std::string::npos, p.out);
  BOOST_TEST(p.out.find("sampler greedy") != std::string::npos, p.out);
}

// glassbox chat: every turn answered; when the history outgrows the context the oldest exchange
// is dropped (one notice line on stderr) and the conversation goes on.
BOOST_AUTO_TEST_CASE(chat_prunes_the_oldest_turns_to_fit) {
  const fs::path dir = gbtest::temp_dir("chat");
  gbtest::write_file(dir / "turns.txt", "Once upon a time there was a cat.\nWhat did the cat do?\nAnd then?\nThe end?\n");
  auto r = run_cli(args({"chat"}, args(gbtest::stories_args(), {"--input", (dir / "turns.txt").string(), "--sampler", "greedy",
                                                                   "--max-tokens", "24", "--context", "80", "--system", "Stories."})));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  std::size_t replies = 0;
  for (char c : r.out) replies += c == '\n';
  BOOST_TEST(replies >= 4u, r.out);  // one line at least per reply (a reply may hold newlines)
  BOOST_TEST(r.err.find("glassbox: chat: dropped the oldest exchange") != std::string::npos, r.err);
}

// glassbox chat --trace FILE: one valid trace per turn (FILE-turnN); every turn that pruned starts
// with a prune-turns context line, stderr has its notice, and --system opens every turn's prompt.
BOOST_AUTO_TEST_CASE(chat_trace_records_each_turn_and_each_prune) {
  const fs::path dir = gbtest::temp_dir("chattrace");
  gbtest::write_file(dir / "turns.txt", "Once upon a time there was a cat.\nWhat did the cat do?\nAnd then?\nThe end?\n");
  auto r = run_cli(args({"chat"}, args(gbtest::stories_args(), {"--input", (dir / "turns.txt").string(), "--sampler", "greedy",
                                                                   "--max-tokens", "24", "--context", "80", "--system", "Stories.",
                                                                   "--trace", (dir / "chat.jsonl").string()})));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  std::size_t notices = 0;
  for (std::size_t at = 0; (at = r.err.find("glassbox: chat: dropped the oldest", at)) != std::string::npos; ++at) ++notices;
  int prunes = 0, dropped_turns = 0;
  for (int turn = 1; turn <= 4; ++turn) {
    const fs::path f = dir / ("chat-turn" + std::to_string(turn) + ".jsonl");
    BOOST_TEST_REQUIRE(fs::exists(f), f);
    auto v = run_cli({"trace", "validate", f.string()});
    BOOST_TEST(v.rc == 0, f << ": " << v.out << v.err);
    const auto lines = gbtest::read_jsonl(f);
    BOOST_TEST_REQUIRE(lines.size() >= 3u);
    BOOST_TEST(lines[0]["prompt"].get<std::string>().rfind("System: Stories.\n", 0) == 0u, lines[0]["prompt"].dump());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (lines[i]["type"] != "context" || lines[i]["policy"] != "prune-turns") continue;
      ++prunes;
      BOOST_TEST(i == 1u);  // right after the header, before the prefill
      BOOST_TEST(lines[i]["kept"] == lines[0]["prompt_ids"].size());
      BOOST_TEST(lines[i]["dropped"]["text"].get<std::string>().find("User:") != std::string::npos);
      BOOST_TEST(lines[i]["dropped"]["text"].get<std::string>().find("Stories.") == std::string::npos);
      dropped_turns += lines[i]["turns"].get<int>();
    }
  }
  BOOST_TEST(!fs::exists(dir / "chat-turn5.jsonl"));
  BOOST_TEST(prunes >= 1);
  BOOST_TEST(notices >= static_cast<std::size_t>(prunes), r.err);  // one notice per exchange dropped
  BOOST_TEST(static_cast<std::size_t>(dropped_turns) == 2 * notices);  // each notice is one exchange
}

BOOST_AUTO_TEST_CASE(prompt_longer_than_the_context) {
  std::string prompt;
  for (int i = 0; i < 600; ++i) prompt += "cat ";
  expect_error(run_cli(args({"run"}, args(gbtest::stories_args(), {"--prompt", prompt}))),
               "but the model's context holds 512");
}

// An error in the middle of a run: the trace keeps what happened and ends without a summary.
BOOST_DATA_TEST_CASE(trace_cut_short_has_no_summary,
                     bdata::make({std::vector<std::string>{"--sampler", "throwing", "--plugin-path", (kTestPlugins / "throwing").string()}}) ^
                         bdata::make({"sampler 'throwing' (module 'throwing'"}),
                     extra, message) {
  const fs::path dir = gbtest::temp_dir("cut");
  const fs::path trace = dir / "t.jsonl";
  auto r = run_cli(args({"run"}, args(gbtest::stories_args(), args({"--prompt", "Once upon a time", "--trace", trace.string()}, extra))));
  expect_error(r, message);
  const auto lines = gbtest::read_jsonl(trace);
  BOOST_TEST_REQUIRE(!lines.empty());
  BOOST_TEST(lines.front()["type"] == "header");
  BOOST_TEST(lines.back()["type"] == "error");
  for (const auto& l : lines) BOOST_TEST(l["type"] != "summary");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(bad_checkpoints_exit_2_naming_the_file) {
  const fs::path dir = gbtest::temp_dir("badckpt");
  gbtest::write_file(dir / "junk.bin", std::string(4096, '\x7f'));
  gbtest::write_file(dir / "tok.bin", std::string("\x05\x00\x00\x00", 4));
  expect_error(run_cli({"run", "--model", (dir / "junk.bin").string(), "--tokenizer", (dir / "tok.bin").string()}),
               (dir / "junk.bin").string() + ": header field dim");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2) {
  BOOST_TEST(run_cli({"run", "--no-such-flag"}).rc == 2);
  BOOST_TEST(run_cli({}).rc == 2);
  BOOST_TEST(run_cli({"--help"}).rc == 0);
}
