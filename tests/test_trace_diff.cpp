// `glassbox trace diff` (exit 0 within tolerance, 1 regression, 2 unusable input), the tolerance profile it
// proposes from the models' weight types, and `run --replay`.
#define BOOST_TEST_MODULE trace_diff
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "glassbox/traces/diff.hpp"
#include "support.hpp"
#include "trace_fixtures.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace gbtest;

namespace {

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

CliResult diff(const fs::path& golden, const fs::path& next, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"trace", "diff", golden.string(), next.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  return run_cli(a);
}

// `glassbox run --replay GOLDEN` (model and tokenizer given) writing `out`, with extra args and env.
CliResult replay(const fs::path& golden, const fs::path& out, std::vector<std::string> extra = {},
                 const std::string& env = "") {
  std::vector<std::string> a = {"run", "--replay", golden.string()};
  for (const auto& x : stories_args()) a.push_back(x);
  a.insert(a.end(), extra.begin(), extra.end());
  a.push_back("--trace");
  a.push_back(out.string());
  return run_cli(a, env);
}

std::vector<json> load(const fs::path& p) { return read_jsonl(p); }

fs::path greedy_basic_trace() {
  return stories_trace("greedy-basic", {"--prompt", "The cat sat", "--max-tokens", "16", "--sampler", "greedy", "--seed", "3"});
}
fs::path greedy_long_trace() {
  return stories_trace("greedy-full-40", {"--prompt", "Once upon a time", "--max-tokens", "40", "--sampler", "greedy",
                                          "--seed", "1", "--trace-level", "full"});
}

struct Named {
  const char* name;
  fs::path (*make)();
};
std::ostream& operator<<(std::ostream& o, const Named& n) { return o << n.name; }
const Named kTraces[] = {{"greedy_full", greedy_full_trace}, {"sampled_basic", sampled_basic_trace}};

namespace traces = glassbox::traces;

// A header's weight_types and the profile `trace diff` proposes for it: what llama.cpp's quantizations of the
// shared models hold (../shared/gguf: norms stay F32, outputs often Q6_K or Q8_0, small tensors F16).
struct TypesCase {
  const char* weight_types;
  const char* profile;     // "" : none
  const char* type;        // the type that decided it ("" : none)
  const char* unprofiled;  // ", "-joined
};
std::ostream& operator<<(std::ostream& o, const TypesCase& c) { return o << '"' << c.weight_types << '"'; }
const TypesCase kTypesCases[] = {
    {"F32:48", "f32", "F32", ""},                                // stories260K-f32.gguf
    {"F16:37, F32:11", "f16", "F16", ""},                        // stories260K-f16.gguf
    {"F16:5, F32:11, Q8_0:32", "q8_0", "Q8_0", ""},              // stories260K-q8_0.gguf
    {"F16:5, F32:11, Q4_0:31, Q8_0:1", "q4_0", "Q4_0", ""},      // stories260K-q4_0.gguf
    {"F32:9, Q4_1:29, Q8_0:1", "q4_1", "Q4_1", ""},              // synth128-q4_1.gguf
    {"F32:3, Q4_K:6, Q6_K:3", "q4_k", "Q4_K", ""},               // synth256-q4_k_m.gguf
    {"F32:3, Q5_K:6, Q6_K:3", "q5_k", "Q5_K", ""},               // a Q5_K_M
    {"F32:3, Q6_K:9", "q6_k", "Q6_K", ""},                       // synth256-q6_k.gguf
    {"F32:9, Q4_0:30, Q6_K:1", "q6_k", "Q6_K", ""},              // llama.cpp's Q4_0 keeps output.weight Q6_K: looser
    {"F32:3, Q2_K:5, Q3_K:3, Q6_K:1", "", "Q6_K", "Q2_K, Q3_K"},  // synth256-q2_k.gguf
    {"F32:9, Q5_1:25, Q8_0:5", "", "Q8_0", "Q5_1"},              // synth128-q5_k_m.gguf (rows not a multiple of 256)
    {"F32:3, IQ4_NL:8, Q6_K:1", "", "Q6_K", "IQ4_NL"},           // synth256-iq4_nl.gguf
    {"BF16:30, F32:11", "", "F32", "BF16"},
    {" q8_0:2 ,f32:1 ", "q8_0", "Q8_0", ""},                      // spacing and case as a hand edit may leave them
    {"", "", "", ""},                                            // an older trace: no types recorded
};

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// The weight types whose names are profiles, for the pairwise check below.
const char* const kProfiledTypes[] = {"F32", "F16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K"};

// `trace` with logits of step 7 moved by 0.01 (a regression under the default tolerances, within every
// profile but f32's) and both headers' weight_types set: written as golden.jsonl and new.jsonl in `dir`.
std::pair<fs::path, fs::path> typed_pair(const std::string& dir_name, const std::string& golden_types, const std::string& new_types) {
  const fs::path dir = temp_dir(dir_name);
  auto lines = load(greedy_full_trace());
  auto set_types = [](json& header, const std::string& types) {
    if (types.empty()) header["model"].erase("weight_types");
    else header["model"]["weight_types"] = types;
  };
  set_types(lines[0], golden_types);
  write_jsonl(dir / "golden.jsonl", lines);
  json& s = lines[1 + 7];
  for (auto& c : s["top"]) c["logit"] = c["logit"].get<double>() + 0.01;
  auto shifted = step_logits(s);
  for (auto& l : shifted) l += 0.01;
  s["logits"] = shifted;
  set_types(lines[0], new_types);
  write_jsonl(dir / "new.jsonl", lines);
  return {dir / "golden.jsonl", dir / "new.jsonl"};
}

std::vector<std::string> hint_lines(const std::string& out) {
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("hint: ", 0) == 0) v.push_back(line);
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(diff_cli, *boost::unit_test::precondition(NeedsShared()))

BOOST_DATA_TEST_CASE(a_trace_against_itself_is_exit_0, bdata::make(kTraces), trace) {
  const auto p = trace.make();
  const auto r = diff(p, p);
  BOOST_TEST(r.rc == 0, r.out << r.err);
  BOOST_TEST(has(r.out, "OK: within tolerance"), r.out);
  BOOST_TEST(has(r.out, "(every step)"), r.out);
  BOOST_TEST(has(r.out, "max |Δlogprob|:  0"), r.out);
}

// Every logit of step 7 (the full list when present, and the top-K list) moved up by 0.01: the
// probabilities do not change at all, the raw model output does.
BOOST_DATA_TEST_CASE(step_7_logits_shifted_by_0_01_is_exit_1_naming_step_7, bdata::make(kTraces), trace) {
  auto lines = load(trace.make());
  json& s = lines[1 + 7];
  BOOST_TEST_REQUIRE(s["step"] == 7);
  for (auto& c : s["top"]) c["logit"] = c["logit"].get<double>() + 0.01;
  if (s.contains("logits")) {  // written back as numbers: a step may write its logits either way
    auto shifted = step_logits(s);
    for (auto& l : shifted) l += 0.01;
    s["logits"] = shifted;
  }
  const fs::path p = temp_dir(std::string("diff-shift-") + trace.name) / "shifted.jsonl";
  write_jsonl(p, lines);
  const auto r = diff(trace.make(), p);
  BOOST_TEST(r.rc == 1, r.out << r.err);
  BOOST_TEST(has(r.out, "first divergent step: step 7 ("), r.out);
  BOOST_TEST(has(r.out, "REGRESSION: 1 difference"), r.out);
  BOOST_TEST(has(r.out, "  step 7: |Δlogit| 0.01 > "), r.out);
  // a tolerance wider than the shift accepts it
  BOOST_TEST(diff(trace.make(), p, {"--atol", "0.02"}).rc == 0);
}

BOOST_AUTO_TEST_CASE(garbage_is_exit_2_with_the_line_number) {
  const fs::path dir = temp_dir("diff-garbage");
  const fs::path junk = dir / "junk.jsonl";
  write_file(junk, "this is not a trace\n");
  auto r = diff(greedy_full_trace(), junk);
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, junk.string() + ":1: not valid JSON"), r.err);
  r = diff(junk, greedy_full_trace());
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, junk.string() + ":1:"), r.err);

  auto lines = read_lines(greedy_full_trace());
  lines[4] = "{\"type\": \"step\", \"step\": 3,";
  const fs::path broken = dir / "broken.jsonl";
  write_lines(broken, lines);
  r = diff(greedy_full_trace(), broken);
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, broken.string() + ":5: not valid JSON"), r.err);
  BOOST_TEST(r.out.empty(), r.out);

  lines = read_lines(greedy_full_trace());
  lines.pop_back();
  write_lines(broken, lines);
  r = diff(greedy_full_trace(), broken);
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, broken.string() + ":13: cut short"), r.err);
  BOOST_TEST(diff(greedy_full_trace(), dir / "missing.jsonl").rc == 2);
}

