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
#include "browser.hpp"
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

// ---------------------------------------------------------------- the figures

namespace {

// The numbers of the tick labels of one axis ("tick-x" or "tick-y") in an SVG, in document order.
std::vector<double> ticks_of(const std::string& svg, const std::string& cls) {
  std::vector<double> v;
  const std::string key = "class=\"" + cls + "\" data-value=\"";
  for (auto p = svg.find(key); p != std::string::npos; p = svg.find(key, p + 1)) v.push_back(std::stod(svg.substr(p + key.size())));
  return v;
}

// Round ticks: evenly spaced, 1, 2 or 5 × 10^k apart, each a whole multiple of the step.
std::string round_ticks_problem(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  if (t.size() < 2) return "fewer than two ticks";
  const double step = t[1] - t[0];
  const double mag = std::pow(10.0, std::floor(std::log10(step) + 1e-9)), m = step / mag;
  if (std::abs(m - 1) > 1e-6 && std::abs(m - 2) > 1e-6 && std::abs(m - 5) > 1e-6) return "step " + std::to_string(step) + " is not 1, 2 or 5 × 10^k";
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i && std::abs(t[i] - t[i - 1] - step) > 1e-6 * step) return "uneven ticks at " + std::to_string(t[i]);
    if (std::abs(t[i] / step - std::round(t[i] / step)) > 1e-6) return std::to_string(t[i]) + " is not a multiple of " + std::to_string(step);
  }
  return "";
}

std::string xml_text(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&quot;" : std::string(1, c);
  return o;
}

}  // namespace

// The ticks (-1.85 and steps of 11.75) and others: always 1, 2 or 5 × 10^k apart, covering the range.
BOOST_AUTO_TEST_CASE(nice_ticks_are_round_and_cover_the_range) {
  const std::vector<std::array<double, 2>> ranges = {{-1.85, 45.15}, {0, 1}, {-0.0123, -0.0011}, {0.3, 0.3}, {-7.2, 0.4}, {3, 1234567}};
  for (const auto& [lo, hi] : ranges) {
    for (int target : {3, 4, 5, 6}) {
      const auto t = cmp::nice_ticks(lo, hi, target);
      BOOST_TEST(round_ticks_problem(t) == "", "[" << lo << ", " << hi << "] target " << target);
      BOOST_TEST(t.front() <= lo + 1e-12);
      BOOST_TEST(t.back() >= hi - 1e-12);
      BOOST_TEST(t.size() <= static_cast<std::size_t>(2 * target + 3));
    }
  }
  const auto t = cmp::nice_ticks(-1.85, 45.15, 4);  // the chart: 20 apart, not 11.75
  BOOST_TEST(t.size() >= 2u);
  BOOST_TEST(t[1] - t[0] == 20.0);
}

// Each figure: every axis's tick labels are round numbers, every strategy is named in the chart, and the
// trade-off chart draws error bars for each strategy it plots.
BOOST_AUTO_TEST_CASE(figures_have_round_ticks_and_label_every_strategy) {
  const auto r = report();
  const auto figs = cmp::figures(r);
  BOOST_TEST_REQUIRE(figs.size() == 2u);
  for (const auto& f : figs) {
    BOOST_TEST(f.svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0u, f.name);
    for (const char* axis : {"tick-x", "tick-y"})
      BOOST_TEST(round_ticks_problem(ticks_of(f.svg, axis)) == "", f.name << " " << axis);
    for (const auto& st : r.strategies)
      BOOST_TEST((f.svg.find("class=\"strategy-label\"") != std::string::npos && f.svg.find(">" + xml_text(st.label) + "</text>") != std::string::npos),
                 f.name << ": strategy " << st.label << " is not labelled");
    BOOST_TEST(f.svg.find("NaN") == std::string::npos, f.name);
    BOOST_TEST(f.svg.find("inf") == std::string::npos, f.name);
  }
  std::size_t plotted = 0;
  for (const auto& st : r.strategies) plotted += std::isfinite(st.samples.logprob.mean);
  std::size_t bars = 0;
  for (auto p = figs[0].svg.find("class=\"error-bar\""); p != std::string::npos; p = figs[0].svg.find("class=\"error-bar\"", p + 1)) ++bars;
  BOOST_TEST(bars == 6 * plotted);  // each: a horizontal and a vertical bar with two caps
  // One entropy panel per strategy; the page shows the same figures.
  std::size_t bands = 0;
  for (auto p = figs[1].svg.find("class=\"entropy-band\""); p != std::string::npos; p = figs[1].svg.find("class=\"entropy-band\"", p + 1)) ++bands;
  BOOST_TEST(bands == r.strategies.size());
  const std::string page = cmp::html(r, "/gb-report/compare.html");
  for (const auto& f : figs) BOOST_TEST(page.find(f.svg) != std::string::npos, f.name << " is not in the page");
}

