// `glassbox trace validate` and the reader: every way a trace can be broken is an exit 2 naming the line.
#define BOOST_TEST_MODULE trace_validate
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "glassbox/error.hpp"
#include "glassbox/traces/reader.hpp"
#include "glassbox/traces/schema.hpp"
#include "support.hpp"
#include "trace_fixtures.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace gbtest;

BOOST_AUTO_TEST_SUITE(validate, *boost::unit_test::precondition(NeedsShared()))

BOOST_AUTO_TEST_CASE(real_traces_are_valid) {
  for (const auto& p : {greedy_full_trace(), sampled_basic_trace()}) {
    const auto r = run_cli({"trace", "validate", p.string()});
    BOOST_TEST(r.rc == 0, r.err);
    BOOST_TEST(r.out.find("valid glassbox.trace/2,") != std::string::npos, r.out);  // what this glassbox writes
    const auto t = glassbox::traces::read_trace(p.string());
    BOOST_TEST(t.complete());
    BOOST_TEST(t.steps.size() == t.step_lines.size());
    BOOST_TEST(t.step_lines.front() == 2);
    BOOST_TEST(t.summary_line == static_cast<int>(t.steps.size()) + 2);
  }
}

// One way to break the greedy trace (12 steps: header on line 1, steps on lines 2..13, summary on 14),
// the line the error must name, and a word the message must contain.
struct Breakage {
  const char* name;
  int line;
  const char* expect;
  void (*edit)(std::vector<std::string>&);
};
std::ostream& operator<<(std::ostream& o, const Breakage& b) { return o << b.name; }

json at(const std::vector<std::string>& l, int line) { return json::parse(l[line - 1]); }
void put(std::vector<std::string>& l, int line, const json& j) { l[line - 1] = j.dump(); }

const Breakage kBreakages[] = {
    {"malformed_line", 5, "not valid JSON", [](auto& l) { l[4] = l[4].substr(0, l[4].size() / 2); }},
    {"not_an_object", 3, "expected a JSON object", [](auto& l) { l[2] = "[1, 2, 3]"; }},
    {"unknown_schema", 1, "unknown schema 'glassbox.trace/99'",
     [](auto& l) { auto h = at(l, 1); h["schema"] = "glassbox.trace/99"; put(l, 1, h); }},
    {"schema_not_a_string", 1, "header.schema: expected a string",
     [](auto& l) { auto h = at(l, 1); h["schema"] = 2; put(l, 1, h); }},
    {"header_not_first", 1, "expected the header first", [](auto& l) { std::swap(l[0], l[1]); }},
    {"step_out_of_order", 5, "step 4 out of order (expected step 3 after step 2 on line 4)",
     [](auto& l) { std::swap(l[4], l[5]); }},
    {"step_missing", 5, "step 4 out of order (expected step 3", [](auto& l) { l.erase(l.begin() + 4); }},
    {"missing_summary", 13, "cut short", [](auto& l) { l.pop_back(); }},
    {"error_line", 8, "stopped with an error",
     [](auto& l) { l.resize(7); l.push_back(R"({"type":"error","message":"kv-cache full"})"); }},
    {"blank_line", 4, "empty line", [](auto& l) { l.insert(l.begin() + 3, ""); }},
    {"line_after_summary", 15, "after the summary", [](auto& l) { l.push_back(l[1]); }},
    {"unknown_type", 3, "unknown line type 'stepp'", [](auto& l) { auto s = at(l, 3); s["type"] = "stepp"; put(l, 3, s); }},
    {"missing_field", 4, "missing field step.kv", [](auto& l) { auto s = at(l, 4); s.erase("kv"); put(l, 4, s); }},
    {"wrong_type", 4, "step.prob: expected a number", [](auto& l) { auto s = at(l, 4); s["prob"] = "high"; put(l, 4, s); }},
    {"token_outside_vocab", 4, "step.token.id: 512 is outside",
     [](auto& l) { auto s = at(l, 4); s["token"]["id"] = 512; put(l, 4, s); }},
    {"logits_wrong_length", 4, "step.logits: 511 values",
     [](auto& l) { auto s = at(l, 4); auto x = step_logits(s); x.pop_back(); s["logits"] = x; put(l, 4, s); }},
    {"logits_base64_wrong_length", 4, "step.logits: a string of 2728 characters, expected the base64 of vocab_size = 512 float32 values (2732 characters)",
     [](auto& l) { json s = at(l, 4); s["logits"] = s["logits"].get<std::string>().substr(4); put(l, 4, s); }},
    {"logits_not_base64", 4, "expected the base64 of vocab_size = 512 float32 values",
     [](auto& l) { json s = at(l, 4); auto t = s["logits"].get<std::string>(); t[100] = '!'; s["logits"] = t; put(l, 4, s); }},
    {"logits_base64_infinite", 4, "step.logits[3]: expected a finite number",
     [](auto& l) {
       auto s = at(l, 4);
       std::vector<float> f(512, 1.0f);
       f[3] = std::numeric_limits<float>::infinity();
       std::string t(glassbox::traces::float32_base64_size(f.size()), '\0');
       glassbox::traces::write_float32_base64(t.data(), f);
       s["logits"] = t;
       put(l, 4, s);
     }},
    {"wrong_pos", 4, "expected pos 6", [](auto& l) { auto s = at(l, 4); s["pos"] = 99; put(l, 4, s); }},
    {"input_not_previous_token", 4, "input_ids",
     [](auto& l) { auto s = at(l, 4); s["input_ids"] = json::array({7}); put(l, 4, s); }},
    {"summary_count", 14, "which means",
     [](auto& l) { auto s = at(l, 14); s["generated"] = 3; put(l, 14, s); }},
    {"unsorted_top", 2, "top is sorted by logit",
     [](auto& l) { auto s = at(l, 2); std::swap(s["top"][0], s["top"][1]); put(l, 2, s); }},
    {"empty_file", 1, "empty file", [](auto& l) { l.clear(); }},
    // Listed probabilities summing past 1 (4.76 was accepted before; issue 46).
    {"top_mass_past_one", 2, "step.top: the listed probabilities",
     [](auto& l) { auto s = at(l, 2); for (auto& t : s["top"]) t["prob"] = 0.95; put(l, 2, s); }},
};

