// `glassbox compare`'s report formats, without a model: a made-up sweep (every kind of strategy: sampler
// chains, beam search, speculative decoding, a grammar; an infinite perplexity; a replacement character; text that
// Markdown and CSV must escape) goes through make_report, and its JSON (the versioned glassbox.compare/1),
// Markdown, CSV and the HTML page's embedded data must be byte for byte the files in tests/data/compare-report/.
// Those were written by the code before the report was typed (#27: make_report built JSON that the writers
// read back by key), so they pin the format across that change and any later one.
//
//   GLASSBOX_UPDATE_GOLDEN=1 ctest -R compare_report    rewrite them (then review `git diff tests/data`)
#define BOOST_TEST_MODULE compare_report
#include <cmath>
#include <cstdlib>
#include <limits>

#include <boost/test/unit_test.hpp>

#include "../cli/compare.hpp"
#include "glassbox/traces/schema.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
namespace cmp = glassbox::cli::compare;
using nlohmann::json;
using namespace gbtest;

namespace {

bool updating() {
  const char* v = std::getenv("GLASSBOX_UPDATE_GOLDEN");
  return v && *v && std::string(v) != "0";
}

fs::path golden(const std::string& name) { return fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "data" / "compare-report" / name; }

// `now` against the golden file `name` (or, with GLASSBOX_UPDATE_GOLDEN, written to it).
void check_golden(const std::string& name, const std::string& now) {
  if (updating()) {
    write_file(golden(name), now);
    BOOST_TEST_MESSAGE("GLASSBOX_UPDATE_GOLDEN: rewrote " << golden(name).string());
    return;
  }
  BOOST_TEST_REQUIRE(fs::exists(golden(name)), golden(name).string() << " is missing: GLASSBOX_UPDATE_GOLDEN=1 writes it");
  const std::string want = read_file(golden(name));
  BOOST_TEST(now == want, name << " differs from " << golden(name).string());
}

cmp::Experiment experiment() {
  cmp::Experiment e;
  e.model = "models/made-up.bin";
  e.prompts = {"Once upon a time", "A | pipe, a \"quote\",\na newline and a `tick`"};
  e.strategies = {cmp::parse_strategy("greedy"),
                  cmp::parse_strategy("hot=temperature:1.2"),
                  cmp::parse_strategy("beam:2"),
                  cmp::parse_strategy("wide=beam:width=3;length_penalty=0.5"),
                  cmp::parse_strategy("spec=speculative:draft=draft.bin;k=3;draft_tokenizer=tok.bin;chain=grammar:file=g.gbnf,temperature:0.8"),
                  {"g, \"quoted\" | piped", "grammar:file=g.gbnf"}};
  e.samples = 3;
  e.seed = 18446744073709551557ull;  // beyond a double's 53 bits
  e.max_tokens = 8;
  e.ignore_eos = true;
  return e;
}

// Run (p, s, i) of the made-up sweep: tokens with repeats (loops, repeated n-grams), per-step figures that
// are not round numbers, a first-token distribution that leaves some chosen tokens out and lists some never
// chosen, and the strategy-specific counters.
cmp::Run run(const cmp::Experiment& e, int p, int s, int i) {
  cmp::Run r;
  r.prompt = p, r.strategy = s, r.sample = i;
  r.seed = cmp::run_seed(e, p, s, i);
  const int k = (p * 6 + s) * 3 + i;
  const int len = 1 + (k * 5) % 8;
  const bool greedyish = s == 0 || s == 2 || s == 3;
  for (int t = 0; t < len; ++t) r.tokens.push_back(greedyish ? 10 + t % (2 + p) : 10 + (k * 7 + t * (t + i)) % 13);
  for (auto id : r.tokens) r.pieces.push_back(id == 17 ? std::string("\xEF\xBF\xBD|") : " t" + std::to_string(id));
  for (const auto& x : r.pieces) r.text += x;
  const int steps = len + (k % 3 == 0 ? 1 : 0);  // the step that chose the stop token
  for (int t = 0; t < steps; ++t) {
    r.entropy.push_back(0.1f * static_cast<float>(1 + (k + t) % 7) / 3.0f);
    r.chain_entropy.push_back(greedyish ? 0.0f : 0.07f * static_cast<float>(1 + (k * t) % 5));
    r.logprob.push_back(-0.013f * static_cast<float>(1 + (k + 3 * t) % 11));
  }
  if (p == 1 && s == 1 && i == 2) r.logprob.back() = -std::numeric_limits<float>::infinity();  // p = 0 was drawn
  r.first = r.tokens.empty() ? 1 : r.tokens[0];
  r.first_text = r.tokens.empty() ? "</s>" : r.pieces[0];
  if (greedyish) {
    r.first_expected = {{r.first, 1.0f}};
    r.first_expected_text = {r.first_text};
  } else {
    r.first_expected = {{10, 0.4f}, {12, 0.25f}, {99, 0.125f}, {13, 0.1f}};
    r.first_expected_text = {" t10", " t12", " t99", " t13"};
  }
  r.stop_reason = k % 3 == 0 ? "stop_token" : k % 5 == 0 ? "context_full" : "max_tokens";
  r.trace = s == 1 ? "/gb-report/traces/p" + std::to_string(p) + "-s1-n" + std::to_string(i) + ".jsonl" : "";
  r.ms = 1.25 * (k + 1);
  if (s == 2 || s == 3) {
    r.beam_forwards = steps * (s == 2 ? 2 : 3) - 1;
    r.beam_kv_copies = k % 4;
  }
  if (s == 4) {
    glassbox::SpeculativeSummary sp;
    sp.k = 3, sp.rounds = 1 + len / 2, sp.draft_forwards = 3 * sp.rounds, sp.proposed = 3 * sp.rounds;
    sp.accepted = k % (sp.proposed + 1), sp.tokens = steps;
    r.speculative = sp;
  }
  if (s == 4 || s == 5) {
    r.grammar_steps = steps;
    r.grammar_removed = 509.0 * steps - k;
    r.grammar_removed_mass = 0.9977 * steps - 0.001 * k;
  }
  return r;
}

std::vector<cmp::Run> runs(const cmp::Experiment& e) {
  std::vector<cmp::Run> out;
  // Not in sweep order: make_report puts them in order.
  for (int p = static_cast<int>(e.prompts.size()) - 1; p >= 0; --p)
    for (int s = 0; s < static_cast<int>(e.strategies.size()); ++s)
      for (int i = e.samples - 1; i >= 0; --i) out.push_back(run(e, p, s, i));
  return out;
}

cmp::Report report() {
  const auto e = experiment();
  cmp::Report r = cmp::make_report(e, runs(e), 2.5);
  r.model_sha256 = "0123456789abcdef";
  return r;
}

// The JSON the HTML page embeds (its data element), as it is in the page.
std::string html_data(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"compare-data\">";
  const auto a = page.find(open);
  BOOST_TEST_REQUIRE(a != std::string::npos);
  const auto b = page.find("</script>", a);
  BOOST_TEST_REQUIRE(b != std::string::npos);
  return page.substr(a + open.size(), b - a - open.size()) + "\n";
}

}  // namespace

