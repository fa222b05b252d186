// xtc, dry and dynamic-temperature against llama.cpp: the cases of its tests/test-sampling.cpp
// (commit c392e50; inputs and expected probabilities transcribed), then more distributions checked
// against reference implementations written here from llama.cpp's definitions — scalar, in float
// as llama.cpp computes, and for dry a naive O(n²) search for repeats instead of its Z-algorithm —
// all through `glassbox explain --json`, within 1e-5.
#define BOOST_TEST_MODULE llamacpp_samplers
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>

#include "support.hpp"

namespace bdata = boost::unit_test::data;
using gbtest::run_cli;
using nlohmann::json;

namespace {

// "p0,p1,..." with entries named by index (explain's bare form): logits ln p, as llama.cpp's tester.
std::string dist_text(const std::vector<float>& p) {
  std::ostringstream os;
  os.precision(9);
  for (std::size_t i = 0; i < p.size(); ++i) os << (i ? "," : "") << p[i];
  return os.str();
}
std::string history_text(const std::vector<int>& h) {
  std::string s;
  for (int t : h) s += (s.empty() ? "" : ",") + std::to_string(t);
  return s;
}

json explain(const std::string& chain, const std::vector<float>& probs, const std::vector<int>& history = {},
             std::uint64_t seed = 0) {
  std::vector<std::string> args{"explain", "--dist", dist_text(probs), "--sampler", chain, "--json", "--seed", std::to_string(seed)};
  if (!history.empty()) args.insert(args.end(), {"--history", history_text(history)});
  auto r = run_cli(args);
  BOOST_TEST_REQUIRE(r.rc == 0, chain << ": " << r.err);
  return json::parse(r.out);
}

// Probability of every token (by id) after stage 0; 0 for a token the stage removed.
std::vector<double> after_first_stage(const json& j, std::size_t n) {
  std::vector<double> p(n, 0.0);
  for (const auto& e : j["stages"][0]["probs"]) p[e["id"].get<int>()] = e["prob"].get<double>();
  return p;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    BOOST_TEST(std::fabs(got[i] - want[i]) < 1e-5, what << ": token " << i << " " << got[i] << " vs " << want[i]);
}

std::vector<double> normalised(std::vector<double> p) {
  const double s = std::accumulate(p.begin(), p.end(), 0.0);
  for (auto& x : p) x /= s;
  return p;
}

// softmax of logits (double), for the references.
std::vector<double> softmax(const std::vector<double>& l) {
  const double m = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  for (std::size_t i = 0; i < l.size(); ++i) p[i] = std::isinf(l[i]) ? 0.0 : std::exp(l[i] - m);
  return normalised(p);
}

std::vector<double> logits_of(const std::vector<float>& probs) {
  std::vector<double> l;
  for (float p : probs) l.push_back(static_cast<double>(std::log(p)));
  return l;
}

// A few distributions from a fixed generator (n tokens, uneven).
std::vector<std::vector<float>> generated(int count, int n, unsigned seed) {
  std::vector<std::vector<float>> out;
  std::uint64_t s = seed;
  auto next = [&] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>((s >> 33) % 1000000) / 1000000.0;
  };
  for (int c = 0; c < count; ++c) {
    std::vector<float> p(n);
    double sum = 0;
    for (auto& x : p) sum += (x = static_cast<float>(0.01 + std::pow(next(), 3)));
    for (auto& x : p) x = static_cast<float>(x / sum);
    out.push_back(p);
  }
  return out;
}

}  // namespace

// ---- XTC (test-sampling.cpp: test_xtc with probability .99, min_keep 0; llama.cpp's expected values are
// the kept probabilities before renormalising, in descending order; here renormalised over what is kept) ----

struct XtcCase {
  std::vector<float> probs;
  float threshold;
  std::vector<double> expected;  // by id, as llama.cpp lists them (unnormalised; 0 = removed)
};
std::ostream& operator<<(std::ostream& os, const XtcCase& c) { return os << "threshold " << c.threshold; }

const std::vector<XtcCase> kXtc{
    {{0.4f, 0.3f, 0.2f, 0.1f}, 0.09f, {0, 0, 0, 0.1}},
    {{0.4f, 0.3f, 0.2f, 0.1f}, 0.19f, {0, 0, 0.2, 0.1}},
    {{0.4f, 0.3f, 0.2f, 0.1f}, 0.29f, {0, 0.3, 0.2, 0.1}},
    {{0.4f, 0.3f, 0.2f, 0.1f}, 0.39f, {0.4, 0.3, 0.2, 0.1}},  // "XTC should not"
};

