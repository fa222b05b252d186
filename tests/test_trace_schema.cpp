// The typed trace schema: what the writer writes reads back as the same typed values, and a trace read and
// written again is the same bytes (the committed goldens, and a run that uses every optional field).
#define BOOST_TEST_MODULE trace_schema
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "glassbox/error.hpp"
#include "glassbox/traces/reader.hpp"
#include "glassbox/traces/writer.hpp"
#include "support.hpp"
#include "trace_fixtures.hpp"

namespace fs = std::filesystem;
using namespace glassbox;
using namespace gbtest;

namespace {

// Five pieces: "<s>", " a", " b", " c", "</s>".
class FakeTokenizer final : public Tokenizer {
 public:
  std::vector<std::int32_t> encode(std::string_view, const EncodeOptions&) const override { return {0}; }
  std::string_view decode(std::int32_t, std::int32_t id) const override { return kPieces[id]; }
  std::string_view piece(std::int32_t id) const override { return kPieces[id]; }
  std::int32_t vocab_size() const override { return 5; }
  std::int32_t bos_id() const override { return 0; }
  std::int32_t eos_id() const override { return 4; }

 private:
  static constexpr const char* kPieces[] = {"<s>", " a", " b", " c", "</s>"};
};

Params params(std::initializer_list<std::pair<const char*, ParamValue>> kv) {
  Params p;
  for (const auto& [k, v] : kv) p.set(k, v);
  return p;
}

// The serialized lines of `t`, one per line of the file, as the writer dumps them.
std::vector<std::string> reserialized(const traces::Trace& t) {
  std::vector<std::string> out;
  for (const auto& j : t.lines()) out.push_back(traces::dump(j));
  return out;
}

}  // namespace