BOOST_DATA_TEST_CASE(a_replay_of_itself_is_exit_0_with_every_step_compared, bdata::make(kTraces), trace) {
  const auto golden = trace.make();
  const fs::path out = temp_dir(std::string("diff-replay-") + trace.name) / "replay.jsonl";
  const auto run = replay(golden, out);
  BOOST_TEST_REQUIRE(run.rc == 0, run.err);
  const auto g = load(golden), n = load(out);
  BOOST_TEST_REQUIRE(g.size() == n.size());
  // the prompt, limit, seed, level and sampler chain come from the golden's header
  for (const char* k : {"prompt", "prompt_ids", "max_tokens", "seed", "trace_level", "plugins"})
    BOOST_TEST(g[0][k] == n[0][k], k);
  for (std::size_t i = 1; i + 1 < n.size(); ++i) {
    BOOST_TEST(n[i]["forced"] == true);
    BOOST_TEST(n[i]["token"]["id"] == g[i]["token"]["id"]);
  }
  const auto r = diff(golden, out);
  BOOST_TEST(r.rc == 0, r.out << r.err);
  const std::string steps = std::to_string(g.size() - 2);
  BOOST_TEST(has(r.out, "steps compared:  " + steps + " of " + steps + " (every step)"), r.out);
  BOOST_TEST(has(r.out, "token agreement: " + steps + "/" + steps), r.out);
  BOOST_TEST(has(r.out, "replay (" + steps + " forced)"), r.out);
}