BOOST_DATA_TEST_CASE(xtc_equals_llamacpp_test_sampling, bdata::make(kXtc), c) {
  std::ostringstream chain;
  chain << "xtc:probability=0.99;threshold=" << c.threshold << ";min_keep=0";
  const json j = explain(chain.str(), c.probs);
  // The coin came from the run's generator and is recorded; with seed 0 it is below .99, so XTC acts.
  BOOST_TEST_REQUIRE(j["stages"][0].contains("u"));
  BOOST_TEST_REQUIRE(j["stages"][0]["u"].get<double>() <= 0.99);
  check_close(after_first_stage(j, c.probs.size()), normalised(c.expected), chain.str());
}

// XTC reference: sort descending, drop the first `last` of the leading run with p >= threshold.
std::vector<double> xtc_reference(const std::vector<float>& probs, float threshold, std::size_t min_keep) {
  const auto p = softmax(logits_of(probs));
  std::vector<int> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  std::size_t last = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (static_cast<float>(p[order[i]]) >= threshold) last = i;
    else break;
  }
  std::vector<double> out = p;
  if (last > 0 && order.size() - last >= min_keep)
    for (std::size_t i = 0; i < last; ++i) out[order[i]] = 0;
  return normalised(out);
}

BOOST_DATA_TEST_CASE(xtc_on_more_distributions, bdata::make({0.05f, 0.1f, 0.15f, 0.3f}) * bdata::xrange(4), threshold, k) {
  const auto probs = generated(4, 12, 11)[k];
  const json j = explain("xtc:probability=1;threshold=" + std::to_string(threshold), probs, {}, 3);
  check_close(after_first_stage(j, probs.size()), xtc_reference(probs, threshold, 1), "xtc");
}

BOOST_AUTO_TEST_CASE(xtc_acts_only_when_the_coin_says_so) {
  // probability .3: over seeds, it acts exactly when the recorded u <= .3; at 0 it never draws.
  const std::vector<float> probs{0.5f, 0.3f, 0.2f};
  int acted = 0;
  for (int seed = 0; seed < 40; ++seed) {
    const json j = explain("xtc:probability=0.3;threshold=0.25", probs, {}, seed);
    const double u = j["stages"][0]["u"].get<double>();
    const bool did = j["stages"][0]["kept"].get<int>() == 2;
    BOOST_TEST(did == (u <= 0.3), "seed " << seed << " u " << u);
    acted += did;
  }
  BOOST_TEST(acted > 0);
  BOOST_TEST(acted < 40);
  const json off = explain("xtc:probability=0", probs);
  BOOST_TEST(!off["stages"][0].contains("u"));
}

// ---- dynamic temperature (test_temp_ext: delta 0, so a plain temperature) ----

BOOST_AUTO_TEST_CASE(dynamic_temperature_equals_llamacpp_test_sampling) {
  const std::vector<float> p{0.1f, 0.2f, 0.3f, 0.4f};
  check_close(after_first_stage(explain("dynamic-temperature:temperature=1;range=0;exponent=1", p), 4), {0.1, 0.2, 0.3, 0.4}, "T=1");
  check_close(after_first_stage(explain("dynamic-temperature:temperature=0;range=0;exponent=1", p), 4), {0, 0, 0, 1}, "T=0");
}

// Reference (llama.cpp's temp-ext, in float): T in [max(0, T - δ), T + δ] by (H / ln n)^exponent.
std::vector<double> temp_ext_reference(const std::vector<float>& probs, float t, float delta, float exponent) {
  std::vector<float> l;
  for (float p : probs) l.push_back(std::log(p));
  const float mx = *std::max_element(l.begin(), l.end());
  float sum = 0;
  std::vector<float> q(l.size());
  for (std::size_t i = 0; i < l.size(); ++i) sum += (q[i] = std::exp(l[i] - mx));
  float h = 0;
  for (auto& x : q) {
    x /= sum;
    if (x > 0) h -= x * std::log(x);
  }
  const float tmin = std::max(0.0f, t - delta), tmax = t + delta;
  const float dyn = tmin + (tmax - tmin) * std::pow(h / -std::log(1.0f / static_cast<float>(l.size())), exponent);
  std::vector<double> scaled;
  for (float x : l) scaled.push_back(static_cast<double>(x / dyn));
  return softmax(scaled);
}