// Every kind of line with every optional field, written by JsonlWriter and read back by read_trace.
// Both ways of writing the logits (decimal numbers, base64 of float32s) read back as the same values.
BOOST_DATA_TEST_CASE(written_events_read_back_as_the_same_typed_values, boost::unit_test::data::xrange(2), base64) {
  const auto encoding = base64 ? traces::LogitsEncoding::Base64 : traces::LogitsEncoding::Decimal;
  FakeTokenizer tok;
  RunHeader h;
  h.model_path = "m.bin";
  h.model_sha256 = std::string(64, 'a');
  h.config.dim = 8, h.config.hidden_dim = 16, h.config.n_layers = 2, h.config.n_heads = 2, h.config.n_kv_heads = 1;
  h.config.vocab_size = 5, h.config.seq_len = 32, h.config.rope_theta = 500000.0f, h.config.norm_eps = 1e-6f;
  h.weight_types = "F32:9";
  h.tokenizer_path = "t.bin";
  h.plugins = {{"tokenizer", "llama2c", params({{"path", std::string("t.bin")}})},
               {"attention", "paged", params({{"block_size", std::int64_t{4}}, {"capacity", std::int64_t{0}}})},
               {"sampler", "top-k", params({{"k", std::int64_t{40}}})},
               {"sampler", "temperature", params({{"temperature", 0.8}})},
               {"sampler", "logit-bias", params({{"bias", std::string("3:-1.5")}, {"strict", true}})},
               {"sampler", "dist", {}}};
  h.seed = 0xFFFF'FFFF'FFFF'FFF0ULL;  // above INT64_MAX: the seed is unsigned
  h.rng = "pcg32";
  h.prompt = "a \"quoted\"\nprompt";
  h.prompt_ids = {0, 1};
  h.max_tokens = 2;
  h.level = TraceLevel::Full;
  h.kernels = "avx2";
  h.threads = 3;

  const Params stage_params = params({{"k", std::int64_t{2}}});
  const std::vector<TokenProb> top = {{2, 3.25f, 0.6f}, {1, 2.5f, 0.3f}, {3, -1.0f / 3, 0.1f}};
  std::vector<StageRecord> stages(1);
  stages[0] = {"top-k", &stage_params, 2, 0.9f, 0.61f, -1.0f, {{2, 0.f, 0.6666667f}, {1, 0.f, 0.3333333f}}};
  const std::vector<float> logits = {-4.f, 2.5f, 3.25f, -1.0f / 3, 0.1f};
  KvState kv;
  kv.module = "paged";
  kv.params = params({{"block_size", std::int64_t{4}}});
  kv.tokens = 2, kv.capacity = 32, kv.bytes = 1024, kv.first_pos = 0, kv.evicted = 0;
  kv.block_size = 4, kv.blocks_used = 1, kv.blocks_free = 7, kv.last_block_unused = 2, kv.block_table = {5};
  const std::vector<AttentionRow> rows = {{0, 1, 1, 0, {0.25f, 0.75f}}};
  const std::vector<std::int32_t> in0 = {0, 1}, in1 = {2};

  StepEvent s0;
  s0.phase = "prefill", s0.step = 0, s0.pos = 1, s0.input_ids = in0, s0.token = 2, s0.token_text = " b";
  s0.prob = 0.6f, s0.logprob = std::log(0.6f), s0.chain_prob = 0.6666667f, s0.entropy = 0.9f;
  s0.top = top, s0.logits = logits, s0.stages = stages, s0.draw_u = 0.125f, s0.kv = &kv, s0.attention_dots = 12;
  s0.attention = rows, s0.ms = 1.5;
  PolicyEvent p;
  p.policy = "shift", p.step = 1, p.limit = 2, p.dropped_from = 0, p.dropped_to = 1, p.dropped_ids = {0}, p.kept = 2;
  p.detail = "re-rotated 2 keys by -1";
  StepEvent s1 = s0;
  s1.phase = "decode", s1.step = 1, s1.pos = 2, s1.input_ids = in1, s1.token = 1, s1.token_text = " a";
  s1.sampled = 2, s1.forced = true, s1.draw_u = -1, s1.kv = nullptr, s1.attention = {};
  Summary sum;
  sum.generated = 2, sum.stop_reason = "max_tokens", sum.policy_firings = 1, sum.ttft_ms = 2.5;
  sum.prefill_tok_s = 800, sum.decode_tok_s = 1.0 / 3;

  const fs::path path = temp_dir("schema-roundtrip" + std::to_string(base64)) / "t.jsonl";
  {
    traces::JsonlWriter w(path.string(), tok, false, traces::WriterThread::EveryLine, encoding);
    w.header(h);
    w.step(s0);
    w.policy(p);
    w.step(s1);
    w.summary(sum);
  }
  const auto t = traces::read_trace(path.string());
  BOOST_TEST((t.header == traces::header_record(h)));
  BOOST_TEST_REQUIRE(t.steps.size() == 2u);
  BOOST_TEST((t.steps[0] == traces::step_record(s0, tok)));
  BOOST_TEST((t.steps[1] == traces::step_record(s1, tok)));
  BOOST_TEST_REQUIRE(t.context.size() == 1u);
  BOOST_TEST((t.context[0] == traces::context_record(p, tok)));
  BOOST_TEST_REQUIRE(t.summary.has_value());
  BOOST_TEST((*t.summary == traces::summary_record(sum)));

  // Spot checks that the records carry what the events said (not just the same thing twice).
  BOOST_TEST(t.header.seed == h.seed);
  BOOST_TEST(t.header.samplers.size() == 4u);
  BOOST_TEST(t.header.samplers[2].params.get_bool("strict"));
  BOOST_TEST(t.header.samplers[1].params.get_float("temperature") == 0.8);
  BOOST_TEST(t.header.attention.params.get_int("block_size") == 4);
  BOOST_TEST(t.steps[0].top[2].logit.value() == -0.33333334);  // the float's shortest text, not its binary value
  BOOST_TEST(t.steps[0].draw.u.value() == 0.125);
  BOOST_TEST(!t.steps[1].draw.u.has_value());
  BOOST_TEST(t.steps[1].forced);
  BOOST_TEST(t.steps[1].draw.selected == 2);
  BOOST_TEST(t.steps[0].kv.blocks.value().block_table == std::vector<std::int64_t>{5});
  BOOST_TEST(t.steps[0].attention.value().at(0).weights == (std::vector<double>{0.25, 0.75}));
  BOOST_TEST(!t.steps[1].attention.has_value());
  BOOST_TEST(t.context[0].dropped_text.value() == "<s>");
  BOOST_TEST(t.steps[0].logits.size() == 5u);
  BOOST_TEST(t.steps[0].logits[4] == 0.1);  // 0.1f's shortest text, either way
  BOOST_TEST((t.steps[0].written.logits == encoding));
  BOOST_TEST(read_lines(path)[1].find(base64 ? "\"logits\":\"AACAwAAAIEAAAFBAq6qqvs3MzD0=\"" : "\"logits\":[-4.0,2.5,3.25,-0.33333334,0.1]") !=
             std::string::npos);

  // And the file is what the records serialize to, byte for byte.
  BOOST_TEST(reserialized(t) == read_lines(path), boost::test_tools::per_element());
}