// The first-token list says what was drawn: a greedy cell whose step-0 list carries zero-probability filler
// lists only the token it drew; a special token reads as </s>, not as its spelling; a deterministic strategy's
// samples are listed once.
namespace {
// A small sweep: greedy (every sample the same text; zero-probability filler in its step-0 list) and a hot chain
// (one sample draws the stop token first).
cmp::Report small_report() {
  cmp::Experiment e;
  e.prompts = {"Hello"};
  e.strategies = {cmp::parse_strategy("greedy"), cmp::parse_strategy("hot=temperature:1.5")};
  e.samples = 4;
  e.max_tokens = 3;
  std::vector<cmp::Run> rs;
  for (int s = 0; s < 2; ++s)
    for (int i = 0; i < 4; ++i) {
      cmp::Run r;
      r.strategy = s, r.sample = i, r.seed = cmp::run_seed(e, 0, s, i);
      const bool stop = s == 1 && i == 3;  // one hot sample draws the stop token first
      r.first = stop ? 2 : s == 0 ? 10 : 10 + i % 2;
      r.first_text = stop ? "\n</s>\n" : r.first == 10 ? " sunny" : " rainy";
      if (!stop) r.tokens = {r.first, 12}, r.pieces = {r.first_text, " day"}, r.text = r.first_text + " day";
      for (std::size_t t = 0; t < r.tokens.size() + stop; ++t) {
        r.entropy.push_back(1.0f);
        r.chain_entropy.push_back(s == 0 ? 0.0f : 1.2f);
        r.logprob.push_back(-0.5f);
      }
      if (s == 0) {
        r.first_expected = {{10, 1.0f}, {11, 0.0f}, {2, 0.0f}, {13, 0.0f}};
        r.first_expected_text = {" sunny", " rainy", "\n</s>\n", " filler"};
      } else {
        r.first_expected = {{10, 0.5f}, {11, 0.3f}, {2, 0.1f}, {13, 0.05f}};
        r.first_expected_text = {" sunny", " rainy", "\n</s>\n", " cloudy"};
      }
      r.stop_reason = stop ? "stop_token" : "max_tokens";
      rs.push_back(r);
    }
  return cmp::make_report(e, rs, 1.0);
}
}  // namespace

BOOST_AUTO_TEST_CASE(markdown_lists_the_first_tokens_drawn) {
  const auto rep = small_report();
  const auto md = cmp::markdown(rep);
  const auto line_of = [&](const std::string& start) {
    const auto at = md.find(start);
    BOOST_TEST_REQUIRE(at != std::string::npos, md);
    return md.substr(at, md.find('\n', at) - at);
  };
  const std::string greedy = line_of("- greedy:"), hot = line_of("- hot:");
  BOOST_TEST(greedy == "- greedy: ` sunny` 4/4 (1.000)", md);
  BOOST_TEST(hot.find("` sunny` 2/4 (0.500)") != std::string::npos, hot);
  BOOST_TEST(hot.find("`</s>` 1/4 (0.100)") != std::string::npos, hot);
  BOOST_TEST(hot.find("allowed, not drawn: ` cloudy` (0.050)") != std::string::npos, hot);
  BOOST_TEST(md.find("\\n</s>\\n") == std::string::npos, md);
  BOOST_TEST(md.find("filler") == std::string::npos, md);
  // greedy's four identical samples: one line, said so
  BOOST_TEST(md.find("all 4 samples are this text") != std::string::npos, md);
  BOOST_TEST(md.find("**greedy**\n\n1. ") != std::string::npos, md);
  BOOST_TEST(md.find("**greedy**\n\n1. \" sunny day\" (max_tokens) — argmax at every step: all 4 samples are this text  \n   `") != std::string::npos, md);
  const auto html = cmp::html(rep, "/gb-report/compare.html");
  BOOST_TEST(html_data(html).find("\"deterministic\":[true,false]") != std::string::npos);
}