BOOST_AUTO_TEST_CASE(json_is_glassbox_compare_1_byte_for_byte) {
  check_golden("report.json", glassbox::traces::dump(cmp::to_json(report())) + "\n");
}

BOOST_AUTO_TEST_CASE(markdown_is_byte_for_byte) { check_golden("report.md", cmp::markdown(report())); }

BOOST_AUTO_TEST_CASE(csv_is_byte_for_byte) { check_golden("report.csv", cmp::csv(report())); }

BOOST_AUTO_TEST_CASE(html_embeds_the_same_data) {
  check_golden("report.html-data.json", html_data(cmp::html(report(), "/gb-report/compare.html")));
}

// The typed report's optional figures are where the strategy kinds put them, and to_json writes an object
// exactly for each one present.
BOOST_AUTO_TEST_CASE(optional_figures_are_where_the_strategies_put_them) {
  const auto r = report();
  const json j = cmp::to_json(r);
  BOOST_TEST_REQUIRE(r.strategies.size() == 6u);
  for (std::size_t s = 0; s < r.strategies.size(); ++s) {
    const auto& st = r.strategies[s];
    BOOST_TEST(st.beam.has_value() == (s == 2 || s == 3), "strategy " << s);
    BOOST_TEST(st.speculative.has_value() == (s == 4), "strategy " << s);
    BOOST_TEST(st.grammar.has_value() == (s == 4 || s == 5), "strategy " << s);
    BOOST_TEST(j["strategies"][s].contains("beam") == st.beam.has_value());
    BOOST_TEST(j["strategies"][s].contains("speculative") == st.speculative.has_value());
    BOOST_TEST(j["strategies"][s].contains("grammar") == st.grammar.has_value());
  }
  BOOST_TEST(r.strategies[3].beam->width == 3);
  BOOST_TEST(r.strategies[3].beam->length_penalty == 0.5);
  BOOST_TEST(r.strategies[4].speculative->draft_tokenizer == "tok.bin");
  BOOST_TEST(j["strategies"][4]["speculative"]["draft_tokenizer"] == "tok.bin");
  for (std::size_t k = 0; k < r.runs.size(); ++k) {
    const auto& run = r.runs[k];
    BOOST_TEST(run.speculative.has_value() == (run.strategy == 4));
    BOOST_TEST(run.grammar.has_value() == (run.strategy == 4 || run.strategy == 5));
    BOOST_TEST(j["runs"][k].contains("speculative") == run.speculative.has_value());
    BOOST_TEST(j["runs"][k].contains("grammar") == run.grammar.has_value());
  }
  BOOST_TEST(j["model_sha256"] == "0123456789abcdef");
  auto unset = r;
  unset.model_sha256.reset();
  BOOST_TEST(!cmp::to_json(unset).contains("model_sha256"));
  // The expected probability of a first token: null in the JSON where it was not in the step-0 top 10.
  for (std::size_t c = 0; c < r.cells.size(); ++c)
    for (std::size_t f = 0; f < r.cells[c].first_tokens.size(); ++f)
      BOOST_TEST(j["cells"][c]["first_tokens"][f]["expected"].is_null() == !r.cells[c].first_tokens[f].expected.has_value());
}