// A cut-short trace keeps its last line.
BOOST_AUTO_TEST_CASE(an_error_line_reads_back_and_reserializes) {
  FakeTokenizer tok;
  RunHeader h;
  h.model_sha256 = std::string(64, '0');
  h.config.dim = h.config.hidden_dim = h.config.n_layers = h.config.n_heads = h.config.n_kv_heads = 1;
  h.config.vocab_size = 5, h.config.seq_len = 8;
  h.plugins = {{"tokenizer", "llama2c", {}}, {"attention", "kv-cache", {}}, {"sampler", "greedy", {}}};
  h.prompt_ids = {0};
  h.max_tokens = 4;
  const fs::path path = temp_dir("schema-cut") / "t.jsonl";
  {
    traces::JsonlWriter w(path.string(), tok);
    w.header(h);
    w.interrupted("SIGINT");
  }
  traces::ReadOptions ro;
  ro.require_summary = false;
  const auto t = traces::read_trace(path.string(), ro);
  BOOST_TEST_REQUIRE(t.end.has_value());
  BOOST_TEST(t.end->type == "interrupted");
  BOOST_TEST(t.end->signal.value_or("") == "SIGINT");
  BOOST_TEST(!t.complete());
  BOOST_TEST(reserialized(t) == read_lines(path), boost::test_tools::per_element());
}

// The goldens in tests/golden/ (some written by older glassbox versions, without the newer optional
// fields) read and written again are the committed bytes.
BOOST_AUTO_TEST_CASE(committed_goldens_reserialize_byte_for_byte) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "golden")) {
    if (e.path().extension() != ".jsonl") continue;
    const auto t = traces::read_trace(e.path().string());
    BOOST_TEST(reserialized(t) == read_lines(e.path()), boost::test_tools::per_element());
    ++n;
  }
  BOOST_TEST(n >= 3);
}

// Fields the schema does not know are accepted and not carried (the typed trace holds the schema only).
BOOST_AUTO_TEST_CASE(unknown_fields_are_ignored) {
  const fs::path golden = fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "golden" / "toy-greedy.jsonl";
  auto lines = read_lines(golden);
  auto h = nlohmann::json::parse(lines[0]);
  h["x_future"] = {{"deep", {1, 2, 3}}};
  lines[0] = h.dump();
  const fs::path p = temp_dir("schema-unknown") / "t.jsonl";
  write_lines(p, lines);
  const auto t = traces::read_trace(p.string());
  BOOST_TEST(reserialized(t) == read_lines(golden), boost::test_tools::per_element());
}