// The page in headless Chromium: no console error, both figures inline, the first-token table, and the
// deterministic strategies' samples shown once (a rowspan) without a seed.
BOOST_AUTO_TEST_CASE(page_renders_in_chromium, *boost::unit_test::precondition(gbtest::NeedsChromium{})) {
  const fs::path dir = temp_dir("compare-page");
  const fs::path page = dir / "compare.html";
  {
    // greedy's samples, all one text, once: a cell spanning the rows, without a highlight or a seed
    write_file(dir / "small.html", cmp::html(small_report(), (dir / "small.html").string()));
    const auto b = browse(dir / "small.html", "--dump-dom");
    BOOST_TEST_REQUIRE(b.rc == 0, b.err);
    BOOST_TEST(b.out.find("id=\"console-errors\" data-count=\"0\"") != std::string::npos, b.out.substr(0, 3000));
    const auto p = b.out.find("<td class=\"sample-cell deterministic\" rowspan=\"4\">");
    BOOST_TEST_REQUIRE(p != std::string::npos, b.out.substr(0, 6000));
    const std::string cell = b.out.substr(p, b.out.find("</td>", p) - p);
    BOOST_TEST(cell.find("· seed") == std::string::npos, cell);
    BOOST_TEST(cell.find("--seed") == std::string::npos, cell);
    BOOST_TEST(cell.find("tok diverge") == std::string::npos, cell);
    BOOST_TEST(cell.find("all 4 samples are this text") != std::string::npos, cell);
    BOOST_TEST(b.out.find("&lt;/s&gt;") != std::string::npos, "the stop token by its name in the first-token table");
  }
  write_file(page, cmp::html(report(), page.string()));
  const auto b = browse(page, "--dump-dom");
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(b.out.find("data-ready=\"1\"") != std::string::npos, b.out.substr(0, 2000));
  BOOST_TEST(b.out.find("id=\"console-errors\" data-count=\"0\"") != std::string::npos, b.out.substr(0, 3000));
  BOOST_TEST(b.out.find("id=\"figure-tradeoff\"") != std::string::npos);
  BOOST_TEST(b.out.find("id=\"figure-entropy\"") != std::string::npos);
  std::size_t rows = 0, det = 0;
  for (auto p = b.out.find("class=\"first-row\""); p != std::string::npos; p = b.out.find("class=\"first-row\"", p + 1)) ++rows;
  BOOST_TEST(rows == 12u);  // 2 prompts × 6 strategies
  for (auto p = b.out.find("sample-cell deterministic"); p != std::string::npos; p = b.out.find("sample-cell deterministic", p + 1)) ++det;
  BOOST_TEST(det == 0u);  // the made-up greedy and beam samples differ from one another: each is shown
}

// `--figures`: each figure as SVG and PNG (rsvg-convert), into a folder made for them; Chromium draws each SVG.
BOOST_AUTO_TEST_CASE(figures_are_written_as_svg_and_png) {
  const fs::path dir = temp_dir("compare-figures") / "new" / "figs";
  try {
    cmp::check_figure_tools();
  } catch (const std::exception& e) {
    BOOST_TEST_MESSAGE("skipped: " << e.what());
    return;
  }
  const auto files = cmp::write_figures(report(), dir.string());
  BOOST_TEST(files.size() == 4u);
  for (const char* name : {"tradeoff", "entropy"}) {
    const std::string svg = read_file(dir / (std::string(name) + ".svg")), png = read_file(dir / (std::string(name) + ".png"));
    BOOST_TEST(svg.rfind("<svg", 0) == 0u, name);
    BOOST_TEST(png.rfind("\x89PNG\r\n\x1a\n", 0) == 0u, name);
    // twice the SVG's size: the PNG's IHDR width
    const auto w = static_cast<unsigned>(static_cast<unsigned char>(png[16])) << 24 | static_cast<unsigned>(static_cast<unsigned char>(png[17])) << 16 |
                   static_cast<unsigned>(static_cast<unsigned char>(png[18])) << 8 | static_cast<unsigned>(static_cast<unsigned char>(png[19]));
    BOOST_TEST(w == 2u * static_cast<unsigned>(std::stoi(svg.substr(svg.find("width=\"") + 7))), name);
    if (!chromium().empty()) {
      const auto b = browse(dir / (std::string(name) + ".svg"), "--screenshot=" + (dir / (std::string(name) + "-chromium.png")).string());
      BOOST_TEST(b.rc == 0, b.err);
    }
  }
  for (const auto& e : fs::directory_iterator(dir)) BOOST_TEST(e.path().filename().string().find(".tmp") == std::string::npos);
}