BOOST_DATA_TEST_CASE(broken_trace_is_exit_2_naming_the_line, bdata::make(kBreakages), b) {
  auto lines = read_lines(greedy_full_trace());
  BOOST_TEST_REQUIRE(lines.size() == 14u);
  b.edit(lines);
  const fs::path p = temp_dir(std::string("validate-") + b.name) / "broken.jsonl";
  write_lines(p, lines);
  if (lines.empty()) write_file(p, "");
  const auto r = run_cli({"trace", "validate", p.string()});
  BOOST_TEST(r.rc == 2);
  const std::string where = p.string() + ":" + std::to_string(b.line) + ":";
  BOOST_TEST(r.err.find(where) != std::string::npos, "expected '" << where << "' in: " << r.err);
  BOOST_TEST(r.err.find(b.expect) != std::string::npos, "expected '" << b.expect << "' in: " << r.err);
  BOOST_TEST(r.err.find('\n', r.err.find("error:")) == r.err.size() - 1, "one-line message: " << r.err);
}

// The format's versions (docs/trace-format.md, "Versions"): one run's trace labelled with each version, its
// logits written either way. /1 and /2 read (with the same values), base64 under /1 as the legacy allowance
// with a note; any other version is exit 2 naming the value and the versions read.
struct Version {
  const char* name;
  const char* schema;
  bool base64;       // every step's logits one base64 string, else an array of numbers
  int rc;            // `trace validate`'s exit status
  const char* says;  // on stdout (exit 0) or stderr (exit 2)
  bool note;         // the legacy allowance's note on stderr
};
std::ostream& operator<<(std::ostream& o, const Version& v) { return o << v.name; }

const char* const kRefused = " (this glassbox reads glassbox.trace/1 or glassbox.trace/2)";
const Version kVersions[] = {
    {"v1_decimal", "glassbox.trace/1", false, 0, "valid glassbox.trace/1, 12 steps", false},
    {"v1_base64_legacy", "glassbox.trace/1", true, 0, "valid glassbox.trace/1, 12 steps", true},
    {"v2_base64", "glassbox.trace/2", true, 0, "valid glassbox.trace/2, 12 steps", false},
    {"v2_decimal", "glassbox.trace/2", false, 0, "valid glassbox.trace/2, 12 steps", false},
    {"v0", "glassbox.trace/0", true, 2, "unknown schema 'glassbox.trace/0'", false},
    {"v3", "glassbox.trace/3", false, 2, "unknown schema 'glassbox.trace/3'", false},
    {"unversioned", "glassbox.trace", true, 2, "unknown schema 'glassbox.trace'", false},
};