// A perturbed model run freely diverges, and diff can only compare the steps before the texts part;
// replayed, every step is compared and the regression is still found.
BOOST_AUTO_TEST_CASE(replay_compares_every_step_after_a_divergence) {
  const auto golden = greedy_long_trace();
  const fs::path dir = temp_dir("diff-perturbed");
  const std::string env = "GLASSBOX_TEST_ROPE_THETA=500000";
  std::vector<std::string> a = {"run"};
  for (const auto& x : stories_args()) a.push_back(x);
  for (const auto& x : {"--prompt", "Once upon a time", "--max-tokens", "40", "--sampler", "greedy", "--seed", "1",
                        "--trace-level", "full", "--trace"})
    a.push_back(x);
  a.push_back((dir / "free.jsonl").string());
  const auto free_run = run_cli(a, env);
  BOOST_TEST_REQUIRE(free_run.rc == 0, free_run.err);
  BOOST_TEST(has(free_run.err, "test-only GLASSBOX_TEST_ROPE_THETA"), free_run.err);
  auto r = diff(golden, dir / "free.jsonl");
  BOOST_TEST(r.rc == 1, r.out);
  BOOST_TEST(has(r.out, "the texts diverge after step"), r.out);

  BOOST_TEST_REQUIRE(replay(golden, dir / "replay.jsonl", {}, env).rc == 0);
  r = diff(golden, dir / "replay.jsonl");
  BOOST_TEST(r.rc == 1, r.out);
  BOOST_TEST(has(r.out, "steps compared:  40 of 40 (every step)"), r.out);
  // where the perturbed model would have gone elsewhere, though it was forced on
  BOOST_TEST(has(r.out, "first token divergence: step"), r.out);
  BOOST_TEST(has(r.out, "(new was teacher-forced to"), r.out);
}

