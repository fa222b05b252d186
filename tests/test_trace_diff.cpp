// `glassbox trace diff` (exit 0 within tolerance, 1 regression, 2 unusable input) and `run --replay`.
#define BOOST_TEST_MODULE trace_diff
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "support.hpp"
#include "trace_fixtures.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace gbtest;

namespace {

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

CliResult diff(const fs::path& golden, const fs::path& next, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"trace", "diff", golden.string(), next.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  return run_cli(a);
}

// `glassbox run --replay GOLDEN` (model and tokenizer given) writing `out`, with extra args and env.
CliResult replay(const fs::path& golden, const fs::path& out, std::vector<std::string> extra = {},
                 const std::string& env = "") {
  std::vector<std::string> a = {"run", "--replay", golden.string()};
  for (const auto& x : stories_args()) a.push_back(x);
  a.insert(a.end(), extra.begin(), extra.end());
  a.push_back("--trace");
  a.push_back(out.string());
  return run_cli(a, env);
}

std::vector<json> load(const fs::path& p) { return read_jsonl(p); }

fs::path greedy_basic_trace() {
  return stories_trace("greedy-basic", {"--prompt", "The cat sat", "--max-tokens", "16", "--sampler", "greedy", "--seed", "3"});
}
fs::path greedy_long_trace() {
  return stories_trace("greedy-full-40", {"--prompt", "Once upon a time", "--max-tokens", "40", "--sampler", "greedy",
                                          "--seed", "1", "--trace-level", "full"});
}

struct Named {
  const char* name;
  fs::path (*make)();
};
std::ostream& operator<<(std::ostream& o, const Named& n) { return o << n.name; }
const Named kTraces[] = {{"greedy_full", greedy_full_trace}, {"sampled_basic", sampled_basic_trace}};

}  // namespace

BOOST_AUTO_TEST_SUITE(diff_cli, *boost::unit_test::precondition(NeedsShared()))

BOOST_DATA_TEST_CASE(a_trace_against_itself_is_exit_0, bdata::make(kTraces), trace) {
  const auto p = trace.make();
  const auto r = diff(p, p);
  BOOST_TEST(r.rc == 0, r.out << r.err);
  BOOST_TEST(has(r.out, "OK: within tolerance"), r.out);
  BOOST_TEST(has(r.out, "(every step)"), r.out);
  BOOST_TEST(has(r.out, "max |Δlogprob|:  0"), r.out);
}

// Every logit of step 7 (the full list when present, and the top-K list) moved up by 0.01: the
// probabilities do not change at all, the raw model output does.
BOOST_DATA_TEST_CASE(step_7_logits_shifted_by_0_01_is_exit_1_naming_step_7, bdata::make(kTraces), trace) {
  auto lines = load(trace.make());
  json& s = lines[1 + 7];
  BOOST_TEST_REQUIRE(s["step"] == 7);
  for (auto& c : s["top"]) c["logit"] = c["logit"].get<double>() + 0.01;
  if (s.contains("logits")) {  // written back as numbers: a step may write its logits either way
    auto shifted = step_logits(s);
    for (auto& l : shifted) l += 0.01;
    s["logits"] = shifted;
  }
  const fs::path p = temp_dir(std::string("diff-shift-") + trace.name) / "shifted.jsonl";
  write_jsonl(p, lines);
  const auto r = diff(trace.make(), p);
  BOOST_TEST(r.rc == 1, r.out << r.err);
  BOOST_TEST(has(r.out, "first divergent step: step 7 ("), r.out);
  BOOST_TEST(has(r.out, "REGRESSION: 1 difference"), r.out);
  BOOST_TEST(has(r.out, "  step 7: |Δlogit| 0.01 > "), r.out);
  // a tolerance wider than the shift accepts it
  BOOST_TEST(diff(trace.make(), p, {"--atol", "0.02"}).rc == 0);
}

BOOST_AUTO_TEST_CASE(garbage_is_exit_2_with_the_line_number) {
  const fs::path dir = temp_dir("diff-garbage");
  const fs::path junk = dir / "junk.jsonl";
  write_file(junk, "this is not a trace\n");
  auto r = diff(greedy_full_trace(), junk);
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, junk.string() + ":1: not valid JSON"), r.err);
  r = diff(junk, greedy_full_trace());
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, junk.string() + ":1:"), r.err);

  auto lines = read_lines(greedy_full_trace());
  lines[4] = "{\"type\": \"step\", \"step\": 3,";
  const fs::path broken = dir / "broken.jsonl";
  write_lines(broken, lines);
  r = diff(greedy_full_trace(), broken);
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, broken.string() + ":5: not valid JSON"), r.err);
  BOOST_TEST(r.out.empty(), r.out);

  lines = read_lines(greedy_full_trace());
  lines.pop_back();
  write_lines(broken, lines);
  r = diff(greedy_full_trace(), broken);
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, broken.string() + ":13: cut short"), r.err);
  BOOST_TEST(diff(greedy_full_trace(), dir / "missing.jsonl").rc == 2);
}