// The greedy trace with header.schema = `schema` and its logits written as asked.
fs::path versioned_trace(const std::string& tag, const std::string& schema, bool base64) {
  auto lines = read_lines(greedy_full_trace());
  auto h = at(lines, 1);
  h["schema"] = schema;
  put(lines, 1, h);
  for (std::size_t i = 2; i < lines.size(); ++i) {
    auto s = at(lines, static_cast<int>(i));
    if (s["type"] != "step") continue;
    BOOST_TEST_REQUIRE(s["logits"].is_string());  // written by this glassbox (--trace-logits base64, the default)
    if (!base64) s["logits"] = step_logits(s);
    put(lines, static_cast<int>(i), s);
  }
  const fs::path p = temp_dir("version-" + tag) / "t.jsonl";
  write_lines(p, lines);
  return p;
}

BOOST_DATA_TEST_CASE(each_version_reads_or_is_refused_naming_it, bdata::make(kVersions), v) {
  const fs::path p = versioned_trace(v.name, v.schema, v.base64);
  const auto r = run_cli({"trace", "validate", p.string()});
  BOOST_TEST(r.rc == v.rc, r.out << r.err);
  if (v.rc == 0) {
    BOOST_TEST(r.out.find(p.string() + ": " + v.says) != std::string::npos, r.out);
    const std::string note = "glassbox: note: " + p.string() + ":2: base64 logits under glassbox.trace/1 (legacy";
    BOOST_TEST((r.err.find(note) != std::string::npos) == v.note, "stderr: " << r.err);
    if (v.note) BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, "one line: " << r.err);
    // the same run whatever the label and the encoding: the same typed steps as the trace as written
    const auto t = glassbox::traces::read_trace(p.string());
    const auto ref = glassbox::traces::read_trace(greedy_full_trace().string());
    BOOST_TEST(t.schema() == v.schema);
    BOOST_TEST((t.steps == ref.steps));
    BOOST_TEST((t.header == ref.header));  // the version read is not part of what the run says
    BOOST_TEST(t.steps[3].logits == ref.steps[3].logits);
  } else {
    BOOST_TEST(r.err.find(p.string() + ":1: " + v.says + kRefused) != std::string::npos, r.err);
    BOOST_TEST(r.err.find('\n', r.err.find("error:")) == r.err.size() - 1, "one-line message: " << r.err);
  }
}

// A trace of the current version diffed against a /1 trace of the same run (a committed golden, say), either
// way round: no difference, not even a note; the version is not something the runs differ in.
BOOST_DATA_TEST_CASE(diff_across_versions_finds_no_difference, bdata::xrange(2), v1_is_golden) {
  const fs::path v1 = versioned_trace("diff-v1", "glassbox.trace/1", false);
  const fs::path v2 = greedy_full_trace();
  BOOST_TEST_REQUIRE(read_jsonl(v2)[0]["schema"] == "glassbox.trace/2");
  const auto r = v1_is_golden ? run_cli({"trace", "diff", v1.string(), v2.string()}) : run_cli({"trace", "diff", v2.string(), v1.string()});
  BOOST_TEST(r.rc == 0, r.out << r.err);
  BOOST_TEST(r.out.find("(every step)") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("note:") == std::string::npos, r.out);
  BOOST_TEST(r.out.find("schema") == std::string::npos, r.out);
  BOOST_TEST(r.out.find("glassbox.trace") == std::string::npos, r.out);
}

BOOST_AUTO_TEST_CASE(cut_short_trace_is_readable_when_asked) {
  auto lines = read_lines(greedy_full_trace());
  lines.resize(7);
  lines.push_back(R"({"type":"error","message":"boom"})");
  std::istringstream in([&] { std::string s; for (auto& l : lines) s += l + "\n"; return s; }());
  glassbox::traces::ReadOptions opt;
  opt.require_summary = false;
  const auto t = glassbox::traces::parse_trace(in, "mem", opt);
  BOOST_TEST(t.steps.size() == 6u);
  BOOST_TEST(!t.complete());
}

