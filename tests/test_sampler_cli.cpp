// Samplers from the command line: `glassbox explain` (model-free), invalid values with exit code 2,
// and `glassbox run` reproducibility by seed with per-stage traces on stories260K.
#define BOOST_TEST_MODULE sampler_cli
#include <cmath>
#include <regex>
#include <set>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "support.hpp"

namespace bdata = boost::unit_test::data;
using RangeCase = std::pair<std::string, std::vector<double>>;
BOOST_TEST_DONT_PRINT_LOG_VALUE(RangeCase)
namespace fs = std::filesystem;
using gbtest::run_cli;
using nlohmann::json;

namespace {

const std::string kWeather = "sunny=.45,cloudy=.25,warm=.15,rainy=.10,cold=.05";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

json explain_json(const std::string& chain, const std::string& dist = kWeather, std::vector<std::string> extra = {}) {
  auto r = run_cli(cat({"explain", "--dist", dist, "--sampler", chain, "--json"}, extra));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  return json::parse(r.out);
}

// text -> prob after stage `s`
std::map<std::string, double> stage_probs(const json& j, std::size_t s) {
  std::map<std::string, double> m;
  for (const auto& p : j["stages"][s]["probs"]) m[p["text"].get<std::string>()] = p["prob"].get<double>();
  return m;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(explain)

BOOST_AUTO_TEST_CASE(json_reports_the_lessons_numbers) {
  auto t02 = stage_probs(explain_json("temperature:0.2"), 0);
  BOOST_TEST(std::fabs(t02["sunny"] - 0.945540) <= 1e-5);
  BOOST_TEST(std::fabs(t02["cloudy"] - 0.050040) <= 1e-5);
  auto t12 = stage_probs(explain_json("temperature:1.2"), 0);
  BOOST_TEST(std::fabs(t12["sunny"] - 0.406697) <= 1e-5);
  const json tp = explain_json("top-p:0.9");
  BOOST_TEST(tp["stages"][0]["kept"] == 4);
  std::set<std::string> kept;
  for (const auto& p : tp["stages"][0]["probs"]) kept.insert(p["text"]);
  BOOST_TEST((kept == std::set<std::string>{"sunny", "cloudy", "warm", "rainy"}));
  BOOST_TEST(std::fabs(tp["stages"][0]["mass"].get<double>() - 0.95) <= 1e-6);
  auto four = [](const std::string& chain) { return stage_probs(explain_json(chain, "a=.1,b=.2,c=.3,d=.4"), 0); };
  auto k3 = four("top-k:3");
  BOOST_TEST(k3.size() == 3u);
  BOOST_TEST(std::fabs(k3["d"] - 0.444444) <= 1e-5);
  BOOST_TEST(std::fabs(k3["c"] - 0.333333) <= 1e-5);
  BOOST_TEST(std::fabs(k3["b"] - 0.222222) <= 1e-5);
  auto p07 = four("top-p:0.7");
  BOOST_TEST(p07.size() == 2u);
  BOOST_TEST(std::fabs(p07["d"] - 0.571429) <= 1e-5);
  BOOST_TEST(std::fabs(p07["c"] - 0.428571) <= 1e-5);
  auto m = four("min-p:0.26");
  BOOST_TEST(m.size() == 3u);
  BOOST_TEST(std::fabs(m["b"] - 0.2 / 0.9) <= 1e-5);
}

BOOST_AUTO_TEST_CASE(json_describes_chain_draw_and_samples) {
  const json j = explain_json("top-k:3,temperature:0.5", kWeather, {"--samples", "20000", "--seed", "7"});
  BOOST_TEST(j["dist_appended"] == true);
  BOOST_TEST_REQUIRE(j["chain"].size() == 3u);
  BOOST_TEST(j["chain"][2]["name"] == "dist");
  BOOST_TEST(j["tokens"].size() == 5u);
  BOOST_TEST(j["draw"]["seed"] == 7);
  BOOST_TEST(j["draw"]["u"].get<double>() >= 0.0);
  BOOST_TEST(j["samples"]["n"] == 20000);
  long total = 0;
  for (const auto& c : j["samples"]["counts"]) total += c["count"].get<long>();
  BOOST_TEST(total == 20000);
  BOOST_TEST(j["samples"]["counts"][3]["count"] == 0);  // rainy is outside the top 3
  // The same seed gives the same draws.
  BOOST_TEST(explain_json("top-k:3,temperature:0.5", kWeather, {"--samples", "20000", "--seed", "7"}) == j);
  BOOST_TEST(explain_json("top-k:3,temperature:0.5", kWeather, {"--samples", "20000", "--seed", "8"})["samples"] !=
             j["samples"]);
}

BOOST_AUTO_TEST_CASE(unnormalised_input_is_normalised) {
  const json j = explain_json("temperature:1", "sunny=9,cloudy=5,warm=3,rainy=2,cold=1");
  BOOST_TEST(std::fabs(j["input_sum"].get<double>() - 20) <= 1e-12);
  BOOST_TEST(std::fabs(stage_probs(j, 0)["sunny"] - 0.45) <= 1e-6);
}

// Weights at the ends of the double's range: normalised through the largest, so 1e308 twice is 1/2 each (their
// sum overflows to inf, which made every probability 0 and blamed "every token banned"), and subnormal ones work.
BOOST_DATA_TEST_CASE(weights_at_the_ends_of_the_range_are_normalised,
                     bdata::make(std::vector<RangeCase>{
                         {"a=1e308,b=1e308", {0.5, 0.5}},
                         {"a=1.7e308,b=1.7e308,c=1.7e308", {1.0 / 3, 1.0 / 3, 1.0 / 3}},
                         {"a=1e308,b=1e307", {10.0 / 11, 1.0 / 11}},
                         {"a=4e-320,b=1e-320", {0.8, 0.2}},
                     }),
                     c) {
  const json j = explain_json("temperature:1", c.first);
  const auto p = stage_probs(j, 0);
  BOOST_TEST_REQUIRE(p.size() == c.second.size());
  for (std::size_t i = 0; i < c.second.size(); ++i)
    BOOST_TEST(std::fabs(p.at(std::string(1, static_cast<char>('a' + i))) - c.second[i]) <= 1e-3, c.first);
  auto r = run_cli({"explain", "--dist", c.first, "--sampler", "temperature:1"});
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(contains(r.out, "entropy "), r.out);  // the label and its value apart, however short the names
}

BOOST_AUTO_TEST_CASE(the_table_has_a_column_per_stage_and_bars) {
  auto r = run_cli({"explain", "--dist", kWeather, "--sampler", "top-p:0.9,temperature:0.2", "--samples", "1000"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(contains(r.out, "input"));
  BOOST_TEST(contains(r.out, "top-p:0.9"));
  BOOST_TEST(contains(r.out, "temperature:0.2"));
  BOOST_TEST(contains(r.out, "1000 draws"));
  BOOST_TEST(contains(r.out, "█"));
  BOOST_TEST(contains(r.out, "0.4500"));
  BOOST_TEST(contains(r.out, "—"), "a removed token is marked");
  BOOST_TEST(contains(r.out, "dist draws with seed 0"));
}

BOOST_AUTO_TEST_CASE(penalties_see_the_history) {
  const json j = explain_json("presence-penalty:1", kWeather, {"--history", "sunny,3"});
  auto p = stage_probs(j, 0);
  const double w = .45 * std::exp(-1) + .25 + .15 + .10 * std::exp(-1) + .05;
  BOOST_TEST(std::fabs(p["sunny"] - .45 * std::exp(-1) / w) <= 1e-5);
  BOOST_TEST(std::fabs(p["rainy"] - .10 * std::exp(-1) / w) <= 1e-5);
}

BOOST_AUTO_TEST_CASE(a_stage_after_greedy_warns) {
  auto r = run_cli({"explain", "--dist", kWeather, "--sampler", "greedy,temperature:0.8"});
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(contains(r.err, "warning: sampler stage 'temperature' comes after 'greedy'"), r.err);
  BOOST_TEST(contains(r.out, "greedy picks the most likely token: sunny"), r.out);
}

BOOST_DATA_TEST_CASE(malformed_distributions_are_rejected,
                     bdata::make({"", "sunny=.5,", "sunny=x", "sunny=-1", "sunny=nan", "=.5", "a=0,b=0", "a=.5,a=.5"}) ^
                         bdata::make({"--dist", "trailing", "'x' is not a number", "negative", "not finite",
                                      "no name", "every probability is 0", "listed twice"}),
                     dist, why) {
  auto r = run_cli({"explain", "--dist", dist, "--sampler", "greedy"});
  BOOST_TEST(r.rc == 2, dist << ": " << r.err);
  BOOST_TEST(contains(r.err, why), r.err);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- invalid values, exit 2

BOOST_AUTO_TEST_SUITE(invalid)

namespace {
const auto kBad = bdata::make({"temperature:-1", "temperature:nan", "top-p:0", "top-p:1.5", "top-p:nan", "top-k:-1",
                               "min-p:nan", "nucleus", "top-k:40,top-p:2", "logit-bias:1=x"}) ^
                  bdata::make({"'temperature'", "'temperature'", "'top-p'", "'top-p'", "'top-p'", "'top-k'", "'min-p'",
                               "unknown sampler 'nucleus'", "'top-p'", "'logit-bias'"}) ^
                  bdata::make({"'-1'", "'nan'", "'0'", "'1.5'", "'nan'", "'-1'", "'nan'", "available:", "'2'", "1=x"});
}  // namespace

BOOST_DATA_TEST_CASE(explain_rejects, kBad, chain, stage, value) {
  auto r = run_cli({"explain", "--dist", kWeather, "--sampler", chain});
  BOOST_TEST(r.rc == 2, chain << ": " << r.err);
  BOOST_TEST(contains(r.err, stage), r.err);
  BOOST_TEST(contains(r.err, value), r.err);
  BOOST_TEST(r.out.empty());
}

// Checked before the model is read: the model path does not even exist.
BOOST_DATA_TEST_CASE(run_rejects_before_any_work, kBad, chain, stage, value) {
  auto r = run_cli({"run", "--model", "/nonexistent/model.bin", "--tokenizer", "/nonexistent/tok.bin", "--sampler", chain});
  BOOST_TEST(r.rc == 2, chain << ": " << r.err);
  BOOST_TEST(contains(r.err, stage), r.err);
  BOOST_TEST(contains(r.err, value), r.err);
  BOOST_TEST(!contains(r.err, "model.bin"), "the sampler is rejected first: " << r.err);
}

BOOST_AUTO_TEST_CASE(unknown_parameter_from_yaml) {
  const fs::path dir = gbtest::temp_dir("yaml-sampler");
  gbtest::write_file(dir / "c.yaml", "sampler:\n  - {name: top-k, kk: 3}\n");
  auto r = run_cli({"run", "--config", (dir / "c.yaml").string(), "--model", "/nonexistent/model.bin", "--tokenizer",
                    "/nonexistent/tok.bin"});
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(contains(r.err, "'top-k'"), r.err);
  BOOST_TEST(contains(r.err, "unknown parameter 'kk'"), r.err);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- run: seeds and traces

BOOST_AUTO_TEST_SUITE(run, *boost::unit_test::precondition(gbtest::NeedsShared()))

namespace {
struct Run {
  std::string text, trace;
  std::vector<json> lines;
};
Run generate(const std::string& chain, const std::string& seed, bool trace = true) {
  static int n = 0;
  const fs::path dir = gbtest::temp_dir("run-seed-" + std::to_string(n++));
  std::vector<std::string> args = cat({"run"}, gbtest::stories_args());
  args = cat(args, {"--prompt", "Once upon a time", "--max-tokens", "60", "--sampler", chain, "--seed", seed});
  if (trace) args = cat(args, {"--trace", (dir / "t.jsonl").string()});
  auto r = run_cli(args);
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  Run out{r.out, trace ? gbtest::read_file(dir / "t.jsonl") : "", trace ? gbtest::read_jsonl(dir / "t.jsonl") : std::vector<json>{}};
  fs::remove_all(dir);
  return out;
}
// The trace bytes with the timing values blanked out.
std::string without_timings(const std::string& t) {
  static const std::regex timing(R"re("(ms|ttft_ms|prefill_tok_s|decode_tok_s)":[-+0-9.eE]+)re");
  return std::regex_replace(t, timing, "\"$1\":_");
}
}  // namespace

BOOST_AUTO_TEST_CASE(same_seed_same_text_and_trace) {
  const Run a = generate("top-p:0.9,temperature:0.8", "42"), b = generate("top-p:0.9,temperature:0.8", "42");
  BOOST_TEST(!a.text.empty());
  BOOST_TEST(a.text == b.text);
  BOOST_TEST(without_timings(a.trace) == without_timings(b.trace));
  BOOST_TEST(contains(a.trace, "\"ms\":"), "the timing fields were there to blank");
  const Run c = generate("top-p:0.9,temperature:0.8", "43");
  BOOST_TEST(a.text != c.text);
  // Recording the stages does not change the draws: the same text without --trace.
  BOOST_TEST(generate("top-p:0.9,temperature:0.8", "42", false).text == a.text);
}

BOOST_AUTO_TEST_CASE(trace_stages_and_draw) {
  const Run a = generate("top-p:0.9,temperature:0.8", "42");
  BOOST_TEST_REQUIRE(a.lines.size() > 2u);
  const json& h = a.lines[0];
  BOOST_TEST(h["seed"] == 42);
  BOOST_TEST(h["rng"] == "pcg32-xsh-rr/splitmix64");
  BOOST_TEST_REQUIRE(h["plugins"]["sampler"].size() == 3u);
  BOOST_TEST(h["plugins"]["sampler"][2]["name"] == "dist");
  int steps = 0;
  for (const auto& s : a.lines) {
    if (s["type"] != "step") continue;
    ++steps;
    const auto& st = s["stages"];
    BOOST_TEST_REQUIRE(st.size() == 3u);
    BOOST_TEST(st[0]["name"] == "top-p");
    BOOST_TEST(st[0]["params"]["p"] == 0.9);
    BOOST_TEST(st[1]["name"] == "temperature");
    BOOST_TEST(st[2]["name"] == "dist");
    // top-p keeps raw mass >= 0.9 (it runs first, on the raw distribution)
    BOOST_TEST(st[0]["mass"].get<double>() >= 0.9 - 1e-5);
    BOOST_TEST(st[0]["mass"].get<double>() <= 1.0 + 1e-5);
    BOOST_TEST(st[1]["kept"] == st[0]["kept"]);  // temperature only reshapes
    BOOST_TEST(st[0]["kept"].get<int>() >= 1);
    for (const auto& x : st) BOOST_TEST(x["top"].size() <= 10u);
    // the draw: u in [0,1), the selected token, its probability in the final distribution
    const auto& d = s["draw"];
    BOOST_TEST(d["u"].get<double>() >= 0.0);
    BOOST_TEST(d["u"].get<double>() < 1.0);
    BOOST_TEST(d["selected"] == s["token"]["id"]);
    for (const auto& t : st[2]["top"])
      if (t["id"] == d["selected"]) BOOST_TEST(std::fabs(t["prob"].get<double>() - d["prob"].get<double>()) <= 1e-6);
    // the step's own prob/top stay the raw model distribution
    BOOST_TEST(s["prob"].get<double>() <= 1.0);
    double cum = 0;
    for (const auto& t : s["top"]) cum += t["prob"].get<double>();
    BOOST_TEST(cum <= 1.0 + 1e-5);
  }
  BOOST_TEST(steps > 1);
}

BOOST_AUTO_TEST_CASE(greedy_traces_no_uniform_and_temperature_zero_is_greedy) {
  const Run g = generate("greedy", "1");
  const Run t0 = generate("temperature:0", "2");
  BOOST_TEST(g.text == t0.text);
  for (const auto& s : g.lines)
    if (s["type"] == "step") BOOST_TEST(s["draw"]["u"].is_null());
}

BOOST_AUTO_TEST_CASE(default_chain_runs_and_is_recorded) {
  const Run d = generate("default", "5");
  std::vector<std::string> names;
  for (const auto& s : d.lines[0]["plugins"]["sampler"]) names.push_back(s["name"]);
  BOOST_TEST(names == (std::vector<std::string>{"top-k", "top-p", "min-p", "temperature", "dist"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(every_sampler_runs_on_a_model) {
  for (const std::string chain :
       {"repetition-penalty:1.3,presence-penalty:0.5,frequency-penalty:0.5,top-k:40,temperature:0.9",
        "typical-p:0.9", "top-n-sigma:1.5", "mirostat-v2:3", "logit-bias:13=-inf;42=2,min-p:0.1"}) {
    const Run r = generate(chain, "3");
    BOOST_TEST(!r.text.empty(), chain);
    BOOST_TEST(r.lines.back()["type"] == "summary", chain);
  }
}

BOOST_AUTO_TEST_CASE(a_yaml_list_names_parameters) {
  const fs::path dir = gbtest::temp_dir("yaml-chain");
  gbtest::write_file(dir / "c.yaml",
                     "sampler:\n  - {name: repetition-penalty, penalty: 1.2, last_n: 16}\n  - top-k:5\n"
                     "  - {name: temperature, temperature: 0.7}\nseed: 11\nmax_tokens: 8\nprompt: The cat\n");
  auto r = run_cli(cat(cat({"run", "--config", (dir / "c.yaml").string()}, gbtest::stories_args()),
                       {"--trace", (dir / "t.jsonl").string()}));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto lines = gbtest::read_jsonl(dir / "t.jsonl");
  const auto& s = lines.at(0)["plugins"]["sampler"];
  BOOST_TEST_REQUIRE(s.size() == 4u);
  BOOST_TEST(s[0]["name"] == "repetition-penalty");
  BOOST_TEST(s[0]["params"]["penalty"] == 1.2);
  BOOST_TEST(s[0]["params"]["last_n"] == 16);
  BOOST_TEST(s[1]["params"]["k"] == 5);
  BOOST_TEST(s[2]["params"]["temperature"] == 0.7);
  BOOST_TEST(s[3]["name"] == "dist");
  for (const auto& l : lines)
    if (l["type"] == "step") BOOST_TEST(l["stages"][1]["kept"].get<int>() <= 5);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_stage_after_greedy_warns_in_run) {
  auto r = run_cli(cat(cat({"run"}, gbtest::stories_args()), {"--max-tokens", "3", "--sampler", "greedy,top-k:5"}));
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(contains(r.err, "warning: sampler stage 'top-k' comes after 'greedy'"), r.err);
}

BOOST_AUTO_TEST_SUITE_END()

// A stage whose parameters make it a no-op (xtc, dry and dynamic-temperature are off by default, as in
// llama.cpp) is named in a warning with a value that turns it on, in run, compare and explain; once
// turned on, the warning is gone.
BOOST_DATA_TEST_CASE(a_stage_that_changes_nothing_is_named_in_a_warning,
                     bdata::make({"xtc", "dry", "dynamic-temperature"}) ^
                         bdata::make({"xtc:probability=0.5", "dry:multiplier=0.8", "dynamic-temperature:temperature=1;range=0.5"}) ^
                         bdata::make({"xtc:probability=0.5;threshold=0.6", "dry:multiplier=0.8;last_n=0", "dynamic-temperature:temperature=1;range=0"}),
                     stage, on, off_again) {
  const std::string warning = "warning: sampler stage '" + std::string(stage) + "' changes nothing: ";
  const auto run = run_cli({"run", "--prompt", "The weather today is", "-n", "2", "--seed", "1", "--sampler", stage});
  BOOST_TEST_REQUIRE(run.rc == 0, run.err);
  BOOST_TEST(contains(run.err, warning), run.err);
  BOOST_TEST(contains(run.err, std::string(on) + " turns it on"), run.err);
  const auto cmp = run_cli({"compare", "-p", "The weather today is", "-s", "dist", "-s", stage, "-N", "2", "-n", "2"});
  BOOST_TEST_REQUIRE(cmp.rc == 0, cmp.err);
  BOOST_TEST(contains(cmp.err, "strategy '" + std::string(stage) + "': sampler stage '" + stage + "' changes nothing: "), cmp.err);
  BOOST_TEST(!contains(cmp.err, "sampler stage 'dist' changes nothing"), cmp.err);
  const auto ex = run_cli({"explain", "--dist", kWeather, "--sampler", stage});
  BOOST_TEST_REQUIRE(ex.rc == 0, ex.err);
  BOOST_TEST(contains(ex.err, warning), ex.err);
  // Turned on: no warning. Other parameter values that also leave it off: warned.
  const auto active = run_cli({"explain", "--dist", kWeather, "--sampler", on});
  BOOST_TEST_REQUIRE(active.rc == 0, active.err);
  BOOST_TEST(!contains(active.err, "changes nothing"), active.err);
  const auto off = run_cli({"explain", "--dist", kWeather, "--sampler", off_again});
  BOOST_TEST_REQUIRE(off.rc == 0, off.err);
  BOOST_TEST(contains(off.err, warning), off.err);
}

// Stages that act with their defaults, and the default chain, are not warned about.
BOOST_AUTO_TEST_CASE(acting_stages_are_not_warned_about) {
  for (const char* chain : {"default", "temperature:0.7", "top-k:5,top-p:0.9", "greedy"}) {
    const auto r = run_cli({"explain", "--dist", kWeather, "--sampler", chain});
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    BOOST_TEST(!contains(r.err, "changes nothing"), chain << ": " << r.err);
  }
}