// The chosen token at step 3 replaced by the golden's second candidate: the report shows where each
// side's token ranks in the other's top-K, and stops comparing once the texts differ.
BOOST_AUTO_TEST_CASE(a_different_token_is_exit_1_with_ranks) {
  auto lines = load(greedy_full_trace());
  json& s = lines[1 + 3];
  const json second = s["top"][1];
  s["token"] = {{"id", second["id"]}, {"text", second["text"]}};
  s["draw"]["selected"] = second["id"];
  s["prob"] = second["prob"];
  lines[1 + 4]["input_ids"] = json::array({second["id"]});
  const fs::path p = temp_dir("diff-token") / "token.jsonl";
  write_jsonl(p, lines);
  BOOST_TEST_REQUIRE(run_cli({"trace", "validate", p.string()}).rc == 0);
  const auto r = diff(greedy_full_trace(), p);
  BOOST_TEST(r.rc == 1, r.out);
  BOOST_TEST(has(r.out, "first divergent step: step 3 ("), r.out);
  BOOST_TEST(has(r.out, "is #1 in new's top-10"), r.out);
  BOOST_TEST(has(r.out, "is #2 in golden's top-10"), r.out);
  BOOST_TEST(has(r.out, "steps compared:  4 of 12"), r.out);
  BOOST_TEST(has(r.out, "token agreement: 3/4"), r.out);
}

// An argmax between two candidates equal within tolerance may fall either way after a rebuild.
BOOST_AUTO_TEST_CASE(a_near_tie_under_argmax_is_not_a_regression) {
  auto g = load(greedy_basic_trace());
  json& s = g[1 + 3];
  s["top"][1]["logit"] = s["top"][0]["logit"].get<double>() - 1e-6;
  // equal probabilities too, their sum kept (a step's listed mass stays at most 1: trace_validate's rule)
  const double tied = (s["top"][0]["prob"].get<double>() + s["top"][1]["prob"].get<double>()) / 2;
  s["top"][0]["prob"] = tied;
  s["top"][1]["prob"] = tied;
  auto n = g;
  n.resize(1 + 4);  // the new run stops after its step 3
  n[0]["max_tokens"] = 4;
  json& x = n[1 + 3];
  x["token"] = {{"id", x["top"][1]["id"]}, {"text", x["top"][1]["text"]}};
  x["draw"]["selected"] = x["top"][1]["id"];
  n.push_back(g.back());
  n.back()["generated"] = 4;
  n.back()["stop_reason"] = "max_tokens";
  const fs::path dir = temp_dir("diff-tie");
  write_jsonl(dir / "golden.jsonl", g);
  write_jsonl(dir / "new.jsonl", n);
  auto r = diff(dir / "golden.jsonl", dir / "new.jsonl");
  BOOST_TEST(r.rc == 0, r.out << r.err);
  BOOST_TEST(has(r.out, "near-tie"), r.out);
  // the same flip where the golden's token clearly led is a regression
  const auto original = load(greedy_basic_trace());
  BOOST_TEST_REQUIRE(original[1 + 3]["top"][0]["logit"].get<double>() - original[1 + 3]["top"][1]["logit"].get<double>() > 1e-3);
  for (int k = 0; k < 4; ++k) n[1 + k]["top"] = original[1 + k]["top"];
  r = diff(greedy_basic_trace(), (write_jsonl(dir / "new.jsonl", n), dir / "new.jsonl"));
  BOOST_TEST(r.rc == 1, r.out << r.err);
  BOOST_TEST(has(r.out, "step 3: the sampler chose"), r.out);
}

