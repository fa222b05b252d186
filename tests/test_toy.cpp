// The embedded toy model: it answers with no model flags, its weather distribution matches the
// grammar, greedy gives a tagline, and docs/toy-world.md's figures are what the binary prints.
#define BOOST_TEST_MODULE toy
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using gbtest::run_cli;

namespace {

const fs::path kSource = GLASSBOX_SOURCE_DIR;
const fs::path kDoc = kSource / "docs" / "toy-world.md";

bool toy_installed() { return fs::exists(fs::path(GLASSBOX_BINARY_DIR) / "share/glassbox/models/toy.bin"); }
struct NeedsToy {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    boost::test_tools::assertion_result r(toy_installed());
    if (!r) r.message() << "the embedded toy model is not built (models/toy/toy.bin missing)";
    return r;
  }
};

// The grammar's truth (models/toy/grammar.py WEATHER and TAGLINES): the spec this model was trained to.
const std::vector<std::pair<std::string, double>> kWeather = {
    {"sunny", .45}, {"cloudy", .25}, {"warm", .15}, {"rainy", .10}, {"cold", .05}};
const std::vector<std::string> kTaglines = {"Brewed to perfection.", "Your daily cup of joy.", "Wake up and smell the coffee.",
                                            "Every cup tells a story.", "Fresh beans, warm hearts."};
const char* kWeatherPrompt = "The weather today is";

// The prefill step of `glassbox run --prompt P --sampler S --max-tokens 1 --trace`.
json first_step(const std::string& prompt, const std::string& sampler) {
  const fs::path dir = gbtest::temp_dir("toy");
  auto r = run_cli({"run", "--prompt", prompt, "--sampler", sampler, "--max-tokens", "1", "--seed", "1",
                    "--trace", (dir / "t.jsonl").string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  auto lines = gbtest::read_jsonl(dir / "t.jsonl");
  fs::remove_all(dir);
  BOOST_TEST_REQUIRE(lines.size() >= 2u);
  return lines[1];
}

// prob of " word" in a trace's top list (0 when absent).
double prob_of(const json& top, const std::string& word) {
  for (const auto& t : top)
    if (t["text"] == " " + word) return t["prob"].get<double>();
  return 0;
}

// The grammar's distribution at temperature T, computed exactly by glassbox explain (model-free).
json lesson_at(double T) {
  auto r = run_cli({"explain", "--json", "--dist", "sunny=.45,cloudy=.25,warm=.15,rainy=.10,cold=.05", "--sampler",
                    "temperature:" + std::to_string(T) + ",greedy"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  return json::parse(r.out)["stages"][0]["probs"];
}
double lesson_prob(const json& probs, const std::string& word) {
  for (const auto& p : probs)
    if (p["text"] == word) return p["prob"].get<double>();
  return 0;
}

std::string fmt(double x) {
  char b[16];
  std::snprintf(b, sizeof b, "%.3f", x);
  return b;
}

// The figures block of docs/toy-world.md, built from what the binary prints now.
std::string figures() {
  const double temps[] = {0.2, 1.0, 1.2};
  std::ostringstream md;
  md << "| next word | grammar | grammar T=0.2 | model T=0.2 | grammar T=1.0 | model T=1.0 | grammar T=1.2 | model T=1.2 |\n"
     << "|---|---|---|---|---|---|---|---|\n";
  std::vector<json> lesson, model;
  for (double T : temps) {
    lesson.push_back(lesson_at(T));
    // the distribution after the temperature stage, over the whole vocabulary
    model.push_back(first_step(kWeatherPrompt, "temperature:" + fmt(T) + ",greedy")["stages"][0]["top"]);
  }
  for (const auto& [w, p] : kWeather) {
    md << "| " << w << " | " << fmt(p);
    for (std::size_t i = 0; i < 3; ++i) md << " | " << fmt(lesson_prob(lesson[i], w)) << " | " << fmt(prob_of(model[i], w));
    md << " |\n";
  }
  return md.str();
}

const std::string kBegin = "<!-- figures:begin (written by GLASSBOX_UPDATE_DOCS=1 ctest -R test_toy) -->\n";
const std::string kEnd = "<!-- figures:end -->";

}  // namespace

BOOST_AUTO_TEST_SUITE(toy, *boost::unit_test::precondition(NeedsToy()))

BOOST_AUTO_TEST_CASE(runs_with_no_model_flags) {
  auto r = run_cli({"run", "--prompt", kWeatherPrompt, "--max-tokens", "3", "--seed", "3"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(!r.out.empty());
  // With no prompt at all it starts from BOS and still writes text.
  auto b = run_cli({"run", "--max-tokens", "12", "--seed", "5"});
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(b.out.size() > 10u, b.out);
}

// The acceptance bar: each weather word within 0.05 of the grammar, as glassbox measures it.
BOOST_AUTO_TEST_CASE(weather_distribution_matches_the_grammar) {
  const json step = first_step(kWeatherPrompt, "greedy");
  BOOST_TEST(step["phase"] == "prefill");
  double mass = 0;
  for (const auto& [w, p] : kWeather) {
    const double got = prob_of(step["top"], w);
    BOOST_TEST_MESSAGE(w << ": model " << got << ", grammar " << p);
    BOOST_TEST(std::abs(got - p) <= 0.05, w << ": model " << got << " vs grammar " << p);
    mass += got;
  }
  BOOST_TEST(mass > 0.99);  // the five words are (nearly) all the model considers
}

// The same probabilities as the recipe's independent numpy forward (models/toy/check.json).
BOOST_AUTO_TEST_CASE(agrees_with_the_numpy_reference) {
  std::ifstream f(kSource / "models/toy/check.json");
  BOOST_TEST_REQUIRE(f.good());
  const json check = json::parse(f);
  const json step = first_step(kWeatherPrompt, "greedy");
  BOOST_TEST(step["input_ids"] == check["ids"]["weather_prompt"]);
  for (const auto& w : check["weather"]["probabilities"])
    BOOST_TEST(prob_of(step["top"], w["word"]) == w["model"].get<double>(), boost::test_tools::tolerance(2e-3));
}

BOOST_AUTO_TEST_CASE(greedy_writes_a_tagline_of_the_grammar) {
  auto r = run_cli({"run", "--prompt", "Write a tagline for a coffee shop:", "--sampler", "greedy"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  std::string text = r.out;
  text.erase(0, text.find_first_not_of(' '));
  BOOST_TEST_REQUIRE((!text.empty() && text.back() == '\n'));  // stdout ends its line
  text.pop_back();
  BOOST_TEST((std::find(kTaglines.begin(), kTaglines.end(), text) != kTaglines.end()), "'" << text << "' is not a tagline");
}

// docs/toy-world.md shows the figures the binary prints; regenerate them with GLASSBOX_UPDATE_DOCS=1.
BOOST_AUTO_TEST_CASE(doc_figures_are_current) {
  const std::string wrong = gbtest::check_doc_block(kDoc, kBegin, kEnd, figures(), "GLASSBOX_UPDATE_DOCS=1 ctest -R test_toy");
  BOOST_TEST(wrong.empty(), wrong);
}

BOOST_AUTO_TEST_SUITE_END()
