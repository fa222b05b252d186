// `glassbox compare` with the strategies beyond a sampler chain and what the report says of them: speculative
// decoding (greedy's tokens with a greedy target; the acceptance rate against the run's own trace and
// `run --json`), a grammar stage's removed probability mass (against the stage records and a full-distribution
// trace), bad speculative parameters, shards carrying the new fields, and --ignore-eos in compare and bench.
#define BOOST_TEST_MODULE compare_strategies
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <sys/wait.h>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "browser.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace gbtest;

namespace {

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

json compare_json(const std::vector<std::string>& args) {
  auto r = run_cli(cat({"compare", "--json", "-j", "1"}, args));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  return json::parse(r.out);
}

std::string model(const std::string& name) { return shared("models/" + name).string(); }

// A trace's lines as JSON (read here without glassbox's reader).
std::vector<json> trace_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// The `glassbox run` a report prints for a run, with extra arguments, through the built binary.
CliResult rerun(const json& run, const std::vector<std::string>& extra) {
  std::string cmd = run.at("command");
  BOOST_TEST_REQUIRE(cmd.rfind("glassbox run ", 0) == 0u);
  cmd = quote(GLASSBOX_BIN) + cmd.substr(8);
  for (const auto& x : extra) cmd += " " + quote(x);
  const fs::path dir = temp_dir("cmpspec-rerun");
  cmd += " >" + quote((dir / "out").string()) + " 2>" + quote((dir / "err").string());
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, read_file(dir / "out"), read_file(dir / "err")};
}

bool has_synth() { return shared_dir() && fs::exists(shared("models/synth128.bin")); }

}  // namespace

BOOST_AUTO_TEST_SUITE(speculative, *boost::unit_test::precondition(NeedsShared()))

// With a greedy target, speculative decoding emits the target's greedy tokens whatever the draft and K
// (docs/speculative.md): in one experiment its runs equal the greedy strategy's, token for token.
BOOST_AUTO_TEST_CASE(a_greedy_target_writes_the_greedy_strategys_tokens) {
  std::vector<std::string> strategies{"-s", "greedy", "-s", "self=speculative:draft=" + model("stories260K.bin") + ";k=2"};
  if (has_synth()) strategies = cat(strategies, {"-s", "synth=speculative:draft=" + model("synth128.bin") + ";k=4;chain=greedy"});
  else BOOST_TEST_MESSAGE("synth128.bin absent: the self-draft only");
  const json j = compare_json(cat(cat(stories_args(), {"-p", "Once upon a time", "-p", "The little dog", "-N", "1", "-n", "24"}),
                                  strategies));
  const int S = static_cast<int>(strategies.size() / 2);
  std::map<int, std::vector<int>> greedy;
  for (const auto& r : j["runs"])
    if (r["strategy"] == 0) greedy[r["prompt"]] = r["tokens"].get<std::vector<int>>();
  int checked = 0;
  for (const auto& r : j["runs"]) {
    if (r["strategy"] == 0) continue;
    BOOST_TEST(r["tokens"].get<std::vector<int>>() == greedy.at(r["prompt"]), boost::test_tools::per_element());
    BOOST_TEST(r.contains("speculative"));
    ++checked;
  }
  BOOST_TEST(checked == 2 * (S - 1));
  BOOST_TEST(!j["strategies"][0].contains("speculative"));
  BOOST_TEST(j["strategies"][1]["speculative"]["k"] == 2);
  // The target as its own greedy draft: every proposal is its argmax.
  BOOST_TEST(j["strategies"][1]["speculative"]["acceptance_rate"].get<double>() == 1.0);
  BOOST_TEST(j["strategies"][1]["speculative"]["tokens_per_target_forward"].get<double>() > 2.0);
}