BOOST_AUTO_TEST_CASE(a_swapped_sampler_stage_is_exit_1) {
  const auto golden = sampled_basic_trace();  // top-k:40,temperature:0.8 seed 7
  const fs::path dir = temp_dir("diff-swap");
  // the chain as configured
  const auto swapped = stories_trace("sampled-basic-swapped", {"--prompt", "Lily and Ben went to the park", "--max-tokens",
                                                               "16", "--sampler", "temperature:0.8,top-k:40", "--seed", "7"});
  auto r = diff(golden, swapped);
  BOOST_TEST(r.rc == 1, r.out);
  BOOST_TEST(has(r.out, "sampler chain differs"), r.out);
  // the stages as run, with the header unchanged (a chain that runs its stages out of order)
  auto lines = load(golden);
  for (std::size_t i = 1; i + 1 < lines.size(); ++i) std::swap(lines[i]["stages"][0], lines[i]["stages"][1]);
  write_jsonl(dir / "stages.jsonl", lines);
  r = diff(golden, dir / "stages.jsonl");
  BOOST_TEST(r.rc == 1, r.out);
  BOOST_TEST(has(r.out, "step 0: stage 1 is temperature, golden top-k"), r.out);
}

BOOST_AUTO_TEST_CASE(other_vocabulary_is_exit_2) {
  auto lines = load(sampled_basic_trace());
  lines[0]["model"]["config"]["vocab_size"] = 1000;
  const fs::path p = temp_dir("diff-vocab") / "vocab.jsonl";
  write_jsonl(p, lines);
  const auto r = diff(sampled_basic_trace(), p);
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, "not comparable"), r.err);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- the profile proposed from the weight types (docs/golden-traces.md#a-profile-from-the-weight-types)

BOOST_AUTO_TEST_SUITE(weight_types_profile)

BOOST_DATA_TEST_CASE(each_mix_gets_its_loosest_types_profile, bdata::make(kTypesCases), c) {
  const auto w = traces::weight_types_profile(c.weight_types);
  BOOST_TEST(w.profile == c.profile);
  BOOST_TEST(w.type == c.type);
  BOOST_TEST(joined(w.unprofiled) == c.unprofiled);
  if (*c.profile) BOOST_TEST(traces::diff_profile(c.profile).has_value(), c.profile << " is not a profile");
}

// For any two types with profiles, the mix gets the looser profile: every bound of it at least the other's.
BOOST_DATA_TEST_CASE(a_mix_of_two_types_takes_the_looser_profile, bdata::make(kProfiledTypes) * bdata::make(kProfiledTypes), a, b) {
  const auto pa = traces::weight_types_profile(std::string(a) + ":1").profile;
  const auto pb = traces::weight_types_profile(std::string(b) + ":1").profile;
  BOOST_TEST_REQUIRE(traces::diff_profile(pa).has_value(), a);
  BOOST_TEST_REQUIRE(traces::diff_profile(pb).has_value(), b);
  const auto mix = traces::weight_types_profile(std::string(a) + ":3, " + b + ":2").profile;
  BOOST_TEST((mix == pa || mix == pb), mix);
  const auto m = *traces::diff_profile(mix);
  for (const auto& p : {*traces::diff_profile(pa), *traces::diff_profile(pb)}) {
    BOOST_TEST(m.atol >= p.atol, mix << " vs " << p.profile);
    BOOST_TEST(m.kl >= p.kl, mix << " vs " << p.profile);
    BOOST_TEST(m.nmse >= p.nmse, mix << " vs " << p.profile);
    BOOST_TEST((p.tokens_exact || !m.tokens_exact), mix << " vs " << p.profile);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(proposed_profile_cli, *boost::unit_test::precondition(NeedsShared()))

// Without --profile or a tolerance, a regression between two traces of one quantized model proposes that
// model's profile (and the proposed profile accepts the difference); F32 weights propose nothing (the
// defaults are float32's); a type without a profile says so.
BOOST_DATA_TEST_CASE(a_regression_proposes_the_profile_of_the_weight_types, bdata::make(kTypesCases), c) {
  const auto [golden, next] = typed_pair("diff-types", c.weight_types, c.weight_types);
  const auto r = diff(golden, next);
  BOOST_TEST(r.rc == 1, r.out << r.err);
  const auto hints = hint_lines(r.out);
  const std::string types = c.weight_types;
  if (*c.profile && std::string(c.profile) != "f32") {
    BOOST_TEST_REQUIRE(hints.size() == 1u, r.out);
    BOOST_TEST(has(hints[0], "both traces' models have " + std::string(c.type) + " weights (" + types + ")"), hints[0]);
    BOOST_TEST(has(hints[0], " --profile " + std::string(c.profile) + ";"), hints[0]);
    BOOST_TEST(has(hints[0], "the default tolerances are float32's"), hints[0]);
    const auto ok = diff(golden, next, {"--profile", c.profile});
    BOOST_TEST(ok.rc == 0, ok.out);
    BOOST_TEST(hint_lines(ok.out).empty(), ok.out);
  } else if (*c.unprofiled) {
    BOOST_TEST_REQUIRE(hints.size() == 1u, r.out);
    BOOST_TEST(has(hints[0], "no tolerance profile is measured for " + std::string(c.unprofiled) + " weights"), hints[0]);
    BOOST_TEST(has(hints[0], "give --atol, --kl and --nmse"), hints[0]);
  } else {
    BOOST_TEST(hints.empty(), r.out);  // F32, or no types recorded
  }
}

BOOST_AUTO_TEST_CASE(a_profile_or_a_tolerance_given_proposes_nothing) {
  const auto [golden, next] = typed_pair("diff-types-given", "F16:5, F32:11, Q8_0:32", "F16:5, F32:11, Q8_0:32");
  BOOST_TEST(hint_lines(diff(golden, next).out).size() == 1u);
  for (const std::vector<std::string>& given : std::vector<std::vector<std::string>>{
           {"--profile", "f32"}, {"--atol", "1e-3"}, {"--rtol", "0"}, {"--kl", "1"}, {"--nmse", "1"}}) {
    const auto r = diff(golden, next, given);
    BOOST_TEST(r.rc == 1, given[0] << ": " << r.out);
    BOOST_TEST(hint_lines(r.out).empty(), given[0] << ": " << r.out);
  }
  // --top is not a tolerance
  BOOST_TEST(hint_lines(diff(golden, next, {"--top", "5"}).out).size() == 1u);
  // and within tolerance there is nothing to propose
  const auto same = diff(golden, golden);
  BOOST_TEST(same.rc == 0, same.out);
  BOOST_TEST(hint_lines(same.out).empty(), same.out);
}

BOOST_AUTO_TEST_CASE(different_weight_types_are_named_and_the_looser_profile_proposed) {
  const auto [golden, next] = typed_pair("diff-types-differ", "F32:48", "F16:5, F32:11, Q4_0:31, Q8_0:1");
  const auto r = diff(golden, next);
  BOOST_TEST(r.rc == 1, r.out);
  const auto hints = hint_lines(r.out);
  BOOST_TEST_REQUIRE(hints.size() == 1u, r.out);
  BOOST_TEST(has(hints[0], "the traces' models have different weight types (golden: F32:48; new: F16:5, F32:11, Q4_0:31, Q8_0:1)"),
             hints[0]);
  BOOST_TEST(has(hints[0], "the loosest type, Q4_0, gives --profile q4_0"), hints[0]);
  // one side without types: the other's, and that the first records none
  const auto [g2, n2] = typed_pair("diff-types-one", "", "F16:37, F32:11");
  const auto one = hint_lines(diff(g2, n2).out);
  BOOST_TEST_REQUIRE(one.size() == 1u);
  BOOST_TEST(has(one[0], "the new trace's model has F16 weights (F16:37, F32:11); the golden's header does not record its weight types"),
             one[0]);
  BOOST_TEST(has(one[0], "--profile f16"), one[0]);
}

// An imported trace's header names the model given to `trace import`, not the weights the engine ran: its
// types are not used, and the hint says to take the engine's.
BOOST_AUTO_TEST_CASE(an_imported_sides_weight_types_do_not_count) {
  auto [golden, next] = typed_pair("diff-types-imported", "F32:48", "F32:48");
  auto lines = load(golden);
  lines[0]["imported"] = {{"dialect", "llamacpp-completion"}, {"file", "q8_0-completion.response.json"}, {"distribution", "logits"}};
  write_jsonl(golden, lines);
  // An imported side is compared on probabilities, which a shift leaves alone: sharpen step 7 instead.
  lines = load(next);
  json& s = lines[1 + 7];
  for (auto& c : s["top"]) c["logit"] = c["logit"].get<double>() * 1.5;
  auto sharper = step_logits(s);
  for (auto& l : sharper) l *= 1.5;
  s["logits"] = sharper;
  write_jsonl(next, lines);
  const auto r = diff(golden, next);
  BOOST_TEST(r.rc == 1, r.out << r.err);
  const auto hints = hint_lines(r.out);
  BOOST_TEST_REQUIRE(hints.size() == 1u, r.out);
  BOOST_TEST(has(hints[0], "the golden is another engine's output (llamacpp-completion)"), hints[0]);
  BOOST_TEST(has(hints[0], "use the profile of the engine's weights"), hints[0]);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(replay_cli, *boost::unit_test::precondition(NeedsShared()))

BOOST_AUTO_TEST_CASE(overrides_win_over_the_golden_header) {
  const fs::path out = temp_dir("replay-override") / "r.jsonl";
  const auto r = replay(sampled_basic_trace(), out, {"--max-tokens", "5", "--trace-level", "full"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto n = load(out);
  BOOST_TEST(n.size() == 7u);  // header, 5 steps, summary
  BOOST_TEST(n[0]["trace_level"] == "full");
  BOOST_TEST(n[0]["seed"] == 7);
  const auto d = diff(sampled_basic_trace(), out);
  BOOST_TEST(d.rc == 0, d.out);  // the common steps agree; the shorter limit is a note
  BOOST_TEST(has(d.out, "max_tokens differ"), d.out);
}

BOOST_AUTO_TEST_CASE(another_model_file_is_a_warning_another_vocabulary_an_error) {
  const fs::path dir = temp_dir("replay-compat");
  auto lines = load(sampled_basic_trace());
  lines[0]["model"]["sha256"] = std::string(64, '0');
  write_jsonl(dir / "sha.jsonl", lines);
  auto r = replay(dir / "sha.jsonl", dir / "out.jsonl");
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(has(r.err, "warning: --replay"), r.err);
  BOOST_TEST(has(r.err, "another model file"), r.err);

  lines[0]["model"]["config"]["vocab_size"] = 1000;
  write_jsonl(dir / "vocab.jsonl", lines);
  r = replay(dir / "vocab.jsonl", dir / "out.jsonl");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, "vocabulary of 1000 tokens"), r.err);
}

BOOST_AUTO_TEST_CASE(a_cut_short_golden_is_refused) {
  const fs::path dir = temp_dir("replay-cut");
  auto lines = read_lines(sampled_basic_trace());
  lines.pop_back();
  write_lines(dir / "cut.jsonl", lines);
  const auto r = replay(dir / "cut.jsonl", dir / "out.jsonl");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, "cut short"), r.err);
}

BOOST_AUTO_TEST_SUITE_END()