BOOST_DATA_TEST_CASE(dynamic_temperature_on_more_distributions,
                     bdata::make({0.5f, 1.0f, 1.5f}) * bdata::make({0.25f, 0.5f, 1.0f}) * bdata::make({0.5f, 1.0f, 2.0f}) *
                         bdata::xrange(3),
                     temp, range, expo, k) {
  const auto probs = generated(3, 9, 5)[k];
  std::ostringstream chain;
  chain << "dynamic-temperature:temperature=" << temp << ";range=" << range << ";exponent=" << expo;
  check_close(after_first_stage(explain(chain.str(), probs), probs.size()), temp_ext_reference(probs, temp, range, expo), chain.str());
}

// ---- DRY (test_dry; the breaker {3} is token "3"; llama.cpp's context size 1024 holds every case) ----

struct DryCase {
  std::vector<float> probs;
  std::vector<int> history;
  std::vector<double> expected;
  float multiplier, base;
  int allowed, last_n;
  std::string breakers;
};
std::ostream& operator<<(std::ostream& os, const DryCase& c) { return os << history_text(c.history); }

const std::vector<DryCase> kDry{
    {{0.25f, 0.25f, 0.25f, 0.25f}, {0, 1}, {0.25, 0.25, 0.25, 0.25}, 1.0f, 1.1f, 2, 4, ""},
    {{0.25f, 0.25f, 0.25f, 0.25f}, {0, 1, 2, 0, 1}, {0.296923, 0.296923, 0.109232, 0.296923}, 1.0f, 1.1f, 2, 5, ""},
    {{0.2f, 0.2f, 0.2f, 0.2f, 0.2f}, {0, 1, 3, 4, 0, 1}, {0.2, 0.2, 0.2, 0.2, 0.2}, 1.0f, 1.1f, 2, 6, "3"},
    {{0.2f, 0.2f, 0.2f, 0.2f, 0.2f}, {0, 1, 2, 0, 1}, {0.241818, 0.241818, 0.032727, 0.241818, 0.241818}, 2.0f, 1.1f, 2, 5, ""},
    {{0.2f, 0.2f, 0.2f, 0.2f, 0.2f}, {0, 1, 2, 3, 4, 0, 1}, {0.2, 0.2, 0.2, 0.2, 0.2}, 1.0f, 1.1f, 4, 7, ""},
};

std::string dry_chain(float m, float b, int allowed, int last_n, const std::string& breakers) {
  std::ostringstream os;
  os << "dry:multiplier=" << m << ";base=" << b << ";allowed_length=" << allowed << ";last_n=" << last_n << ";breakers=" << breakers;
  return os.str();
}

BOOST_DATA_TEST_CASE(dry_equals_llamacpp_test_sampling, bdata::make(kDry), c) {
  const json j = explain(dry_chain(c.multiplier, c.base, c.allowed, c.last_n, c.breakers), c.probs, c.history);
  check_close(after_first_stage(j, c.probs.size()), c.expected, "dry " + history_text(c.history));
}

// Reference: for every earlier place e in the window, the length of the match between the tokens
// ending at e and those ending at the window's end (capped by the nearest single-token breaker);
// the token after e, if the match reaches allowed_length, would extend it.
std::vector<double> dry_reference(const std::vector<float>& probs, const std::vector<int>& history, float m, float b, int allowed,
                                  int last_n, const std::vector<int>& breaker_tokens) {
  const int n = last_n < 0 ? static_cast<int>(history.size()) : std::min<int>(last_n, static_cast<int>(history.size()));
  const std::vector<int> w(history.end() - n, history.end());
  std::vector<double> l;
  for (float p : probs) l.push_back(static_cast<double>(std::log(p)));
  auto is_breaker = [&](int t) { return std::find(breaker_tokens.begin(), breaker_tokens.end(), t) != breaker_tokens.end(); };
  if (n <= allowed) return softmax(l);
  int limit = n;
  for (int i = 0; i < n; ++i)
    if (is_breaker(w[n - 1 - i])) { limit = i; break; }
  if (limit < allowed) return softmax(l);
  std::map<int, int> longest;
  for (int e = 0; e + 1 < n; ++e) {
    int len = 0;
    while (len <= e && w[e - len] == w[n - 1 - len]) ++len;
    len = std::min(len, limit);
    if (len >= allowed) longest[w[e + 1]] = std::max(longest[w[e + 1]], len);
  }
  for (const auto& [t, len] : longest)
    if (!is_breaker(t) && t < static_cast<int>(l.size())) l[t] -= static_cast<double>(m * std::pow(b, static_cast<float>(len - allowed)));
  return softmax(l);
}

