// The viewer as an instrument: its sampling controls (top-k -> typical-p -> top-p -> min-p -> temperature, re-applied in the page to
// a step's recorded logits) give `glassbox explain`'s distribution for the same logits and chain, within 1e-4,
// in headless Chromium with zero console errors; a 600-step trace does not push the page sideways.
#define BOOST_TEST_MODULE viewer_whatif
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>

#include "browser.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace gbtest;

namespace {

struct Chain {
  int k;
  double p, t;
  double min_p = 0, typical_p = 1;
};
std::ostream& operator<<(std::ostream& o, const Chain& c) {
  return o << "k=" << c.k << " p=" << c.p << " T=" << c.t << " min-p=" << c.min_p << " typical-p=" << c.typical_p;
}

std::string fmt(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  return s.str();
}

// A toy-model trace (no ../shared needed): full (every logit) or basic (top candidates only).
fs::path toy_trace(bool full) {
  const fs::path dir = temp_dir(full ? "whatif-full" : "whatif-basic");
  const fs::path t = dir / "t.jsonl";
  std::vector<std::string> a = {"run", "--prompt", "The", "--max-tokens", "8", "--sampler", "top-k:20,temperature:1.2,dist",
                                "--seed", "4", "--trace", t.string(), "--trace-top", "20"};
  if (full) a.insert(a.end(), {"--trace-level", "full"});
  const auto r = run_cli(a);
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  return t;
}

// The step with the most spread-out distribution: the one where a chain changes the most.
int widest_step(const std::vector<json>& lines) {
  int best = 1;
  for (std::size_t i = 1; i + 1 < lines.size(); ++i)
    if (lines[i]["entropy"].get<double>() > lines[best]["entropy"].get<double>()) best = static_cast<int>(i);
  return best - 1;
}

// The page's distribution after the chain: #whatif-bars' data-dist = [[id, prob], ...].
// (std::regex recurses per character: a page-sized input would overflow the stack, so plain find.)
std::string attribute(const std::string& dom, const std::string& before) {
  const auto a = dom.find(before);
  BOOST_TEST_REQUIRE(a != std::string::npos, "'" << before << "' not in the page: " << dom.substr(0, 2000));
  const auto b = dom.find('"', a + before.size());
  return dom.substr(a + before.size(), b - a - before.size());
}

std::map<int, double> page_dist(const std::string& dom) {
  std::string text = attribute(dom, "id=\"whatif-bars\" data-dist=\"");
  for (std::size_t p; (p = text.find("&quot;")) != std::string::npos;) text.replace(p, 6, "\"");
  std::map<int, double> out;
  for (const auto& e : json::parse(text)) out[e[0].get<int>()] = e[1].get<double>();
  return out;
}

// `glassbox explain` on the same candidates (named by their token id) and chain: its final distribution.
std::map<int, double> explain_dist(const std::vector<std::pair<int, double>>& logits, const Chain& c) {
  double m = -HUGE_VAL, s = 0;
  for (const auto& [id, l] : logits) m = std::max(m, l);
  for (const auto& [id, l] : logits) s += std::exp(l - m);
  std::string dist;
  for (const auto& [id, l] : logits) dist += (dist.empty() ? "" : ",") + std::to_string(id) + "=" + fmt(std::exp(l - m) / s);
  const std::string chain = "top-k:" + std::to_string(c.k) + ",typical-p:" + fmt(c.typical_p) + ",top-p:" + fmt(c.p) +
                            ",min-p:" + fmt(c.min_p) + ",temperature:" + fmt(c.t);
  const auto r = run_cli({"explain", "--dist", dist, "--sampler", chain, "--json"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const json j = json::parse(r.out);
  std::map<int, double> out;
  for (const auto& e : j["stages"].back()["probs"]) out[std::stoi(e["text"].get<std::string>())] = e["prob"].get<double>();
  return out;
}

const Chain kChains[] = {{0, 1.0, 1.0}, {4, 1.0, 0.7}, {0, 0.9, 1.3}, {3, 0.8, 0.5}, {0, 1.0, 0.0}, {10, 0.95, 2.0},
                         {0, 1.0, 1.0, 0.1}, {0, 1.0, 0.8, 0.0, 0.5}, {20, 0.95, 0.8, 0.05, 0.9}};

void check(bool full, const Chain& c) {
  const fs::path trace = toy_trace(full);
  const auto lines = read_jsonl(trace);
  const int step = widest_step(lines);
  const json& st = lines[1 + step];
  std::vector<std::pair<int, double>> logits;
  if (full) {
    const auto all = gbtest::step_logits(st);
    for (std::size_t i = 0; i < all.size(); ++i) logits.emplace_back(static_cast<int>(i), all[i]);
  } else {
    for (const auto& t : st["top"]) logits.emplace_back(t["id"].get<int>(), t["logit"].get<double>());
  }
  const fs::path page = trace.parent_path() / "viewer.html";
  const auto r = run_cli({"trace", "html", trace.string(), "-o", page.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto b = browse(page, "--dump-dom",
                        "#step=" + std::to_string(step) + "&temperature=" + fmt(c.t) + "&top_k=" + std::to_string(c.k) + "&top_p=" + fmt(c.p) +
                            "&min_p=" + fmt(c.min_p) + "&typical_p=" + fmt(c.typical_p));
  BOOST_TEST(b.out.find("id=\"console-errors\" data-count=\"0\"") != std::string::npos, b.out.substr(0, 2000));
  BOOST_TEST(console_lines(b.err).empty(), "console: " << (console_lines(b.err).empty() ? "" : console_lines(b.err)[0]));
  BOOST_TEST(b.out.find("What this step would have looked like") != std::string::npos);
  const auto got = page_dist(b.out);
  const auto want = explain_dist(logits, c);
  BOOST_TEST_REQUIRE(got.size() == want.size(), "page kept " << got.size() << ", explain " << want.size());
  double worst = 0;
  for (const auto& [id, p] : want) {
    BOOST_TEST_REQUIRE(got.count(id) == 1u, "id " << id << " kept by explain, not by the page");
    worst = std::max(worst, std::abs(got.at(id) - p));
  }
  BOOST_TEST(worst <= 1e-4, "max |Δp| " << worst);
  BOOST_TEST_MESSAGE((full ? "full" : "basic") << " step " << step << " " << c << ": " << want.size() << " kept, max |Δp| " << worst);
}

}  // namespace

BOOST_TEST_DONT_PRINT_LOG_VALUE(Chain)

BOOST_AUTO_TEST_SUITE(chromium, *boost::unit_test::precondition(NeedsChromium()))

BOOST_DATA_TEST_CASE(full_trace_controls_match_explain, boost::unit_test::data::make(kChains), c) { check(true, c); }
BOOST_DATA_TEST_CASE(basic_trace_controls_match_explain_on_the_top_candidates, boost::unit_test::data::make(kChains), c) {
  check(false, c);
}

// 600 steps (a toy trace's step repeated, positions renumbered): the page is no wider than the window,
// the footer shows, no console errors; the arrow keys step through it.
BOOST_AUTO_TEST_CASE(a_600_step_trace_fits_the_window) {
  const auto lines = read_jsonl(toy_trace(false));
  json header = lines[0];
  const int n = 600, P = static_cast<int>(header["prompt_ids"].size());
  header["model"]["config"]["seq_len"] = P + n;
  header["max_tokens"] = n;
  std::string text = header.dump() + "\n";
  json prev = lines[1];
  text += prev.dump() + "\n";
  for (int k = 1; k < n; ++k) {
    json s = lines[2];
    s["step"] = k;
    s["pos"] = P - 1 + k;
    s["input_ids"] = json::array({prev["token"]["id"]});
    s["kv"]["tokens"] = P + k;
    text += s.dump() + "\n";
    prev = s;
  }
  text += json({{"type", "summary"}, {"generated", n}, {"stop_reason", "max_tokens"}, {"ttft_ms", 1.0},
                {"prefill_tok_s", 1.0}, {"decode_tok_s", 1.0}}).dump() + "\n";
  const fs::path dir = temp_dir("whatif-long");
  write_file(dir / "long.jsonl", text);
  const auto r = run_cli({"trace", "html", (dir / "long.jsonl").string(), "-o", (dir / "long.html").string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto b = browse(dir / "long.html", "--window-size=1280,800 --dump-dom", "#step=590");
  BOOST_TEST(b.out.find("id=\"console-errors\" data-count=\"0\"") != std::string::npos);
  const int sw = std::stoi(attribute(b.out, "data-scroll-width=\"")), cw = std::stoi(attribute(b.out, "data-client-width=\""));
  BOOST_TEST(sw <= cw, "page " << sw << " px wide in a " << cw << " px window");
  BOOST_TEST(std::stoi(attribute(b.out, "data-footer-height=\"")) > 0);
  BOOST_TEST(b.out.find("step 590 / 599") != std::string::npos);
  // ← → step through the trace (key presses replayed from the address).
  const auto k = browse(dir / "long.html", "--window-size=1280,800 --dump-dom", "#step=10&keys=ArrowRight,ArrowRight,ArrowRight,ArrowLeft");
  BOOST_TEST(k.out.find("step 12 / 599") != std::string::npos, k.out.substr(0, 3000));
  BOOST_TEST(k.out.find("id=\"console-errors\" data-count=\"0\"") != std::string::npos);
}

// "Roll the die": N seeded draws from the distribution after the chain, counted; the same seed gives the
// same counts, every draw is a kept candidate, and a temperature of 0 draws the argmax every time.
BOOST_AUTO_TEST_CASE(the_die_draws_from_the_distribution_after_the_chain) {
  const fs::path trace = toy_trace(true);
  const auto lines = read_jsonl(trace);
  const int step = widest_step(lines);
  const fs::path page = trace.parent_path() / "die.html";
  BOOST_TEST_REQUIRE(run_cli({"trace", "html", trace.string(), "-o", page.string()}).rc == 0);
  auto counts = [&](const std::string& fragment) {
    const auto b = browse(page, "--dump-dom", "#step=" + std::to_string(step) + fragment);
    BOOST_TEST(b.out.find("id=\"console-errors\" data-count=\"0\"") != std::string::npos, b.out.substr(0, 2000));
    std::string text = attribute(b.out, "data-counts=\"");
    for (std::size_t p; (p = text.find("&quot;")) != std::string::npos;) text.replace(p, 6, "\"");
    std::map<int, int> out;
    const json parsed = json::parse(text);
    for (auto it = parsed.begin(); it != parsed.end(); ++it) out[std::stoi(it.key())] = it.value().get<int>();
    BOOST_TEST(std::stoi(attribute(b.out, "data-draws=\"")) == std::accumulate(out.begin(), out.end(), 0, [](int a, auto& x) { return a + x.second; }));
    return std::make_pair(out, page_dist(b.out));
  };
  const auto [a, dist] = counts("&top_k=5&temperature=1&roll=400&seed=3");
  const auto [again, unused] = counts("&top_k=5&temperature=1&roll=400&seed=3");
  BOOST_TEST(a == again);
  int n = 0;
  for (const auto& [id, k] : a) {
    BOOST_TEST(dist.count(id) == 1u, "drew id " << id << ", which the chain cut");
    n += k;
  }
  BOOST_TEST(n == 400);
  BOOST_TEST(a.size() >= 2u, "400 draws over top-5 of the widest step picked one token only");
  // the most likely token is drawn about as often as its probability says (400 draws: within 4 sigma)
  const auto best = std::max_element(dist.begin(), dist.end(), [](auto& x, auto& y) { return x.second < y.second; });
  const double expect = 400 * best->second, sigma = std::sqrt(400 * best->second * (1 - best->second));
  BOOST_TEST(std::abs(a.count(best->first) ? a.at(best->first) - expect : expect) <= 4 * sigma + 1);
  const auto [greedy, gd] = counts("&temperature=0&roll=50&seed=9");
  BOOST_TEST_REQUIRE(greedy.size() == 1u);
  BOOST_TEST(greedy.begin()->second == 50);
}

// The toy model ends its sentence with EOS, stored as "\n</s>\n": the page names it as a special token.
BOOST_AUTO_TEST_CASE(eos_shows_as_a_special_token) {
  const fs::path dir = temp_dir("whatif-eos");
  BOOST_TEST_REQUIRE(run_cli({"run", "--max-tokens", "40", "--sampler", "greedy", "--trace", (dir / "t.jsonl").string()}).rc == 0);
  const auto lines = read_jsonl(dir / "t.jsonl");
  BOOST_TEST_REQUIRE(lines[lines.size() - 2]["token"]["text"] == "\n</s>\n");
  BOOST_TEST_REQUIRE(run_cli({"trace", "html", (dir / "t.jsonl").string(), "-o", (dir / "t.html").string()}).rc == 0);
  const auto b = browse(dir / "t.html", "--dump-dom", "#step=" + std::to_string(lines.size() - 3));
  BOOST_TEST(b.out.find("id=\"console-errors\" data-count=\"0\"") != std::string::npos);
  BOOST_TEST(b.out.find("&lt;/s&gt; (special)") != std::string::npos);
  BOOST_TEST(b.out.find("\\n&lt;/s&gt;\\n") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