// chat --context-policy summarize: the turn's prune-turns line carries `summary` (an optional field, so not
// a new version), which reads back as typed values and is written again byte for byte; the toy model's
// chat, no shared data needed.
BOOST_AUTO_TEST_CASE(a_summarized_chat_turn_reads_back_and_reserializes) {
  const fs::path dir = temp_dir("schema-summary");
  write_lines(dir / "turns.txt", {"My name is Lily.", "What is my name?"});
  const auto r = run_cli({"chat", "--input", (dir / "turns.txt").string(), "--seed", "1", "--max-tokens", "6", "--context", "48",
                          "--context-policy", "summarize", "--summary-tokens", "8", "--trace", (dir / "c.jsonl").string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const fs::path p = dir / "c-turn2.jsonl";
  const auto t = traces::read_trace(p.string());
  BOOST_TEST_REQUIRE(t.context.size() == 1u);
  const traces::TraceContext& c = t.context[0];
  BOOST_TEST(c.policy == "prune-turns");
  BOOST_TEST(c.turns.value() == 2);
  BOOST_TEST_REQUIRE(c.summary.has_value());
  BOOST_TEST(!c.summary->ids.empty());
  BOOST_TEST(t.header.prompt.find("Summary: " + c.summary->text + "\n") != std::string::npos, t.header.prompt);
  const auto lines = reserialized(t);
  const auto file = read_lines(p);
  BOOST_TEST_REQUIRE(lines.size() == file.size());
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (nlohmann::json::parse(file[i])["type"] != "step") BOOST_TEST(lines[i] == file[i], "line " << i + 1);

  // A summary belongs to a chat's prune-turns line, and its ids to the prompt kept.
  auto line = nlohmann::json::parse(file[1]);
  auto shifted = line;
  shifted["policy"] = "shift";
  shifted.erase("turns");
  auto long_ids = line;
  long_ids["summary"]["ids"] = std::vector<int>(static_cast<std::size_t>(line["kept"].get<int>()), 5);
  auto no_text = line;
  no_text["summary"].erase("text");
  auto not_object = line;
  not_object["summary"] = "text";
  for (const auto& [bad, message] : std::vector<std::pair<nlohmann::json, std::string>>{
           {shifted, "context.summary: only a prune-turns line has one"},
           {long_ids, "context.summary: " + std::to_string(line["kept"].get<int>()) + " ids at position 1 do not fit"},
           {no_text, "missing field context.summary.text"},
           {not_object, "context.summary: expected an object"}}) {
    std::string what;
    try {
      traces::parse_context(bad, "t.jsonl:2");
    } catch (const TraceError& e) {
      what = e.what();
    }
    BOOST_TEST(what.find(message) != std::string::npos, what);
  }
}

BOOST_AUTO_TEST_SUITE(with_shared, *boost::unit_test::precondition(NeedsShared()))

// A real run with a paged module, a context policy and attention weights: every optional field, read and
// written again byte for byte.
BOOST_AUTO_TEST_CASE(a_run_using_every_optional_field_reserializes) {
  const auto p = stories_trace("every-field", {"--prompt", "Once upon a time", "--max-tokens", "24", "--sampler",
                                               "top-k:40,temperature:0.8", "--seed", "3", "--attention", "paged:4",
                                               "--context", "16", "--context-policy", "shift:2", "--trace-attention",
                                               "0:0", "--trace-level", "full"});
  const auto t = traces::read_trace(p.string());
  BOOST_TEST(!t.context.empty());
  BOOST_TEST(t.steps.at(0).attention.has_value());
  BOOST_TEST(t.steps.at(0).kv.blocks.has_value());
  // Step lines come from the writer's own float printer (the shortest text of each float32), while dump()
  // is nlohmann's, whose Grisu2 sometimes spells the same double with 17 digits (0.10308171 ->
  // 0.10308170999999999): so the reserialized text is read back and compared as typed values, which are
  // exact (the parser rounds correctly), and the lines nlohmann wrote (header, context, summary) as bytes.
  const auto lines = reserialized(t);
  const auto file = read_lines(p);
  BOOST_TEST_REQUIRE(lines.size() == file.size());
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (nlohmann::json::parse(file[i])["type"] != "step") BOOST_TEST(lines[i] == file[i], "line " << i + 1);
  std::string again;
  for (const auto& l : lines) again += l + "\n";
  std::istringstream in(again);
  const auto u = traces::parse_trace(in, "again.jsonl");
  BOOST_TEST((u.header == t.header));
  BOOST_TEST((u.steps == t.steps));
  BOOST_TEST((u.context == t.context));
  BOOST_TEST((u.summary == t.summary));
}

// The base64 form as another program writes it: tests/fuzz/regressions/trace/tr_base64_logits.jsonl is the
// stories260K greedy golden with each step's logits re-encoded by Python (base64.b64encode(struct.pack("<512f",
// *logits)), keys sorted); read back, every step equals the golden's, logits included, exactly.
BOOST_AUTO_TEST_CASE(base64_logits_written_elsewhere_read_as_the_decimal_golden) {
  const fs::path dir = fs::path(GLASSBOX_SOURCE_DIR) / "tests";
  const auto golden = traces::read_trace((dir / "golden" / "stories260K-greedy.jsonl").string());
  const auto b64 = traces::read_trace((dir / "fuzz" / "regressions" / "trace" / "tr_base64_logits.jsonl").string());
  BOOST_TEST_REQUIRE(b64.steps.size() == golden.steps.size());
  for (std::size_t i = 0; i < golden.steps.size(); ++i) {
    BOOST_TEST((b64.steps[i].written.logits == traces::LogitsEncoding::Base64));
    BOOST_TEST((b64.steps[i] == golden.steps[i]), "step " << i);
    BOOST_TEST(b64.steps[i].logits == golden.steps[i].logits, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_SUITE_END()