BOOST_DATA_TEST_CASE(a_replay_of_itself_is_exit_0_with_every_step_compared, bdata::make(kTraces), trace) {
  const auto golden = trace.make();
  const fs::path out = temp_dir(std::string("diff-replay-") + trace.name) / "replay.jsonl";
  const auto run = replay(golden, out);
  BOOST_TEST_REQUIRE(run.rc == 0, run.err);
  const auto g = load(golden), n = load(out);
  BOOST_TEST_REQUIRE(g.size() == n.size());
  // the prompt, limit, seed, level and sampler chain come from the golden's header
  for (const char* k : {"prompt", "prompt_ids", "max_tokens", "seed", "trace_level", "plugins"})
    BOOST_TEST(g[0][k] == n[0][k], k);
  for (std::size_t i = 1; i + 1 < n.size(); ++i) {
    BOOST_TEST(n[i]["forced"] == true);
    BOOST_TEST(n[i]["token"]["id"] == g[i]["token"]["id"]);
  }
  const auto r = diff(golden, out);
  BOOST_TEST(r.rc == 0, r.out << r.err);
  const std::string steps = std::to_string(g.size() - 2);
  BOOST_TEST(has(r.out, "steps compared:  " + steps + " of " + steps + " (every step)"), r.out);
  BOOST_TEST(has(r.out, "token agreement: " + steps + "/" + steps), r.out);
  BOOST_TEST(has(r.out, "replay (" + steps + " forced)"), r.out);
}

// A perturbed model run freely diverges, and diff can only compare the steps before the texts part;
// replayed, every step is compared and the regression is still found.
BOOST_AUTO_TEST_CASE(replay_compares_every_step_after_a_divergence) {
  const auto golden = greedy_long_trace();
  const fs::path dir = temp_dir("diff-perturbed");
  const std::string env = "GLASSBOX_TEST_ROPE_THETA=500000";
  std::vector<std::string> a = {"run"};
  for (const auto& x : stories_args()) a.push_back(x);
  for (const auto& x : {"--prompt", "Once upon a time", "--max-tokens", "40", "--sampler", "greedy", "--seed", "1",
                        "--trace-level", "full", "--trace"})
    a.push_back(x);
  a.push_back((dir / "free.jsonl").string());
  const auto free_run = run_cli(a, env);
  BOOST_TEST_REQUIRE(free_run.rc == 0, free_run.err);
  BOOST_TEST(has(free_run.err, "test-only GLASSBOX_TEST_ROPE_THETA"), free_run.err);
  auto r = diff(golden, dir / "free.jsonl");
  BOOST_TEST(r.rc == 1, r.out);
  BOOST_TEST(has(r.out, "the texts diverge after step"), r.out);

  BOOST_TEST_REQUIRE(replay(golden, dir / "replay.jsonl", {}, env).rc == 0);
  r = diff(golden, dir / "replay.jsonl");
  BOOST_TEST(r.rc == 1, r.out);
  BOOST_TEST(has(r.out, "steps compared:  40 of 40 (every step)"), r.out);
  // where the perturbed model would have gone elsewhere, though it was forced on
  BOOST_TEST(has(r.out, "first token divergence: step"), r.out);
  BOOST_TEST(has(r.out, "(new was teacher-forced to"), r.out);
}

// The chosen token at step 3 replaced by the golden's second candidate: the report shows where each
// side's token ranks in the other's top-K, and stops comparing once the texts differ.
BOOST_AUTO_TEST_CASE(a_different_token_is_exit_1_with_ranks) {
  auto lines = load(greedy_full_trace());
  json& s = lines[1 + 3];
  const json second = s["top"][1];
  s["token"] = {{"id", second["id"]}, {"text", second["text"]}};
  s["draw"]["selected"] = second["id"];
  s["prob"] = second["prob"];
  lines[1 + 4]["input_ids"] = json::array({second["id"]});
  const fs::path p = temp_dir("diff-token") / "token.jsonl";
  write_jsonl(p, lines);
  BOOST_TEST_REQUIRE(run_cli({"trace", "validate", p.string()}).rc == 0);
  const auto r = diff(greedy_full_trace(), p);
  BOOST_TEST(r.rc == 1, r.out);
  BOOST_TEST(has(r.out, "first divergent step: step 3 ("), r.out);
  BOOST_TEST(has(r.out, "is #1 in new's top-10"), r.out);
  BOOST_TEST(has(r.out, "is #2 in golden's top-10"), r.out);
  BOOST_TEST(has(r.out, "steps compared:  4 of 12"), r.out);
  BOOST_TEST(has(r.out, "token agreement: 3/4"), r.out);
}

