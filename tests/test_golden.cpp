// Golden-trace regression suite (docs/golden-traces.md): tests/golden/*.jsonl are re-run and diffed.
//
//   ctest -R golden                              check the current build against the goldens
//   GLASSBOX_UPDATE_GOLDEN=1 ctest -R golden     rewrite them (then review `git diff tests/golden`)
//
// The greedy golden is also checked against llama2.c's own logits (../shared/golden), so that it is not
// merely what the code under test produced; and a deliberately perturbed model (the test-only
// GLASSBOX_TEST_ROPE_THETA switch) must make the golden diff fail.
#define BOOST_TEST_MODULE golden
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <regex>

#include "glassbox/traces/reader.hpp"
#include "support.hpp"
#include "trace_fixtures.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace gbtest;

namespace {

// One golden trace: how it is produced. "stories260K" runs ../shared/models/stories260K.bin; "toy" runs
// the embedded default model (models/toy/toy.bin, installed next to the binary) and is skipped until that
// model and its golden exist: `GLASSBOX_UPDATE_GOLDEN=1 ctest -R golden` then writes the golden.
struct Golden {
  const char* name;
  const char* model;
  std::vector<std::string> args;
};
std::ostream& operator<<(std::ostream& o, const Golden& g) { return o << g.name; }

const Golden kGoldens[] = {
    // full logits: every one of 20 x 512 is checked against llama2.c below
    {"stories260K-greedy", "stories260K",
     {"--prompt", "Once upon a time", "--max-tokens", "20", "--sampler", "greedy", "--seed", "1", "--trace-level", "full"}},
    {"stories260K-topk40-temp0.8-seed7", "stories260K",
     {"--prompt", "Lily and Ben went to the park", "--max-tokens", "32", "--sampler", "top-k:40,temperature:0.8", "--seed",
      "7"}},
    {"stories260K-penalty-nucleus-seed42", "stories260K",
     {"--prompt", "", "--max-tokens", "32", "--sampler",
      "repetition-penalty:1.1,top-k:40,top-p:0.95,min-p:0.05,temperature:0.8", "--seed", "42"}},
    // The embedded toy model (being built in models/toy/): its goldens join as soon as it is installed.
    {"toy-greedy", "toy", {"--prompt", "", "--max-tokens", "24", "--sampler", "greedy", "--seed", "1", "--trace-level", "full"}},
    {"toy-topk40-temp0.8-seed7", "toy",
     {"--prompt", "", "--max-tokens", "32", "--sampler", "top-k:40,temperature:0.8", "--seed", "7"}},
};

bool updating() {
  const char* v = std::getenv("GLASSBOX_UPDATE_GOLDEN");
  return v && *v && std::string(v) != "0";
}

fs::path golden_path(const Golden& g) { return fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "golden" / (std::string(g.name) + ".jsonl"); }

bool toy_installed() {
  return fs::exists(fs::path(GLASSBOX_BINARY_DIR) / "share" / "glassbox" / "models" / "toy.bin");
}

// Whether this golden can run here; `why` says why not.
bool available(const Golden& g, std::string& why) {
  if (std::string(g.model) == "toy") {
    if (!toy_installed()) return why = "the embedded toy model is not built (models/toy/toy.bin)", false;
    if (!updating() && !fs::exists(golden_path(g)))
      return why = golden_path(g).string() + " does not exist yet: GLASSBOX_UPDATE_GOLDEN=1 ctest -R golden writes it", false;
    return true;
  }
  if (!shared_dir()) return why = "reference data not found (../shared or $GLASSBOX_TEST_DATA)", false;
  return true;
}

std::vector<std::string> model_args(const Golden& g) {
  return std::string(g.model) == "toy" ? std::vector<std::string>{} : stories_args();
}

// `glassbox run` for golden `g` into `out`, optionally replaying `replay`, with `env`.
CliResult run_golden(const Golden& g, const fs::path& out, const fs::path& replay = {}, const std::string& env = "") {
  std::vector<std::string> a = {"run"};
  for (const auto& x : model_args(g)) a.push_back(x);
  if (replay.empty()) {
    for (const auto& x : g.args) a.push_back(x);
  } else {
    a.push_back("--replay");
    a.push_back(replay.string());
  }
  a.push_back("--trace");
  a.push_back(out.string());
  return run_cli(a, env);
}

CliResult diff(const fs::path& golden, const fs::path& next) {
  return run_cli({"trace", "diff", golden.string(), next.string()});
}

// "max |Δlogprob|:  0.0123 (step 4)" -> 0.0123
double reported(const std::string& report, const std::string& what) {
  std::smatch m;
  const std::regex re(std::regex_replace(what, std::regex(R"([|()])"), R"(\$&)") + R"((?: \(bound\))?:\s+([0-9.e+-]+))");
  return std::regex_search(report, m, re) ? std::stod(m[1]) : -1;
}

// Makes a fresh golden reproducible byte for byte where it can be: the machine-specific model and tokenizer
// paths become the project-relative location of ../shared, and the timings (which vary from run to run and
// which nothing compares) become 0, so that a rewrite's `git diff` shows only what the computation changed.
void normalise(const fs::path& p, const Golden& g) {
  auto lines = read_jsonl(p);
  json& h = lines.at(0);
  if (std::string(g.model) == "stories260K") {
    h["model"]["path"] = "../shared/models/stories260K.bin";
    h["tokenizer"]["path"] = "../shared/models/tok512.bin";
    h["plugins"]["tokenizer"]["params"]["path"] = "../shared/models/tok512.bin";
  } else {  // the embedded model: its source location, not this build's copy
    h["model"]["path"] = "models/toy/toy.bin";
    h["tokenizer"]["path"] = "models/toy/toy-tok.bin";
    h["plugins"]["tokenizer"]["params"]["path"] = "models/toy/toy-tok.bin";
  }
  for (auto& l : lines) {
    if (l["type"] == "step") l["ms"] = 0;
    if (l["type"] == "summary")
      for (const char* k : {"ttft_ms", "prefill_tok_s", "decode_tok_s"}) l[k] = 0;
  }
  write_jsonl(p, lines);
}

}  // namespace