// The report's acceptance rate and tokens per target forward are the runs' own: each run's equal its trace
// summary's, the strategy's are the pooled counts, and the printed `run` command gives the same figures.
BOOST_AUTO_TEST_CASE(acceptance_rate_equals_the_traces_and_runs) {
  if (!has_synth()) {
    BOOST_TEST_MESSAGE("skipped: ../shared/models/synth128.bin absent");
    return;
  }
  const fs::path dir = temp_dir("cmpspec-acc");
  // synth128 (random weights) almost never proposes what stories260K would say; under a yes/no grammar it
  // sometimes does, so that runs accept some proposals and reject others (per-run rates 1/9 and 0 here).
  const std::string grammar = (fs::path(GLASSBOX_SOURCE_DIR) / "docs" / "grammars" / "yesno.gbnf").string();
  const json j = compare_json(cat(stories_args(), {"-p", "Is the sky blue?", "-s",
                                                   "spec=speculative:draft=" + model("synth128.bin") + ";k=3;chain=grammar:file=" +
                                                       grammar + ",temperature:0.8",
                                                   "-N", "4", "-n", "20", "--seed", "3", "--traces", (dir / "t").string()}));
  long long proposed = 0, accepted = 0, tokens = 0, rounds = 0;
  for (const auto& r : j["runs"]) {
    const auto lines = trace_lines(r["trace"]);
    const json& sum = lines.back();
    BOOST_TEST_REQUIRE(sum["type"] == "summary");
    const json& sp = sum["speculative"];
    BOOST_TEST(r["speculative"]["acceptance_rate"].get<double>() == sp["acceptance_rate"].get<double>(),
               boost::test_tools::tolerance(1e-12));
    BOOST_TEST(r["speculative"]["tokens_per_target_forward"].get<double>() == sp["tokens_per_target_forward"].get<double>(),
               boost::test_tools::tolerance(1e-12));
    proposed += sp["proposed"].get<long long>(), accepted += sp["accepted"].get<long long>();
    tokens += sp["tokens"].get<long long>(), rounds += sp["rounds"].get<long long>();
  }
  BOOST_TEST_REQUIRE(proposed > 0);
  BOOST_TEST(accepted > 0, "synth128 should agree with stories260K now and then under the grammar");
  BOOST_TEST(accepted < proposed);
  const json& st = j["strategies"][0]["speculative"];
  BOOST_TEST(st["acceptance_rate"].get<double>() == double(accepted) / proposed, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(st["tokens_per_target_forward"].get<double>() == double(tokens) / rounds, boost::test_tools::tolerance(1e-12));
  // The command the report prints is the speculative run: its --json summary says the same.
  const json& r0 = j["runs"][0];
  BOOST_TEST(r0["command"].get<std::string>().find("--draft-model") != std::string::npos);
  const auto out = rerun(r0, {"--json"});
  BOOST_TEST_REQUIRE(out.rc == 0, out.err);
  json summary;
  for (std::size_t a = 0, b; a < out.out.size(); a = b + 1) {
    b = out.out.find('\n', a);
    if (b == std::string::npos) b = out.out.size();
    const std::string line = out.out.substr(a, b - a);
    if (!line.empty() && json::parse(line).value("type", "") == "summary") summary = json::parse(line);
  }
  BOOST_TEST_REQUIRE(summary.contains("speculative"), out.out);
  BOOST_TEST(summary["text"] == r0["text"]);
  BOOST_TEST(summary["speculative"]["acceptance_rate"].get<double>() == r0["speculative"]["acceptance_rate"].get<double>(),
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(summary["speculative"]["tokens_per_target_forward"].get<double>() ==
                 r0["speculative"]["tokens_per_target_forward"].get<double>(),
             boost::test_tools::tolerance(1e-12));
}

struct Bad {
  std::string strategy;  // after "bad="; DIR stands for ../shared/models
  std::string says;
};
std::ostream& operator<<(std::ostream& o, const Bad& b) { return o << b.strategy; }
const Bad kBad[] = {
    {"speculative:k=4", "needs a draft model"},
    {"speculative:draft=DIR/no-such-draft.bin;k=4", "draft 'DIR/no-such-draft.bin'"},
    {"speculative:draft=DIR/stories260K.bin;k=0", "k '0' (expected an integer in 1..32)"},
    {"speculative:draft=DIR/stories260K.bin;k=33", "k '33' (expected an integer in 1..32)"},
    {"speculative:draft=DIR/stories260K.bin;kk=3", "unknown parameter 'kk'"},
    {"speculative:draft=DIR/stories260K.bin;draft_tokenizer=DIR/none.bin", "draft_tokenizer 'DIR/none.bin'"},
    {"speculative:draft=DIR/stories260K.bin;chain=beam:2", "chain 'beam:2' is a strategy of its own"},
    {"speculative:draft=DIR/stories260K.bin;chain=temperature:-1", "parameter 'temperature'"},
    {"speculative:draft=DIR/stories260K.bin;chain=mirostat-v2", "declares an argmax or a draw"},
    // The embedded toy model as the draft, with its own vocabulary: refused as `run --draft-model` refuses it.
    {"speculative:draft=TOY/toy.bin;draft_tokenizer=TOY/toy-tok.bin", "have different vocabularies"},
};

BOOST_DATA_TEST_CASE(bad_parameters_exit_2_naming_the_strategy_and_the_key, bdata::make(kBad), c) {
  std::string s = c.strategy, says = c.says;
  const std::string dir = shared("models").string();
  const std::string toy = (fs::path(GLASSBOX_BINARY_DIR) / "share" / "glassbox" / "models").string();
  for (std::string* x : {&s, &says}) {
    for (auto at = x->find("DIR"); at != std::string::npos; at = x->find("DIR")) x->replace(at, 3, dir);
    for (auto at = x->find("TOY"); at != std::string::npos; at = x->find("TOY")) x->replace(at, 3, toy);
  }
  const auto r = run_cli(cat(cat({"compare"}, stories_args()), {"-p", "Hi", "-s", "greedy", "-s", "bad=" + s, "-N", "1", "-n", "2"}));
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(r.err.find("strategies[1] 'bad'") != std::string::npos, r.err);
  BOOST_TEST(r.err.find(says) != std::string::npos, r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, "one line: " << r.err);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(grammar, *boost::unit_test::precondition(NeedsShared()))

// The grammar's removed mass per step: in the report, the mean over the steps of what entered the grammar
// stage minus what it kept (the stage records of each run's trace); for a grammar first in the chain, that
// is 1 − the raw probability of the candidates it kept, checked against a run with the whole distribution.
BOOST_AUTO_TEST_CASE(removed_mass_is_the_mean_of_the_grammar_stage_records) {
  const fs::path dir = temp_dir("cmpspec-grammar");
  const std::string g = "grammar:file=" + (fs::path(GLASSBOX_SOURCE_DIR) / "docs" / "grammars" / "yesno.gbnf").string();
  const json j = compare_json(cat(stories_args(), {"-p", "Is the sky blue?", "-p", "Do you like cats?", "-s", "first=" + g + ",dist",
                                                   "-s",
                                                   // after a stage that removed " I", " The", " He": what enters the grammar is less than 1
                                                   "second=logit-bias:359=-inf;291=-inf;346=-inf,temperature:0.9," + g + ",dist", "-s", "plain=greedy", "-N", "2",
                                                   "-n", "8", "--traces", (dir / "t").string()}));
  BOOST_TEST(!j["strategies"][2].contains("grammar"));
  for (int s = 0; s < 2; ++s) {
    double sum = 0;
    long long steps = 0;
    for (const auto& r : j["runs"]) {
      if (r["strategy"] != s) continue;
      const auto lines = trace_lines(r["trace"]);
      const int V = lines[0]["model"]["config"]["vocab_size"];
      double run_sum = 0;
      int run_steps = 0;
      for (const auto& l : lines) {
        if (l["type"] != "step") continue;
        const auto& st = l["stages"];
        for (std::size_t i = 0; i < st.size(); ++i)
          if (st[i]["name"] == "grammar") {
            run_sum += (i == 0 ? 1.0 : st[i - 1]["mass"].get<double>()) - st[i]["mass"].get<double>();
            ++run_steps;
            BOOST_TEST(st[i]["kept"].get<int>() < (i == 0 ? V : st[i - 1]["kept"].get<int>()));
          }
      }
      BOOST_TEST_REQUIRE(run_steps > 0);
      BOOST_TEST(r["grammar"]["steps"] == run_steps);
      BOOST_TEST(r["grammar"]["removed_mass_per_step"].get<double>() == run_sum / run_steps, boost::test_tools::tolerance(1e-6));
      sum += run_sum;
      steps += run_steps;
    }
    const json& gr = j["strategies"][s]["grammar"];
    BOOST_TEST(gr["steps"] == steps);
    BOOST_TEST(gr["removed_mass_per_step"].get<double>() == sum / steps, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(gr["removed_mass_per_step"].get<double>() > 0.5, "a yes/no grammar removes most of a story model's mass");
  }
  // Independently of the stages' `mass` field: rerun the first strategy's first run with every candidate
  // traced; at each step the grammar removed 1 − Σ p_raw over the ids it kept.
  const json* r0 = nullptr;
  for (const auto& r : j["runs"])
    if (r["strategy"] == 0 && !r0) r0 = &r;
  const fs::path full = dir / "full.jsonl";
  const auto out = rerun(*r0, {"--trace", full.string(), "--trace-top", "1000"});
  BOOST_TEST_REQUIRE(out.rc == 0, out.err);
  double sum = 0;
  int steps = 0;
  for (const auto& l : trace_lines(full.string())) {
    if (l["type"] != "step") continue;
    std::map<int, double> raw;
    for (const auto& t : l["top"]) raw[t["id"]] = t["prob"];
    const auto& kept = l["stages"][0];
    BOOST_TEST_REQUIRE(kept["name"] == "grammar");
    BOOST_TEST_REQUIRE(kept["top"].size() == kept["kept"].get<std::size_t>(), "every kept candidate listed");
    double kept_mass = 0;
    for (const auto& t : kept["top"]) kept_mass += raw.at(t["id"]);
    sum += 1.0 - kept_mass;
    ++steps;
  }
  BOOST_TEST(steps == (*r0)["grammar"]["steps"].get<int>());
  BOOST_TEST((*r0)["grammar"]["removed_mass_per_step"].get<double>() == sum / steps, boost::test_tools::tolerance(1e-5));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(shards, *boost::unit_test::precondition(NeedsShared()))

// The new fields go through shard files: two shards of an experiment file (a speculative strategy, a
// grammar chain, ignore_eos) merged equal the whole sweep, timings aside.
BOOST_AUTO_TEST_CASE(merged_shards_carry_speculative_grammar_and_ignore_eos) {
  const fs::path dir = temp_dir("cmpspec-shards");
  const std::string grammar = (fs::path(GLASSBOX_SOURCE_DIR) / "docs" / "grammars" / "yesno.gbnf").string();
  write_file(dir / "e.yaml", "model: " + model("stories260K.bin") + "\ntokenizer: " + model("tok512.bin") +
                                 "\nprompts: [Once upon a time, Is it blue]\nstrategies:\n  - greedy\n"
                                 "  - {label: spec, chain: \"speculative:draft=" + model("stories260K.bin") +
                                 ";k=3;chain=top-k:5,dist\"}\n  - yesno=grammar:file=" + grammar + ",dist\n"
                                 "samples: 2\nmax_tokens: 6\nseed: 9\nignore-eos: false\n");
  std::vector<std::string> shards;
  for (int i = 1; i <= 2; ++i) {
    shards.push_back((dir / ("s" + std::to_string(i) + ".json")).string());
    const auto r = run_cli({"compare", "--experiment", (dir / "e.yaml").string(), "--shard", std::to_string(i) + "/2", "-o", shards.back()});
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  }
  json whole = compare_json({"--experiment", (dir / "e.yaml").string()});
  const auto m = run_cli(cat({"compare", "merge", "--json"}, shards));
  BOOST_TEST_REQUIRE(m.rc == 0, m.err);
  json merged = json::parse(m.out);
  BOOST_TEST(!whole["experiment"].contains("ignore_eos"), "absent when false");
  BOOST_TEST_REQUIRE(whole["strategies"][1].contains("speculative"));
  BOOST_TEST_REQUIRE(whole["strategies"][2].contains("grammar"));
  whole.erase("timings");
  merged.erase("timings");
  BOOST_TEST(merged == whole);
}

// The HTML report's strategies table gains a `specific` column with the same figures, and still renders
// without a console error.
BOOST_AUTO_TEST_CASE(html_report_shows_the_specific_figures,
                     *boost::unit_test::precondition(NeedsChromium())) {
  const fs::path dir = temp_dir("cmpspec-html");
  const fs::path page = dir / "report.html";
  const std::string grammar = (fs::path(GLASSBOX_SOURCE_DIR) / "docs" / "grammars" / "yesno.gbnf").string();
  const auto r = run_cli(cat(cat({"compare"}, stories_args()),
                             {"-p", "Is the sky blue?", "-s", "greedy", "-s", "beam:2", "-s",
                              "spec=speculative:draft=" + model("stories260K.bin") + ";k=2", "-s", "yn=grammar:file=" + grammar + ",dist",
                              "-N", "2", "-n", "6", "--html", page.string()}));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(r.out.find("Strategy-specific:") != std::string::npos, "the Markdown lists them too");
  const auto b = browse(page, "--dump-dom");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  const std::string& dom = b.out;
  BOOST_TEST(dom.find("data-ready=\"1\"") != std::string::npos, "the report's script did not finish");
  BOOST_TEST(dom.find("id=\"console-errors\" data-count=\"0\"") != std::string::npos);
  std::size_t cells = 0;
  for (auto p = dom.find("class=\"specific\""); p != std::string::npos; p = dom.find("class=\"specific\"", p + 1)) ++cells;
  BOOST_TEST(cells == 4u, "one per strategy row");
  for (const char* x : {"beam 2: ", "K=2: 100.0% accepted", "tokens/target forward", "grammar removed 0."})
    BOOST_TEST(dom.find(x) != std::string::npos, x);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- --ignore-eos (embedded toy model)

// On the weather prompt the toy model's greedy continuation ends after two tokens (" sunny" "."): with
// --ignore-eos every run of every strategy goes on to max_tokens, and the printed command says so.
BOOST_AUTO_TEST_CASE(ignore_eos_makes_every_compare_run_max_tokens_long) {
  const std::vector<std::string> base{"-p", "The weather today is", "-s", "greedy", "-s", "hot=temperature:1.3", "-s", "beam:2",
                                      "-N", "3", "-n", "12"};
  const json without = compare_json(base);
  int short_runs = 0;
  for (const auto& r : without["runs"]) short_runs += r["tokens"].size() < 12u;
  BOOST_TEST_REQUIRE(without["runs"][0]["stop_reason"] == "stop_token");
  BOOST_TEST(without["runs"][0]["tokens"].size() < 12u);
  BOOST_TEST(short_runs >= 6, "greedy and the beam end early");
  const json with = compare_json(cat(base, {"--ignore-eos"}));
  BOOST_TEST(with["experiment"]["ignore_eos"] == true);
  for (const auto& r : with["runs"]) {
    BOOST_TEST(r["tokens"].size() == 12u, r["command"]);
    BOOST_TEST(r["stop_reason"] == "max_tokens");
    BOOST_TEST(r["command"].get<std::string>().find(" --ignore-eos") != std::string::npos);
  }
  // The experiment file's key does the same.
  const fs::path dir = temp_dir("cmpspec-eos");
  write_file(dir / "e.yaml", "ignore_eos: true\n");
  json from_yaml = compare_json(cat(base, {"--experiment", (dir / "e.yaml").string()}));
  json cli = with;
  from_yaml.erase("timings");
  cli.erase("timings");
  BOOST_TEST(from_yaml == cli);
  // The printed command is `run --ignore-eos`: the same text.
  const auto out = rerun(with["runs"][0], {});
  BOOST_TEST_REQUIRE(out.rc == 0, out.err);
  BOOST_TEST(out.out == with["runs"][0]["text"].get<std::string>() + "\n");
}

// bench's decode test never stops (as llama-bench's): it counts the end-of-generation tokens its greedy pick
// chose, and --ignore-eos keeps them out, so the N tokens decoded are those `run --ignore-eos` would write.
BOOST_AUTO_TEST_CASE(bench_ignore_eos_decodes_no_end_of_generation_token) {
  auto bench = [](const std::vector<std::string>& extra) {
    const auto r = run_cli(cat({"bench", "-r", "1", "--no-roofline", "-p", "4", "-n", "48", "--json"}, extra));
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    const json j = json::parse(r.out);
    BOOST_TEST_REQUIRE(j["results"][1]["test"] == "tg48");
    return j;
  };
  const json without = bench({});
  BOOST_TEST(without["results"][1]["eog_tokens"].get<int>() > 0, "the toy model ends a sentence within 48 tokens");
  BOOST_TEST(!without.contains("ignore_eos"));
  const json with = bench({"--ignore-eos"});
  BOOST_TEST(with["ignore_eos"] == true);
  BOOST_TEST(with["results"][1]["eog_tokens"] == 0);
  BOOST_TEST(with["results"][1]["tokens"] == 48);
}