BOOST_AUTO_TEST_CASE(dry_reference_reproduces_llamacpp_cases) {
  // The reference itself agrees with llama.cpp's numbers before it judges anything else.
  for (const auto& c : kDry) {
    std::vector<int> br;
    if (!c.breakers.empty()) br.push_back(std::stoi(c.breakers));
    check_close(dry_reference(c.probs, c.history, c.multiplier, c.base, c.allowed, c.last_n, br), c.expected, "reference");
  }
}

BOOST_DATA_TEST_CASE(dry_on_more_histories, bdata::xrange(24), k) {
  // Histories over 6 tokens with repeats, various windows, allowed lengths and a breaker.
  std::uint64_t s = 1000 + k;
  auto next = [&](int mod) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((s >> 33) % mod);
  };
  const int len = 8 + next(20);
  std::vector<int> pattern{next(6), next(6), next(6)};
  std::vector<int> h;
  while (static_cast<int>(h.size()) < len) h.push_back(next(3) ? pattern[h.size() % 3] : next(6));
  const int allowed = 1 + next(3), last_n = next(2) ? -1 : 4 + next(20);
  const bool with_breaker = next(2);
  const auto probs = generated(1, 6, 77 + k)[0];
  const std::vector<int> br = with_breaker ? std::vector<int>{5} : std::vector<int>{};
  const json j = explain(dry_chain(0.8f, 1.75f, allowed, last_n, with_breaker ? "5" : ""), probs, h);
  check_close(after_first_stage(j, probs.size()), dry_reference(probs, h, 0.8f, 1.75f, allowed, last_n, br),
              "dry " + history_text(h) + " allowed " + std::to_string(allowed) + " last_n " + std::to_string(last_n));
}

BOOST_AUTO_TEST_CASE(new_stages_reject_out_of_range_values) {
  for (const std::string chain : {"xtc:probability=-0.1", "xtc:threshold=1.1", "xtc:min_keep=-1", "dry:multiplier=-1",
                                  "dry:base=0.9", "dry:allowed_length=-1", "dry:last_n=-2", "dynamic-temperature:temperature=-1",
                                  "dynamic-temperature:range=-0.5", "dynamic-temperature:exponent=-1", "xtc:probability=nan"}) {
    auto r = run_cli({"explain", "--dist", "a=.5,b=.5", "--sampler", chain});
    BOOST_TEST(r.rc == 2, chain);
    BOOST_TEST(r.err.find("sampler '" + chain.substr(0, chain.find(':')) + "': parameter '") != std::string::npos, r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
  }
}

BOOST_AUTO_TEST_SUITE(in_a_run, *boost::unit_test::precondition(gbtest::NeedsShared()))

BOOST_AUTO_TEST_CASE(xtc_coin_is_in_the_trace_and_dry_gets_the_vocabulary) {
  const auto dir = gbtest::temp_dir("xtc_trace");
  std::vector<std::string> args{"run"};
  for (const auto& a : gbtest::stories_args()) args.push_back(a);
  for (const std::string a : {"--prompt", "Once upon a time", "--max-tokens", "16", "--seed", "5", "--sampler",
                              "dry:multiplier=0.8;allowed_length=2,min-p:0.05,xtc:probability=0.5;threshold=0.1,temperature:0.9",
                              "--trace"})
    args.push_back(a);
  args.push_back((dir / "t.jsonl").string());
  auto r = run_cli(args);
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto lines = gbtest::read_jsonl(dir / "t.jsonl");
  int with_u = 0, acted = 0;
  for (const auto& l : lines) {
    if (l["type"] != "step") continue;
    const auto& xtc = l["stages"][2];
    BOOST_TEST_REQUIRE(xtc["name"] == "xtc");
    if (xtc.contains("u")) {
      ++with_u;
      const double u = xtc["u"].get<double>();
      BOOST_TEST((u >= 0 && u < 1));
      // Acting removes at least the top candidate whenever two reached the threshold.
      if (u <= 0.5 && xtc["kept"].get<int>() < l["stages"][1]["kept"].get<int>()) ++acted;
    }
    for (std::size_t s = 0; s < l["stages"].size(); ++s)
      if (s != 2) BOOST_TEST(!l["stages"][s].contains("u"));
  }
  BOOST_TEST(with_u > 0);
  BOOST_TEST(acted > 0);
  auto v = run_cli({"trace", "validate", (dir / "t.jsonl").string()});
  BOOST_TEST(v.rc == 0, v.out << v.err);
  // The same seed gives the same text: the coin comes from the run's generator.
  args.back() = (dir / "again.jsonl").string();
  auto again = run_cli(args);
  BOOST_TEST(again.out == r.out);
}

BOOST_AUTO_TEST_SUITE_END()