BOOST_DATA_TEST_CASE(golden_reruns_and_replays_within_tolerance, bdata::make(kGoldens), g) {
  std::string why;
  if (!available(g, why)) {
    BOOST_TEST_MESSAGE("skipping " << g.name << ": " << why);
    return;
  }
  const fs::path golden = golden_path(g);
  if (updating()) {
    fs::create_directories(golden.parent_path());
    const auto r = run_golden(g, golden);
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    normalise(golden, g);
    BOOST_TEST_MESSAGE("GLASSBOX_UPDATE_GOLDEN: rewrote " << golden.string() << "; review it with git diff");
  }
  BOOST_TEST_REQUIRE(fs::exists(golden), golden.string() << " is missing: GLASSBOX_UPDATE_GOLDEN=1 ctest -R golden writes it");
  BOOST_TEST_REQUIRE(run_cli({"trace", "validate", golden.string()}).rc == 0);

  const fs::path dir = temp_dir(std::string("golden-") + g.name);
  // the same command again, free-running
  auto r = run_golden(g, dir / "rerun.jsonl");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  auto d = diff(golden, dir / "rerun.jsonl");
  BOOST_TEST(d.rc == 0, d.out << d.err);
  BOOST_TEST(d.out.find("(every step)") != std::string::npos, d.out);
  // The committed goldens were written as glassbox.trace/1 and the rerun is /2: the version is no difference.
  BOOST_TEST(d.out.find("glassbox.trace") == std::string::npos, d.out);
  BOOST_TEST_MESSAGE(g.name << ": golden " << read_jsonl(golden)[0]["schema"] << ", rerun " << read_jsonl(dir / "rerun.jsonl")[0]["schema"]);
  BOOST_TEST_MESSAGE(g.name << ": rerun max |Δlogprob| " << reported(d.out, "max |Δlogprob|"));
  // replayed from the golden alone (prompt, chain, seed, level from its header)
  r = run_golden(g, dir / "replay.jsonl", golden);
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  d = diff(golden, dir / "replay.jsonl");
  BOOST_TEST(d.rc == 0, d.out << d.err);
  BOOST_TEST(d.out.find("(every step)") != std::string::npos, d.out);
}

// The check can fail: a RoPE base of 500000 (Llama 3's, a plausible config mix-up) and one 1% off.
const char* const kPerturbedThetas[] = {"500000", "10100"};

BOOST_DATA_TEST_CASE(a_perturbed_rope_base_fails_the_golden_diff, bdata::make(kGoldens) * bdata::make(kPerturbedThetas), g,
                     theta) {
  std::string why;
  if (!available(g, why)) {
    BOOST_TEST_MESSAGE("skipping " << g.name << ": " << why);
    return;
  }
  const fs::path golden = golden_path(g);
  BOOST_TEST_REQUIRE(fs::exists(golden));
  const fs::path dir = temp_dir(std::string("golden-rope-") + g.name + "-" + theta);
  const std::string env = std::string("GLASSBOX_TEST_ROPE_THETA=") + theta;
  for (const bool replayed : {false, true}) {
    const auto r = run_golden(g, dir / "perturbed.jsonl", replayed ? golden : fs::path(), env);
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    BOOST_TEST(r.err.find("test-only GLASSBOX_TEST_ROPE_THETA") != std::string::npos, r.err);
    const auto d = diff(golden, dir / "perturbed.jsonl");
    BOOST_TEST(d.rc == 1, (replayed ? "replayed" : "free run") << " with RoPE base " << theta << ":\n" << d.out << d.err);
    BOOST_TEST(d.out.find("REGRESSION") != std::string::npos);
    BOOST_TEST_MESSAGE(g.name << (replayed ? " replayed" : " free run") << ", RoPE base " << theta << ": max |Δlogprob| "
                              << reported(d.out, "max |Δlogprob|") << ", max KL " << reported(d.out, "max KL"));
  }
}

