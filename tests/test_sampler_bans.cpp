// Stages that ban tokens outright: no-repeat-ngram against a reference written from Hugging Face's
// NoRepeatNGramLogitsProcessor (through `explain --json`), and `run --ignore-eos` on stories260K.
#define BOOST_TEST_MODULE sampler_bans
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <set>

#include "support.hpp"

namespace bdata = boost::unit_test::data;
using gbtest::run_cli;
using nlohmann::json;

namespace {

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Hugging Face's _get_ngrams / _get_generated_ngrams: the tokens that followed the last n-1 tokens.
std::set<int> hf_banned(const std::vector<int>& ids, int n) {
  std::set<int> out;
  const int len = static_cast<int>(ids.size());
  if (n <= 0 || len + 1 < n) return out;
  const int start = len + 1 - n;
  for (int i = 0; i + n <= len; ++i) {
    bool same = true;
    for (int j = 0; j < n - 1; ++j) same = same && ids[i + j] == ids[start + j];
    if (same) out.insert(ids[i + n - 1]);
  }
  return out;
}

}  // namespace

BOOST_DATA_TEST_CASE(no_repeat_ngram_bans_what_hugging_face_bans, bdata::xrange(1, 5) * bdata::xrange(30), n, k) {
  std::uint64_t s = 17 + 31 * k;
  auto next = [&](int mod) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((s >> 33) % mod);
  };
  std::vector<int> h(1 + next(14));
  for (auto& t : h) t = next(4);  // 4 of the 8 tokens: repeats are frequent
  std::string hist;
  for (int t : h) hist += (hist.empty() ? "" : ",") + std::to_string(t);
  const std::set<int> banned = hf_banned(h, n);
  if (banned.size() == 8) return;  // every token banned: the error case, tested below
  auto r = run_cli({"explain", "--dist", ".2,.15,.15,.1,.1,.1,.1,.1", "--sampler", "no-repeat-ngram:" + std::to_string(n),
                    "--history", hist, "--json"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const json j = json::parse(r.out);
  std::set<int> kept;
  for (const auto& e : j["stages"][0]["probs"]) kept.insert(e["id"].get<int>());
  for (int t = 0; t < 8; ++t) BOOST_TEST((kept.count(t) == 0) == (banned.count(t) == 1), "n " << n << " history " << hist << " token " << t);
}

BOOST_AUTO_TEST_CASE(no_repeat_ngram_weather_and_errors) {
  auto r = run_cli({"explain", "--dist", "sunny=.45,cloudy=.25,warm=.15,rainy=.10,cold=.05", "--sampler", "no-repeat-ngram:2",
                    "--history", "sunny,cloudy,sunny", "--json"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const json j = json::parse(r.out);
  BOOST_TEST(j["stages"][0]["kept"] == 4);
  for (const auto& e : j["stages"][0]["probs"]) {
    BOOST_TEST(e["text"] != "cloudy");
    if (e["text"] == "sunny") BOOST_TEST(std::fabs(e["prob"].get<double>() - 0.6) < 1e-6);
  }
  // n = 1 with every token seen: nothing left, a one-line error naming the stage.
  auto all = run_cli({"explain", "--dist", "a=.5,b=.5", "--sampler", "no-repeat-ngram:1", "--history", "a,b"});
  BOOST_TEST(all.rc != 0);
  BOOST_TEST(all.err.find("no-repeat-ngram") != std::string::npos, all.err);
  auto neg = run_cli({"explain", "--dist", "a=.5,b=.5", "--sampler", "no-repeat-ngram:-1"});
  BOOST_TEST(neg.rc == 2);
  BOOST_TEST(neg.err.find("sampler 'no-repeat-ngram': parameter 'n' = '-1' is below the minimum 0") != std::string::npos, neg.err);
}

BOOST_AUTO_TEST_SUITE(ignore_eos, *boost::unit_test::precondition(gbtest::NeedsShared()))

BOOST_AUTO_TEST_CASE(end_of_generation_tokens_are_banned) {
  const auto dir = gbtest::temp_dir("ignore_eos");
  // A chain that all but forces EOS (id 2 of tok512) at the first step.
  const std::vector<std::string> base = cat(cat({"run"}, gbtest::stories_args()),
                                            {"--prompt", "Once upon a time", "--max-tokens", "12", "--seed", "3",
                                             "--sampler", "logit-bias:2=40,temperature:1"});
  auto plain = run_cli(cat(base, {"--trace", (dir / "plain.jsonl").string()}));
  BOOST_TEST_REQUIRE(plain.rc == 0, plain.err);
  const auto p = gbtest::read_jsonl(dir / "plain.jsonl");
  BOOST_TEST(p.back()["stop_reason"] == "stop_token");
  BOOST_TEST(p.back()["generated"] == 0);

  auto ignored = run_cli(cat(base, {"--ignore-eos", "--trace", (dir / "ignored.jsonl").string()}));
  BOOST_TEST_REQUIRE(ignored.rc == 0, ignored.err);
  const auto t = gbtest::read_jsonl(dir / "ignored.jsonl");
  BOOST_TEST(t.back()["stop_reason"] == "max_tokens");
  BOOST_TEST(t.back()["generated"] == 12);
  // The ban is the chain's first stage, in the header, and no step chose EOS.
  const auto& samplers = t.front()["plugins"]["sampler"];
  BOOST_TEST(samplers[0]["name"] == "logit-bias");
  BOOST_TEST(samplers[0]["params"]["bias"].get<std::string>().find("2=-inf") != std::string::npos);
  for (const auto& line : t)
    if (line["type"] == "step") BOOST_TEST(line["token"]["id"] != 2);
  // The trace validates.
  auto v = run_cli({"trace", "validate", (dir / "ignored.jsonl").string()});
  BOOST_TEST(v.rc == 0, v.out << v.err);
}

BOOST_AUTO_TEST_SUITE_END()