BOOST_AUTO_TEST_CASE(a_failed_run_leaves_an_error_line_that_validate_reports) {
  // A sampler that throws: the run fails after the header.
  const fs::path p = temp_dir("validate-kv") / "cut.jsonl";
  std::vector<std::string> a = {"run"};
  for (const auto& x : stories_args()) a.push_back(x);
  for (const auto& x : {"--prompt", "Once upon a time", "--max-tokens", "20", "--sampler", "throwing", "--seed", "1"}) a.push_back(x);
  a.push_back("--plugin-path");
  a.push_back(std::string(GLASSBOX_TEST_PLUGIN_DIR) + "/throwing");
  a.push_back("--trace");
  a.push_back(p.string());
  const auto run = run_cli(a);
  BOOST_TEST(run.rc == 2);
  const auto lines = read_jsonl(p);
  BOOST_TEST_REQUIRE(lines.size() >= 2u);
  BOOST_TEST(lines.back()["type"] == "error");
  for (const auto& l : lines) BOOST_TEST(l["type"] != "summary");
  const auto r = run_cli({"trace", "validate", p.string()});
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find(p.string() + ":" + std::to_string(lines.size()) + ": cut short") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(unknown_fields_are_allowed) {
  auto lines = read_lines(greedy_full_trace());
  auto s = json::parse(lines[3]);
  s["annotation"] = "added by a later glassbox";
  lines[3] = s.dump();
  const fs::path p = temp_dir("validate-extra") / "extra.jsonl";
  write_lines(p, lines);
  BOOST_TEST(run_cli({"trace", "validate", p.string()}).rc == 0);
}

// docs/trace.schema.json describes what the writer writes: every required field is written, and
// every field written is described (top level and one level down). With python3-jsonschema installed,
// every line of real traces is also validated against the schema itself.
BOOST_AUTO_TEST_CASE(the_json_schema_document_matches_the_writer) {
  const fs::path schema_path = fs::path(GLASSBOX_SOURCE_DIR) / "docs" / "trace.schema.json";
  const json schema = json::parse(read_file(schema_path));
  const json& defs = schema["$defs"];
  auto check = [&](const json& line, const json& def, const std::string& where) {
    for (const auto& k : def["required"]) BOOST_TEST(line.contains(k.get<std::string>()), where << ": required " << k << " not written");
    for (const auto& [k, v] : line.items()) {
      BOOST_TEST(def["properties"].contains(k), where << ": '" << k << "' written but not in the schema");
    }
  };
  // the error line comes from a failed run
  const fs::path cut = temp_dir("schema-error") / "cut.jsonl";
  std::vector<std::string> a = {"run"};
  for (const auto& x : stories_args()) a.push_back(x);
  for (const auto& x : {"--prompt", "Once upon a time", "--max-tokens", "20", "--sampler", "throwing", "--trace"}) a.push_back(x);
  a.push_back(cut.string());
  a.push_back("--plugin-path");
  a.push_back(std::string(GLASSBOX_TEST_PLUGIN_DIR) + "/throwing");
  BOOST_TEST(run_cli(a).rc == 2);
  // the versions it names are the ones the readers accept (traces/include/glassbox/traces/schema.hpp)
  std::vector<std::string> readable(glassbox::traces::kReadableSchemas.begin(), glassbox::traces::kReadableSchemas.end());
  BOOST_TEST(defs["header"]["properties"]["schema"]["enum"].get<std::vector<std::string>>() == readable, boost::test_tools::per_element());
  // a chat turn whose oldest exchange was summarized: its context line has the optional `summary`
  const fs::path chat = temp_dir("schema-chat");
  write_lines(chat / "turns.txt", {"My name is Lily.", "What is my name?"});
  BOOST_TEST(run_cli({"chat", "--input", (chat / "turns.txt").string(), "--seed", "1", "--max-tokens", "6", "--context", "48",
                      "--context-policy", "summarize", "--summary-tokens", "8", "--trace", (chat / "c.jsonl").string()})
                 .rc == 0);
  std::vector<fs::path> files = {greedy_full_trace(), sampled_basic_trace(), cut,
                                 versioned_trace("schema-v1", "glassbox.trace/1", false), chat / "c-turn2.jsonl",
                                 chat / "c-turn2-summary.jsonl"};
  int summaries = 0;
  for (const auto& f : files) {
    for (const auto& line : read_jsonl(f)) {
      const std::string type = line["type"];
      BOOST_TEST_REQUIRE(defs.contains(type));
      check(line, defs[type], f.filename().string() + " " + type);
      if (type == "header") {
        check(line["model"], defs["header"]["properties"]["model"], "header.model");
        check(line["model"]["config"], defs["header"]["properties"]["model"]["properties"]["config"], "header.model.config");
      }
      if (type == "step") {
        check(line["draw"], defs["step"]["properties"]["draw"], "step.draw");
        check(line["kv"], defs["step"]["properties"]["kv"], "step.kv");
        for (const auto& c : line["top"]) check(c, defs["candidate"], "step.top[]");
        for (const auto& st : line["stages"]) check(st, defs["stage"], "step.stages[]");
      }
      if (type == "context" && line.contains("summary")) {
        ++summaries;
        check(line["summary"], defs["context"]["properties"]["summary"], "context.summary");
      }
    }
  }
  BOOST_TEST(summaries == 1);
  if (std::system("python3 -c 'import jsonschema' >/dev/null 2>&1") != 0) {
    BOOST_TEST_MESSAGE("python3-jsonschema not installed: the line-by-line schema validation is skipped");
    return;
  }
  std::string cmd = "python3 -c 'import json,sys,jsonschema; v=jsonschema.Draft202012Validator(json.load(open(sys.argv[1])));"
                    " bad=[(f,i) for f in sys.argv[2:] for i,l in enumerate(open(f),1) if not v.is_valid(json.loads(l))];"
                    " print(bad); sys.exit(1 if bad else 0)' '" + schema_path.string() + "'";
  for (const auto& f : files) cmd += " '" + f.string() + "'";
  BOOST_TEST(std::system(cmd.c_str()) == 0, "lines failing docs/trace.schema.json (see stdout)");
}

BOOST_AUTO_TEST_SUITE_END()

// A file a glassbox release really wrote between --trace-logits base64 and the bump to /2 (kept as a fuzz seed):
// base64 logits under glassbox.trace/1, valid under the legacy allowance, with its one-line note.
BOOST_AUTO_TEST_CASE(a_legacy_base64_file_validates_with_a_note) {
  const fs::path p = fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "fuzz" / "regressions" / "trace" / "tr_base64_logits.jsonl";
  const auto r = run_cli({"trace", "validate", p.string()});
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(r.out.find(": valid glassbox.trace/1, 20 steps") != std::string::npos, r.out);
  BOOST_TEST(r.err == "glassbox: note: " + p.string() + ":2: base64 logits under glassbox.trace/1 (legacy: written before the "
                      "format became glassbox.trace/2); read as glassbox.trace/2\n");
}

// Without any model: a header-only trace of a run with max_tokens 0 is valid.
BOOST_AUTO_TEST_CASE(reader_accepts_a_run_of_zero_tokens) {
  json h = {{"type", "header"}, {"schema", "glassbox.trace/1"},
            {"model", {{"path", "m.bin"}, {"sha256", std::string(64, 'a')},
                       {"config", {{"dim", 8}, {"hidden_dim", 16}, {"n_layers", 1}, {"n_heads", 2}, {"n_kv_heads", 2},
                                   {"vocab_size", 4}, {"seq_len", 8}, {"shared_classifier", true}, {"format_version", 0},
                                   {"rope_theta", 10000.0}}}}},
            {"tokenizer", {{"path", "t.bin"}}},
            {"plugins", {{"tokenizer", {{"name", "llama2c"}, {"params", {{"path", "t.bin"}}}}},
                         {"attention", {{"name", "kv-cache"}, {"params", {{"capacity", 0}}}}},
                         {"sampler", json::array({{{"name", "greedy"}, {"params", json::object()}}})}}},
            {"seed", 18446744073709551615ull}, {"rng", "pcg32"}, {"prompt", ""}, {"prompt_ids", {1}},
            {"max_tokens", 0}, {"trace_level", "basic"}};
  json s = {{"type", "summary"}, {"generated", 0}, {"stop_reason", "max_tokens"}, {"ttft_ms", 0},
            {"prefill_tok_s", 0}, {"decode_tok_s", 0}};
  std::istringstream in(h.dump() + "\n" + s.dump() + "\n");
  const auto t = glassbox::traces::parse_trace(in, "zero");
  BOOST_TEST(t.steps.empty());
  BOOST_TEST(t.complete());
  std::istringstream cut(h.dump() + "\n");
  BOOST_CHECK_THROW(glassbox::traces::parse_trace(cut, "zero"), glassbox::TraceError);
}
