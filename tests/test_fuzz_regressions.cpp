// Every input kept in tests/fuzz/regressions/TARGET/ (crashers found by tools/fuzz.sh, once fixed, and
// hand-made hostile seeds) replayed through the same target bodies as the fuzzers, in the normal suite.
#define BOOST_TEST_MODULE fuzz_regressions
#include <boost/test/unit_test.hpp>

#include "fuzz/cli_targets.hpp"
#include "fuzz/config_target.hpp"
#include "fuzz/grammar_targets.hpp"
#include "fuzz/serve_target.hpp"
#include "fuzz/targets.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {

int replay(const std::string& target, int (*run)(const std::uint8_t*, std::size_t)) {
  const fs::path dir = fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "fuzz" / "regressions" / target;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() == "README") continue;
    const std::string bytes = gbtest::read_file(e.path());
    BOOST_TEST_CHECKPOINT(e.path());
    BOOST_CHECK_NO_THROW(run(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
    ++n;
  }
  return n;
}

int llama2c_tok(const std::uint8_t* d, std::size_t n) { return gbfuzz::tokenizer(d, n, "llama2c", "tokenizer.bin"); }
int bpe_tok(const std::uint8_t* d, std::size_t n) { return gbfuzz::tokenizer(d, n, "bpe", "tokenizer.json"); }

}  // namespace

BOOST_AUTO_TEST_CASE(model_inputs) { BOOST_TEST(replay("model", gbfuzz::model) > 0); }
BOOST_AUTO_TEST_CASE(gguf_inputs) { BOOST_TEST(replay("gguf", gbfuzz::gguf) > 0); }
BOOST_AUTO_TEST_CASE(tokenizer_inputs) { BOOST_TEST(replay("tokenizer", llama2c_tok) > 0); }
BOOST_AUTO_TEST_CASE(bpe_inputs) { BOOST_TEST(replay("bpe", bpe_tok) > 0); }
BOOST_AUTO_TEST_CASE(trace_inputs) { BOOST_TEST(replay("trace", gbfuzz::trace) > 0); }
BOOST_AUTO_TEST_CASE(config_inputs) { BOOST_TEST(replay("config", gbfuzz::config) > 0); }
BOOST_AUTO_TEST_CASE(encode_inputs) { BOOST_TEST(replay("encode", gbfuzz::encode) > 0); }
BOOST_AUTO_TEST_CASE(shard_inputs) { BOOST_TEST(replay("shard", gbfuzz::shard) > 0); }
BOOST_AUTO_TEST_CASE(import_inputs) { BOOST_TEST(replay("import", gbfuzz::import) > 0); }
BOOST_AUTO_TEST_CASE(grammar_inputs) { BOOST_TEST(replay("grammar", gbfuzz::grammar) > 0); }
BOOST_AUTO_TEST_CASE(json_schema_inputs) { BOOST_TEST(replay("json_schema", gbfuzz::json_schema) > 0); }
BOOST_AUTO_TEST_CASE(serve_request_inputs) { BOOST_TEST(replay("serve_request", gbfuzz::serve_request) > 0); }

// The shard target reaches the merge: its kept valid shard (a 1-of-1 sweep of the toy model) merges.
BOOST_AUTO_TEST_CASE(shard_target_reaches_the_merge) {
  const auto path = fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "fuzz" / "regressions" / "shard" / "toy-1of1.json";
  const auto report = glassbox::cli::compare::merge_shards({path.string()});
  BOOST_TEST(report.runs.size() == 4u);
  BOOST_CHECK_THROW(glassbox::cli::compare::merge_shards({path.string(), path.string()}), glassbox::ConfigError);
}

// The import target reaches the dialect readers: a llama.cpp /completion capture in the toy vocabulary reads.
BOOST_AUTO_TEST_CASE(import_target_reaches_the_dialects) {
  const auto path = fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "fuzz" / "regressions" / "import" / "llamacpp-completion.json";
  const auto run = glassbox::cli::read_engine_file(path.string(), "", 0, *gbfuzz::import_vocabs().front().tok);
  BOOST_TEST(run.dialect == "llamacpp-completion");
  BOOST_TEST(run.steps.size() == 1u);
}

// The targets are not vacuous: on real files they reach the real loaders (no Error swallowed there).
BOOST_AUTO_TEST_CASE(targets_reach_the_real_loaders, *boost::unit_test::precondition(gbtest::NeedsShared())) {
  auto tok = gbfuzz::registry().make_tokenizer(glassbox::PluginSpec{"llama2c", {{"path", gbtest::shared("models/tok512.bin").string()}}});
  BOOST_TEST(tok->vocab_size() == 512);
  BOOST_TEST(glassbox::ModelSource::open(gbtest::shared("models/stories260K.bin"))->config().vocab_size == 512);
  std::ifstream in(fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "golden" / "stories260K-greedy.jsonl");
  BOOST_TEST(glassbox::traces::parse_trace(in, "golden").steps.size() == 20u);
}

// The config and encode targets reach their code too: a seed config builds its whole chain; the built-in
// vocabularies load and encode.
BOOST_AUTO_TEST_CASE(config_and_encode_targets_are_not_vacuous) {
  const auto opt = glassbox::cli::read_config((fs::path(GLASSBOX_SOURCE_DIR) / "tests/fuzz/regressions/config/samplers_md.yaml").string());
  BOOST_TEST_REQUIRE(opt.sampler.size() == 3u);
  std::vector<std::string> warnings;
  const auto stages = glassbox::cli::check_plugins(gbfuzz::registry(), opt.tokenizer, opt, warnings);
  BOOST_TEST(stages.size() == 4u);  // + the appended dist
  const auto& v = gbfuzz::vocabs();
  BOOST_TEST_REQUIRE(v.size() >= 2u);
  for (const auto& voc : v) BOOST_TEST(!voc.tok->encode("Once upon a time", false, false).empty(), voc.source);
  const auto& gpt2 = *v.back().tok;
  BOOST_TEST(gpt2.encode(" the", false, false).size() == 1u);  // merged by the tiny vocabulary's merges
  const std::string bytes("\xff\x00 and", 6);
  BOOST_TEST(glassbox::decode_all(gpt2, gpt2.encode(bytes, false, false)) == bytes);
}
