// `glassbox compare` through the CLI: what greedy and temperature must do to the metrics, first-token
// frequencies against `glassbox explain`, determinism (seed, --jobs, shards), traces, bad experiment
// files, and the HTML report in headless Chromium. Metrics are recomputed here from the runs' tokens.
#define BOOST_TEST_MODULE compare
#include <cmath>
#include <map>
#include <fstream>
#include <set>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "browser.hpp"
#include "glassbox/traces/reader.hpp"
#include "support.hpp"
#include "trace_fixtures.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace gbtest;

namespace {

const std::string kWeather = "The weather today is";

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

json compare_json(const std::vector<std::string>& args) {
  auto r = run_cli(cat({"compare", "--json"}, args));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(!has(r.err, "ETA"), "no progress bar when stderr is not a terminal");
  return json::parse(r.out);
}

json without_timings(json j) {
  j.erase("timings");
  return j;
}

// Two story prompts × greedy, T 0.7, T 1.2 on stories260K.
std::vector<std::string> story_sweep() {
  return cat(stories_args(), {"--prompt", "Once upon a time", "--prompt", "Lily and Ben went to the park", "--strategy",
                              "greedy", "--strategy", "cool=temperature:0.7", "--strategy", "hot=temperature:1.2",
                              "--samples", "8", "--max-tokens", "32", "--seed", "11"});
}

// Independent reimplementations of the definitions in docs/compare.md.
double distinct_n(const std::vector<std::vector<int>>& samples, std::size_t n) {
  std::set<std::vector<int>> grams;
  std::size_t total = 0;
  for (const auto& t : samples)
    for (std::size_t i = 0; i + n <= t.size(); ++i, ++total) grams.insert(std::vector<int>(t.begin() + i, t.begin() + i + n));
  return total ? double(grams.size()) / total : 0.0;
}

// Longest span t[a, b) that is a unit of k tokens repeated at least twice (by brute force).
int longest_loop(const std::vector<int>& t) {
  int best = 0;
  const int n = static_cast<int>(t.size());
  for (int a = 0; a < n; ++a)
    for (int k = 1; a + 2 * k <= n; ++k) {
      int b = a + k;
      while (b < n && t[b] == t[b - k]) ++b;
      if (b - a >= 2 * k) best = std::max(best, b - a);
    }
  return best;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(metrics, *boost::unit_test::precondition(NeedsShared()))

BOOST_AUTO_TEST_CASE(greedy_is_one_continuation_with_the_lowest_chain_entropy_and_heat_adds_diversity) {
  const json j = compare_json(story_sweep());
  const auto& st = j["strategies"];
  BOOST_TEST_REQUIRE(st.size() == 3u);
  for (const auto& c : j["cells"])
    if (c["strategy"] == 0) BOOST_TEST(c["distinct"] == 1, "greedy, prompt " << c["prompt"]);
  const double h_greedy = st[0]["chain_entropy"]["mean"], h_cool = st[1]["chain_entropy"]["mean"],
               h_hot = st[2]["chain_entropy"]["mean"];
  BOOST_TEST(h_greedy < h_cool);
  BOOST_TEST(h_greedy < h_hot);
  BOOST_TEST(st[2]["distinct_2"]["mean"].get<double>() > st[1]["distinct_2"]["mean"].get<double>());
  for (const auto& c : j["cells"])
    if (c["strategy"] == 2) {
      const auto& cool = j["cells"][c["prompt"].get<int>() * 3 + 1];
      BOOST_TEST(c["distinct_2"].get<double>() > cool["distinct_2"].get<double>(), "prompt " << c["prompt"]);
    }
}

BOOST_AUTO_TEST_CASE(metrics_agree_with_their_definitions) {
  const json j = compare_json(story_sweep());
  const int N = j["experiment"]["samples"];
  const auto& runs = j["runs"];
  BOOST_TEST_REQUIRE(runs.size() == 2u * 3u * N);
  for (const auto& c : j["cells"]) {
    std::vector<std::vector<int>> samples;
    std::set<std::vector<int>> distinct;
    double loop = 0, len = 0, lp = 0, steps = 0;
    for (int i = 0; i < N; ++i) {
      const auto& r = runs[(c["prompt"].get<int>() * 3 + c["strategy"].get<int>()) * N + i];
      BOOST_TEST_REQUIRE(r["sample"] == i);
      samples.push_back(r["tokens"].get<std::vector<int>>());
      distinct.insert(samples.back());
      BOOST_TEST(r["loop"].get<int>() == longest_loop(samples.back()));
      loop += longest_loop(samples.back());
      len += samples.back().size();
      // Steps scored: every generated token, and the stop token when one ended the run.
      const double n_steps = samples.back().size() + (r["stop_reason"] == "stop_token" ? 1 : 0);
      lp += r["logprob"].get<double>() * n_steps;
      steps += n_steps;
      BOOST_TEST(std::fabs(r["perplexity"].get<double>() - std::exp(-r["logprob"].get<double>())) <= 1e-9);
    }
    BOOST_TEST(c["distinct"] == distinct.size());
    for (int n = 1; n <= 3; ++n)
      BOOST_TEST(std::fabs(c["distinct_" + std::to_string(n)].get<double>() - distinct_n(samples, n)) <= 1e-12);
    BOOST_TEST(std::fabs(c["loop"]["mean"].get<double>() - loop / N) <= 1e-12);
    BOOST_TEST(std::fabs(c["length"]["mean"].get<double>() - len / N) <= 1e-12);
    BOOST_TEST(std::fabs(c["perplexity_pooled"].get<double>() / std::exp(-lp / steps) - 1) <= 1e-9);
  }
  // The loop metric on the lesson's "the the the": a unit of 1 repeated 3 times is a loop of 3.
  BOOST_TEST(longest_loop({5, 7, 7, 7, 2}) == 3);
  BOOST_TEST(longest_loop({1, 2, 1, 2, 1, 9}) == 5);
}

BOOST_AUTO_TEST_CASE(each_run_writes_a_valid_trace_that_matches_its_metrics) {
  const fs::path dir = temp_dir("compare-traces");
  const json j = compare_json(cat(stories_args(), {"--prompt", "Once upon a time", "--strategy", "greedy", "--strategy",
                                                   "top-k:40,temperature:0.8", "--samples", "3", "--max-tokens", "16",
                                                   "--traces", (dir / "t").string()}));
  BOOST_TEST_REQUIRE(j["runs"].size() == 6u);
  for (const auto& r : j["runs"]) {
    const std::string path = r["trace"];
    BOOST_TEST_REQUIRE(fs::exists(path));
    BOOST_TEST(fs::exists(fs::path(path).replace_extension(".html")), "viewer page beside " << path);
    const auto t = glassbox::traces::read_trace(path);  // throws when it does not validate
    BOOST_TEST(t.schema() == "glassbox.trace/2");       // the version glassbox writes
    BOOST_TEST(t.header.seed == r["seed"].get<std::uint64_t>());
    std::vector<int> tokens = r["tokens"];
    auto chosen = t.tokens();
    if (r["stop_reason"] == "stop_token") chosen.pop_back();
    BOOST_TEST((std::vector<int>(chosen.begin(), chosen.end()) == tokens), path);
    double lp = 0, h = 0;
    for (const auto& s : t.steps) {
      lp += s.logprob;
      h += s.entropy;
    }
    BOOST_TEST(std::fabs(r["logprob"].get<double>() - lp / t.steps.size()) <= 1e-5, path);
    BOOST_TEST(std::fabs(r["entropy"].get<double>() - h / t.steps.size()) <= 1e-5, path);
  }
}

// Sampled strategies' samples over one prompt decode together (--batch, default 8), a batch mixing strategies
// where it spans two: each sample's trace — every logit,
// stage, lens row — is the one it has decoded alone (--batch 1), timings aside (and the prefill's attention
// work, where a sample copied the prompt's K/V from the batch's first).
BOOST_AUTO_TEST_CASE(batched_samples_trace_as_samples_alone) {
  const fs::path dir = temp_dir("compare-batch");
  std::map<std::string, std::vector<json>> traces[2];
  int reused[2] = {0, 0};
  std::set<std::string> prefill_dots_erased;
  for (int b = 0; b < 2; ++b) {
    const fs::path out = dir / (b ? "one" : "batched");
    const json j = compare_json(cat(stories_args(), {"--prompt", "Once upon a time", "--strategy", "top-k:40,temperature:0.9",
                                                     "--strategy", "min-p:0.1,temperature:1.1", "--strategy", "beam:2", "--samples", "5",
                                                     "--max-tokens", "20", "--seed", "5", "--jobs", "1", "--batch", b ? "1" : "3", "--traces",
                                                     out.string(), "--trace-lens", "all"}));
    BOOST_TEST_REQUIRE(j["runs"].size() == 15u);
    for (const auto& r : j["runs"]) {
      std::ifstream in(r["trace"].get<std::string>());
      std::string line;
      auto& lines = traces[b][fs::path(r["trace"].get<std::string>()).filename().string()];
      while (std::getline(in, line)) {
        json l = json::parse(line);
        for (const char* k : {"ms", "ttft_ms", "decode_tok_s", "prefill_tok_s", "batch"}) l.erase(k);
        // the batch's samples after the first copy the prompt's K/V (all but its last position): their prefill
        // says how many, and counts only the attention it did
        if (l.contains("prefix_reused")) {
          ++reused[b];
          BOOST_TEST(l["prefix_reused"].get<int>() > 0);
          l.erase("prefix_reused");
          l.erase("attention_dots");
          prefill_dots_erased.insert(fs::path(r["trace"].get<std::string>()).filename().string());
        }
        lines.push_back(std::move(l));
      }
    }
  }
  BOOST_TEST(reused[1] == 0);  // --batch 1: every sample alone, nothing reused
  // the two sampled strategies' 10 samples in batches of 3, 3 (top-k's last two with min-p's first), 3 and 1
  // (the beams decode alone): 2 + 2 + 2 reuse their batch's first prompt
  BOOST_TEST(reused[0] == 6);
  for (const std::string& name : prefill_dots_erased)
    for (auto& l : traces[1][name])
      if (l.value("phase", "") == "prefill") l.erase("attention_dots");
  BOOST_TEST_REQUIRE(traces[0].size() == 15u);
  for (const auto& [name, lines] : traces[0]) {
    BOOST_TEST_REQUIRE(traces[1].count(name) == 1u, name);
    const auto& other = traces[1].at(name);
    BOOST_TEST_REQUIRE(lines.size() == other.size(), name);
    BOOST_TEST(lines.size() >= 3u, name);
    for (std::size_t i = 0; i < lines.size(); ++i) BOOST_TEST(lines[i] == other[i], name << " line " << i);
  }
}

BOOST_AUTO_TEST_CASE(the_printed_command_reproduces_a_sample) {
  const json j = compare_json(cat(stories_args(), {"--prompt", "Lily's cat", "--strategy", "top-p:0.9,temperature:1.1",
                                                   "--samples", "3", "--max-tokens", "20", "--seed", "5"}));
  for (const auto& r : j["runs"]) {
    std::string cmd = r["command"];
    BOOST_TEST_REQUIRE(cmd.rfind("glassbox run ", 0) == 0u);
    const fs::path out = temp_dir("compare-cmd") / "out";
    cmd = quote(GLASSBOX_BIN) + cmd.substr(8) + " >" + quote(out.string()) + " 2>/dev/null";
    BOOST_TEST_REQUIRE(std::system(cmd.c_str()) == 0, cmd);
    BOOST_TEST(read_file(out) == r["text"].get<std::string>() + "\n", cmd);  // run's stdout ends its line
  }
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- the weather prompt (embedded model)

namespace {
// The model's whole distribution after the weather prompt, from a one-step trace: "t<ID>=p,...".
std::string weather_distribution() {
  const fs::path trace = temp_dir("weather") / "w.jsonl";
  auto r = run_cli({"run", "--prompt", kWeather, "--sampler", "greedy", "--max-tokens", "1", "--trace-top", "1000",
                    "--trace", trace.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto t = glassbox::traces::read_trace(trace.string());
  std::string dist;
  for (const auto& c : t.steps[0].top)
    if (c.prob > 0) dist += (dist.empty() ? "" : ",") + ("t" + std::to_string(c.id)) + "=" + json(c.prob).dump();
  return dist;
}
}  // namespace

BOOST_AUTO_TEST_CASE(first_token_frequencies_converge_to_explains_distribution) {
  const std::vector<std::string> chains = {"greedy", "top-k:3,temperature:0.5", "temperature:1.2", "top-p:0.8"};
  std::vector<std::string> args = {"--prompt", kWeather, "--samples", "2000", "--max-tokens", "1", "--seed", "3"};
  for (const auto& c : chains) args = cat(args, {"--strategy", c});
  const json j = compare_json(args);
  const std::string dist = weather_distribution();
  for (std::size_t s = 0; s < chains.size(); ++s) {
    auto r = run_cli({"explain", "--dist", dist, "--sampler", chains[s], "--json"});
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    const json x = json::parse(r.out);
    std::map<int, double> expected;  // token id -> probability of being drawn
    if (x["draw"]["u"].is_null()) {
      expected[std::stoi(x["draw"]["text"].get<std::string>().substr(1))] = 1.0;
    } else {
      for (const auto& p : x["stages"].back()["probs"]) expected[std::stoi(p["text"].get<std::string>().substr(1))] = p["prob"];
    }
    std::map<int, double> observed;
    const auto& cell = j["cells"][s];
    BOOST_TEST_REQUIRE(cell["strategy"] == s);
    for (const auto& f : cell["first_tokens"]) observed[f["id"]] = f["freq"];
    std::set<int> ids;
    for (const auto& [id, _] : expected) ids.insert(id);
    for (const auto& [id, _] : observed) ids.insert(id);
    double worst = 0;
    for (int id : ids) worst = std::max(worst, std::fabs(observed[id] - expected[id]));
    BOOST_TEST(worst <= 0.03, chains[s] << ": largest |observed - explain| = " << worst);
  }
}

// ---------------------------------------------------------------- determinism

BOOST_AUTO_TEST_SUITE(determinism, *boost::unit_test::precondition(NeedsShared()))

BOOST_AUTO_TEST_CASE(same_seed_same_bytes_and_jobs_do_not_matter) {
  const auto sweep = cat(stories_args(), {"--prompt", "Once upon a time", "--prompt", "The dog", "--strategy", "greedy",
                                          "--strategy", "min-p:0.05,temperature:1.3", "--samples", "5", "--max-tokens", "24"});
  const auto args = cat(sweep, {"--seed", "99"});
  auto a = run_cli(cat({"compare", "--json", "--jobs", "2"}, args));
  auto b = run_cli(cat({"compare", "--json", "--jobs", "2"}, args));
  auto one = run_cli(cat({"compare", "--json", "--jobs", "1"}, args));
  auto unbatched = run_cli(cat({"compare", "--json", "--jobs", "1", "--batch", "1"}, args));  // each sample alone
  BOOST_TEST_REQUIRE((a.rc == 0 && b.rc == 0 && one.rc == 0 && unbatched.rc == 0), a.err + b.err + one.err + unbatched.err);
  // Byte for byte, up to the timings (the last key: keys are sorted).
  auto cut = [](const std::string& s) { return s.substr(0, s.find(",\"timings\":")); };
  BOOST_TEST_REQUIRE(has(a.out, ",\"timings\":"));
  BOOST_TEST(cut(a.out) == cut(b.out));
  BOOST_TEST(cut(a.out) == cut(one.out));
  BOOST_TEST(cut(a.out) == cut(unbatched.out));
  BOOST_TEST(without_timings(json::parse(a.out)) == without_timings(json::parse(one.out)));
  // Another seed, other samples.
  auto c = run_cli(cat(cat({"compare", "--json"}, sweep), {"--seed", "100"}));
  BOOST_TEST_REQUIRE(c.rc == 0, c.err);
  BOOST_TEST(json::parse(c.out)["runs"] != json::parse(a.out)["runs"]);
}

BOOST_AUTO_TEST_CASE(three_shards_merged_equal_the_whole_sweep) {
  const auto args = cat(stories_args(), {"--prompt", "Once upon a time", "--prompt", "Tom had", "--strategy", "greedy",
                                         "--strategy", "t=temperature:1.0", "--samples", "4", "--max-tokens", "16"});
  const fs::path dir = temp_dir("shards");
  std::vector<std::string> files;
  for (int i = 1; i <= 3; ++i) {
    files.push_back((dir / ("s" + std::to_string(i) + ".json")).string());
    auto r = run_cli(cat(cat({"compare", "--shard", std::to_string(i) + "/3", "-o", files.back()}, args), {"--jobs", "1"}));
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    BOOST_TEST(json::parse(read_file(files.back()))["runs"].size() == (i == 1 ? 6u : 5u));  // 16 runs: 6 + 5 + 5
  }
  const auto whole = compare_json(args);
  auto m = run_cli({"compare", "merge", files[2], files[0], files[1], "--json"});
  BOOST_TEST_REQUIRE(m.rc == 0, m.err);
  BOOST_TEST(without_timings(json::parse(m.out)) == without_timings(whole));
  // The Markdown and CSV reports are made from the same data, so they agree too.
  auto md = run_cli({"compare", "merge", files[0], files[1], files[2]});
  auto md_whole = run_cli(cat({"compare"}, args));
  BOOST_TEST(md.out == md_whole.out);
  // A missing or repeated shard is an error naming it.
  auto missing = run_cli({"compare", "merge", files[0], files[2], "--json"});
  BOOST_TEST(missing.rc == 2);
  BOOST_TEST(has(missing.err, "shards 2 of 3 are missing"), missing.err);
  auto twice = run_cli({"compare", "merge", files[0], files[0], files[1], "--json"});
  BOOST_TEST(twice.rc == 2);
  BOOST_TEST(has(twice.err, "given twice"), twice.err);
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------- bad input, exit 2 before any run

BOOST_DATA_TEST_CASE(bad_experiment_files_exit_2_naming_the_problem,
                     bdata::make({"prompts: [a]\nstrategies: [greedy]\ntemprature: 1\n",
                                  "prompts: [a]\nstrategies: []\n",
                                  "prompts: [a]\nstrategies: [greedy]\nsamples: 0\n",
                                  "prompts: [a]\nstrategies: [greedy, 'hot=temperature:-1']\n",
                                  "prompts: [a]\nstrategies: [greedy, nucleus]\n",
                                  "prompts: [a]\nstrategies: [greedy]\nsamples: many\n",
                                  "prompts: [a]\nstrategies: [{label: x, chian: greedy}]\n",
                                  "strategies: [greedy]\n"}) ^
                         bdata::make({"unknown key 'temprature'", "strategies: the list is empty", "samples = 0",
                                      "strategies[1] 'hot': sampler 'temperature'", "unknown sampler 'nucleus'",
                                      "samples (line 3): value has the wrong type", "unknown key 'chian'", "no prompts"}),
                     yaml, why) {
  const fs::path dir = temp_dir("bad-experiment");
  write_file(dir / "e.yaml", yaml);
  auto r = run_cli({"compare", "--experiment", (dir / "e.yaml").string(), "--traces", (dir / "traces").string()});
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(has(r.err, (dir / "e.yaml").string()), r.err);
  BOOST_TEST(has(r.err, why), r.err);
  BOOST_TEST(r.out.empty());
  BOOST_TEST(!fs::exists(dir / "traces"), "no run started");
}

BOOST_AUTO_TEST_CASE(an_experiment_file_sets_everything_and_the_command_line_wins) {
  const fs::path dir = temp_dir("experiment");
  write_file(dir / "prompts.jsonl", "The weather today is\n{\"prompt\": \"Write a tagline for a coffee shop:\"}\n\n");
  write_file(dir / "e.yaml", "prompts_file: " + (dir / "prompts.jsonl").string() +
                                 "\nstrategies:\n  - greedy\n  - warm=temperature:1.5\n  - {label: nucleus, chain: 'top-p:0.5'}\n"
                                 "samples: 3\nmax_tokens: 8\nseed: 4\n");
  const json j = compare_json({"--experiment", (dir / "e.yaml").string(), "--samples", "2"});
  const auto& e = j["experiment"];
  BOOST_TEST(e["prompts"].size() == 2u);
  BOOST_TEST(e["prompts"][1] == "Write a tagline for a coffee shop:");
  BOOST_TEST(e["strategies"][1]["label"] == "warm");
  BOOST_TEST(e["strategies"][1]["chain"] == "temperature:1.5");
  BOOST_TEST(e["strategies"][2]["label"] == "nucleus");
  BOOST_TEST(e["samples"] == 2);
  BOOST_TEST(e["seed"] == 4);
  BOOST_TEST(j["runs"].size() == 2u * 3u * 2u);
  // The CSV: a header, one row per strategy, one per prompt × strategy, every row as wide as the header.
  auto csv = run_cli({"compare", "--experiment", (dir / "e.yaml").string(), "--csv"});
  BOOST_TEST_REQUIRE(csv.rc == 0, csv.err);
  std::vector<std::string> lines;
  for (std::size_t a = 0, b; a < csv.out.size(); a = b + 1) lines.push_back(csv.out.substr(a, (b = csv.out.find('\n', a)) - a));
  BOOST_TEST_REQUIRE(lines.size() == 1u + 3u + 6u);
  auto fields = [](const std::string& l) { return std::count(l.begin(), l.end(), ','); };
  for (const auto& l : lines) BOOST_TEST(fields(l) == fields(lines[0]), l);
}

// ---------------------------------------------------------------- the HTML report

BOOST_AUTO_TEST_SUITE(report, *boost::unit_test::precondition(NeedsShared()) *
                                  boost::unit_test::precondition(NeedsChromium()))

BOOST_AUTO_TEST_CASE(html_report_renders_in_headless_chromium_with_zero_console_errors) {
  const fs::path dir = temp_dir("compare-html");
  const fs::path page = dir / "report.html";
  auto r = run_cli(cat(cat({"compare"}, stories_args()), {"--prompt", "Once upon a time", "--prompt", "</script><b>x</b>",
                                        "--strategy", "greedy", "--strategy", "top-k:40,temperature:0.8", "--strategy",
                                        "temperature:1.2", "--samples", "3", "--max-tokens", "24", "--traces",
                                        (dir / "traces").string(), "--html", page.string()}));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string html = read_file(page);
  for (const char* remote : {"<script src", "<link", "src=\"http", "href=\"http", "@import", "fetch("})
    BOOST_TEST(!has(html, remote), remote);
  BOOST_TEST(!has(html, "<b>x</b>"), "the prompt cannot break out of the data element");

  const auto b = browse(page, "--dump-dom");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  const std::string& dom = b.out;
  BOOST_TEST(has(dom, "data-ready=\"1\""), "the report's script did not finish");
  BOOST_TEST(has(dom, "id=\"console-errors\" data-count=\"0\""), dom.substr(0, 2000));
  BOOST_TEST(console_lines(b.err).empty(), "console: " << (console_lines(b.err).empty() ? "" : console_lines(b.err)[0]));
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (auto p = dom.find(what); p != std::string::npos; p = dom.find(what, p + 1)) ++n;
    return n;
  };
  BOOST_TEST(count("class=\"strategy-row\"") == 3u);
  // greedy's three samples are one text per prompt: shown once, in a cell spanning the rows (docs/compare.md)
  BOOST_TEST(count("class=\"sample-cell\"") == 2u * 2u * 3u);
  BOOST_TEST(count("class=\"sample-cell deterministic\" rowspan=\"3\"") == 2u);
  BOOST_TEST(count("class=\"cell-dot\"") == 6u);
  BOOST_TEST(count("class=\"strategy-dot\"") == 3u);
  BOOST_TEST(count("class=\"strategy-label\"") == 2u * 3u);  // in both figures
  BOOST_TEST(count("class=\"entropy-line\"") == 3u);         // one panel per strategy
  BOOST_TEST(count("class=\"chain-entropy-line\"") == 3u);
  BOOST_TEST(count("class=\"first-row\"") == 2u * 3u);
  BOOST_TEST(count("class=\"tok diverge\"") >= 1u, "some sample diverges from the others");
  BOOST_TEST(has(dom, "&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;"), "the prompt is shown as text");
  // Each sample links to its trace's viewer page, which exists beside the report.
  BOOST_TEST(count("class=\"trace-link\"") == 2u * (2u * 3u + 1u));
  for (auto p = dom.find("class=\"trace-link\" href=\""); p != std::string::npos;
       p = dom.find("class=\"trace-link\" href=\"", p + 1)) {
    const auto start = p + std::string("class=\"trace-link\" href=\"").size();
    std::string href = dom.substr(start, dom.find('"', start) - start);
    href = href.substr(0, href.find('#'));
    BOOST_TEST(fs::exists(dir / href), href);
  }
  // The reproduce commands are there, whole.
  BOOST_TEST(count("class=\"command\">glassbox run ") == 2u * (2u * 3u + 1u));
}

BOOST_AUTO_TEST_SUITE_END()