namespace {

json llama2c_entry(const std::string& prompt) {
  for (const auto& e : read_jsonl(shared("golden/llama2c-stories260K-greedy.jsonl")))
    if (e["prompt"] == prompt) return e;
  return nullptr;
}

}  // namespace

// The greedy golden against the independent llama2.c reference: prompt ids, every chosen token, every
// logit of every step (1e-4 absolute, as ../shared/README.md says), and the text.
BOOST_AUTO_TEST_CASE(greedy_golden_agrees_with_llama2c, *boost::unit_test::precondition(NeedsShared())) {
  const auto t = glassbox::traces::read_trace(golden_path(kGoldens[0]).string());
  BOOST_TEST_REQUIRE(t.full());
  const json ref = llama2c_entry(t.header.prompt);
  BOOST_TEST_REQUIRE(!ref.is_null(), "prompt not in llama2c-stories260K-greedy.jsonl");
  BOOST_TEST(t.header.prompt_ids == ref["prompt_ids"].get<std::vector<std::int32_t>>());
  std::string text;
  double worst = 0;
  for (const auto& s : t.steps) {
    const int pos = s.pos;
    BOOST_TEST_REQUIRE(pos < static_cast<int>(ref["steps"].size()));
    const json& r = ref["steps"][pos];
    BOOST_TEST(r["pos"] == pos);
    BOOST_TEST(s.input_ids.back() == r["input"].get<int>(), "step " << s.step);
    BOOST_TEST(s.token == r["next"].get<int>(), "step " << s.step << ": golden chose " << s.token
                                                       << ", llama2.c's argmax is " << r["next"]);
    const std::vector<double>& a = s.logits;
    const json& b = r["logits"];
    BOOST_TEST_REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i].get<double>()));
    text += s.token_text;
  }
  BOOST_TEST(worst <= 1e-4, "max |logit - llama2.c logit| = " << worst);
  BOOST_TEST_MESSAGE("greedy golden vs llama2.c: max |Δlogit| " << worst << " over " << t.steps.size() << " x "
                                                                 << t.vocab_size() << " logits");
  BOOST_TEST(ref["greedy_continuation"].get<std::string>().rfind(text, 0) == 0,
             "golden text '" << text << "' does not start llama2.c's continuation");
}

// The sampled goldens where they still follow llama2.c's greedy path (at least the prefill): their
// top-K logits are llama2.c's too.
BOOST_AUTO_TEST_CASE(sampled_goldens_agree_with_llama2c_where_comparable, *boost::unit_test::precondition(NeedsShared())) {
  int checked = 0;
  for (const auto& g : kGoldens) {
    if (std::string(g.model) != "stories260K" || !fs::exists(golden_path(g))) continue;
    const auto t = glassbox::traces::read_trace(golden_path(g).string());
    const json ref = llama2c_entry(t.header.prompt);
    if (ref.is_null()) continue;
    for (const auto& s : t.steps) {
      if (static_cast<std::size_t>(s.pos) >= ref["steps"].size()) break;
      const json& r = ref["steps"][s.pos];
      if (s.input_ids.back() != r["input"].get<int>()) break;  // left llama2.c's path
      for (const auto& c : s.top)
        BOOST_TEST(std::abs(c.logit.value_or(HUGE_VAL) - r["logits"][c.id].get<double>()) <= 1e-4,
                   g.name << " step " << s.step << " id " << c.id);
      ++checked;
    }
  }
  BOOST_TEST(checked > 0);
}

BOOST_AUTO_TEST_CASE(goldens_are_small_and_portable) {
  for (const auto& g : kGoldens) {
    const fs::path p = golden_path(g);
    if (!fs::exists(p)) continue;
    BOOST_TEST(fs::file_size(p) < 200'000u, p.string() << " is " << fs::file_size(p) << " bytes");
    const auto h = glassbox::traces::read_trace_header(p.string());
    if (std::string(g.model) == "stories260K") BOOST_TEST(h.model.path == "../shared/models/stories260K.bin");
  }
}