// An argmax between two candidates equal within tolerance may fall either way after a rebuild.
BOOST_AUTO_TEST_CASE(a_near_tie_under_argmax_is_not_a_regression) {
  auto g = load(greedy_basic_trace());
  json& s = g[1 + 3];
  s["top"][1]["logit"] = s["top"][0]["logit"].get<double>() - 1e-6;
  s["top"][1]["prob"] = s["top"][0]["prob"];
  auto n = g;
  n.resize(1 + 4);  // the new run stops after its step 3
  n[0]["max_tokens"] = 4;
  json& x = n[1 + 3];
  x["token"] = {{"id", x["top"][1]["id"]}, {"text", x["top"][1]["text"]}};
  x["draw"]["selected"] = x["top"][1]["id"];
  n.push_back(g.back());
  n.back()["generated"] = 4;
  n.back()["stop_reason"] = "max_tokens";
  const fs::path dir = temp_dir("diff-tie");
  write_jsonl(dir / "golden.jsonl", g);
  write_jsonl(dir / "new.jsonl", n);
  auto r = diff(dir / "golden.jsonl", dir / "new.jsonl");
  BOOST_TEST(r.rc == 0, r.out << r.err);
  BOOST_TEST(has(r.out, "near-tie"), r.out);
  // the same flip where the golden's token clearly led is a regression
  const auto original = load(greedy_basic_trace());
  BOOST_TEST_REQUIRE(original[1 + 3]["top"][0]["logit"].get<double>() - original[1 + 3]["top"][1]["logit"].get<double>() > 1e-3);
  for (int k = 0; k < 4; ++k) n[1 + k]["top"] = original[1 + k]["top"];
  r = diff(greedy_basic_trace(), (write_jsonl(dir / "new.jsonl", n), dir / "new.jsonl"));
  BOOST_TEST(r.rc == 1, r.out << r.err);
  BOOST_TEST(has(r.out, "step 3: the sampler chose"), r.out);
}

BOOST_AUTO_TEST_CASE(a_swapped_sampler_stage_is_exit_1) {
  const auto golden = sampled_basic_trace();  // top-k:40,temperature:0.8 seed 7
  const fs::path dir = temp_dir("diff-swap");
  // the chain as configured
  const auto swapped = stories_trace("sampled-basic-swapped", {"--prompt", "Lily and Ben went to the park", "--max-tokens",
                                                               "16", "--sampler", "temperature:0.8,top-k:40", "--seed", "7"});
  auto r = diff(golden, swapped);
  BOOST_TEST(r.rc == 1, r.out);
  BOOST_TEST(has(r.out, "sampler chain differs"), r.out);
  // the stages as run, with the header unchanged (a chain that runs its stages out of order)
  auto lines = load(golden);
  for (std::size_t i = 1; i + 1 < lines.size(); ++i) std::swap(lines[i]["stages"][0], lines[i]["stages"][1]);
  write_jsonl(dir / "stages.jsonl", lines);
  r = diff(golden, dir / "stages.jsonl");
  BOOST_TEST(r.rc == 1, r.out);
  BOOST_TEST(has(r.out, "step 0: stage 1 is temperature, golden top-k"), r.out);
}

BOOST_AUTO_TEST_CASE(other_vocabulary_is_exit_2) {
  auto lines = load(sampled_basic_trace());
  lines[0]["model"]["config"]["vocab_size"] = 1000;
  const fs::path p = temp_dir("diff-vocab") / "vocab.jsonl";
  write_jsonl(p, lines);
  const auto r = diff(sampled_basic_trace(), p);
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, "not comparable"), r.err);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(replay_cli, *boost::unit_test::precondition(NeedsShared()))

BOOST_AUTO_TEST_CASE(overrides_win_over_the_golden_header) {
  const fs::path out = temp_dir("replay-override") / "r.jsonl";
  const auto r = replay(sampled_basic_trace(), out, {"--max-tokens", "5", "--trace-level", "full"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto n = load(out);
  BOOST_TEST(n.size() == 7u);  // header, 5 steps, summary
  BOOST_TEST(n[0]["trace_level"] == "full");
  BOOST_TEST(n[0]["seed"] == 7);
  const auto d = diff(sampled_basic_trace(), out);
  BOOST_TEST(d.rc == 0, d.out);  // the common steps agree; the shorter limit is a note
  BOOST_TEST(has(d.out, "max_tokens differ"), d.out);
}

BOOST_AUTO_TEST_CASE(another_model_file_is_a_warning_another_vocabulary_an_error) {
  const fs::path dir = temp_dir("replay-compat");
  auto lines = load(sampled_basic_trace());
  lines[0]["model"]["sha256"] = std::string(64, '0');
  write_jsonl(dir / "sha.jsonl", lines);
  auto r = replay(dir / "sha.jsonl", dir / "out.jsonl");
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(has(r.err, "warning: --replay"), r.err);
  BOOST_TEST(has(r.err, "another model file"), r.err);

  lines[0]["model"]["config"]["vocab_size"] = 1000;
  write_jsonl(dir / "vocab.jsonl", lines);
  r = replay(dir / "vocab.jsonl", dir / "out.jsonl");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, "vocabulary of 1000 tokens"), r.err);
}

BOOST_AUTO_TEST_CASE(a_cut_short_golden_is_refused) {
  const fs::path dir = temp_dir("replay-cut");
  auto lines = read_lines(sampled_basic_trace());
  lines.pop_back();
  write_lines(dir / "cut.jsonl", lines);
  const auto r = replay(dir / "cut.jsonl", dir / "out.jsonl");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, "cut short"), r.err);
}

BOOST_AUTO_TEST_SUITE_END()
