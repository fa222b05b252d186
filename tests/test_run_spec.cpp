// Run assembly in core (run_spec.hpp): one loaded model shared by several pipelines, each with its own
// context, KV store and chain; the model's Config untouched; the checks a pipeline makes.
#define BOOST_TEST_MODULE run_spec
#include <boost/test/unit_test.hpp>

#include <thread>

#include "glassbox/engine.hpp"
#include "glassbox/error.hpp"
#include "glassbox/model/metadata.hpp"
#include "glassbox/run_spec.hpp"
#include "support.hpp"

using namespace glassbox;

namespace {

class Tokens final : public TraceSink {
 public:
  void header(const RunHeader&) override {}
  void step(const StepEvent& e) override { ids.push_back(e.token); }
  void summary(const Summary&) override {}
  std::vector<std::int32_t> ids;
};

std::shared_ptr<const LoadedModel> stories() {
  std::vector<std::string> warnings;
  auto reg = load_registry({}, warnings);
  ModelSpec m;
  m.model = gbtest::shared("models/stories260K.bin");
  m.tokenizer.params.emplace_back("path", gbtest::shared("models/tok512.bin").string());
  m.model_hash = false;
  return load_model(reg, m);
}

std::vector<std::int32_t> generate(Pipeline& p, const std::string& prompt, int n) {
  Engine e(*p.model, *p.tokenizer, *p.attention, *p.sampler);
  GenerateOptions g;
  g.max_tokens = n;
  g.seed = p.seed;
  Tokens t;
  e.generate(prompt, g, p.header, t, [](std::string_view) {});
  return t.ids;
}

}  // namespace

BOOST_AUTO_TEST_CASE(tokenizer_chosen_from_the_metadata) {
  Metadata none, llama, gpt2, other;
  auto text = [](const char* s) { return MetaValue{MetaType::String, MetaType::U8, std::string(s)}; };
  llama.set("tokenizer.ggml.model", text("llama"));
  gpt2.set("tokenizer.ggml.model", text("gpt2"));
  other.set("tokenizer.ggml.model", text("rwkv"));
  BOOST_TEST(tokenizer_for(none, "m.bin") == "llama2c");
  BOOST_TEST(tokenizer_for(llama, "m.gguf") == "llama2c");
  BOOST_TEST(tokenizer_for(gpt2, "m.gguf") == "bpe");
  BOOST_CHECK_EXCEPTION(tokenizer_for(other, "m.gguf"), ConfigError, [](const ConfigError& e) {
    return std::string(e.what()) == "m.gguf: tokenizer.ggml.model = 'rwkv' is not supported (supported: llama, gpt2)";
  });
}

BOOST_AUTO_TEST_SUITE(pipelines, *boost::unit_test::precondition(gbtest::NeedsShared{}))

BOOST_AUTO_TEST_CASE(pipelines_share_the_model_and_keep_their_own_context) {
  const auto m = stories();
  std::vector<std::string> warnings;
  RunSpec a, b;
  a.context = 64;
  b.context = 128;
  a.seed = b.seed = 5;
  auto pa = build_pipeline(m, a, warnings), pb = build_pipeline(m, b, warnings);
  BOOST_TEST(m->config.seq_len == 512);  // the model's, as the file says
  BOOST_TEST(pa->config.seq_len == 64);
  BOOST_TEST(pb->config.seq_len == 128);
  BOOST_TEST(pa->header.config.seq_len == 64);
  BOOST_TEST(pa->tokenizer == pb->tokenizer);  // one tokenizer, shared read-only
  BOOST_TEST(pa->attention.get() != pb->attention.get());
  BOOST_TEST(pa->seed == 5u);
  BOOST_TEST(warnings.empty());
}

BOOST_AUTO_TEST_CASE(concurrent_pipelines_equal_sequential_ones) {
  const auto m = stories();
  std::vector<std::string> warnings;
  const std::vector<std::string> prompts = {"Once upon a time", "The little bird", "Lily wanted to", "One day"};
  std::vector<std::vector<std::int32_t>> alone, together(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    RunSpec s;
    s.seed = 100 + i;
    auto p = build_pipeline(m, s, warnings);
    alone.push_back(generate(*p, prompts[i], 40));
  }
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] {
      std::vector<std::string> w;
      RunSpec s;
      s.seed = 100 + i;
      auto p = build_pipeline(m, s, w);
      together[i] = generate(*p, prompts[i], 40);
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < prompts.size(); ++i) BOOST_TEST(alone[i] == together[i], prompts[i]);
}

BOOST_AUTO_TEST_CASE(a_pipeline_checks_context_chain_and_token_ids) {
  const auto m = stories();
  std::vector<std::string> warnings;
  RunSpec big;
  big.context = 1000;
  BOOST_CHECK_EXCEPTION(build_pipeline(m, big, warnings), ConfigError, [](const ConfigError& e) {
    return std::string(e.what()) == "--context 1000 exceeds the model's context length 512";
  });
  RunSpec bias;
  bias.sampler = parse_plugin_chain("logit-bias:600=-inf,greedy", "sampler");
  BOOST_CHECK_EXCEPTION(build_pipeline(m, bias, warnings), ConfigError, [](const ConfigError& e) {
    return std::string(e.what()).find("token id 600 is outside the model's vocabulary of 512 tokens") != std::string::npos;
  });
  RunSpec late;
  late.sampler = parse_plugin_chain("greedy,top-k:5", "sampler");
  auto p = build_pipeline(m, late, warnings);
  BOOST_TEST_REQUIRE(warnings.size() == 1u);
  BOOST_TEST(warnings[0].find("comes after 'greedy'") != std::string::npos);
  RunSpec eos;
  eos.ignore_eos = true;
  eos.sampler = parse_plugin_chain("greedy", "sampler");
  auto q = build_pipeline(m, eos, warnings);
  BOOST_TEST(q->sampler->stages().front()->name() == "logit-bias");
  BOOST_TEST(q->header.plugins.size() == 4u);  // tokenizer, attention, logit-bias, greedy
}

BOOST_AUTO_TEST_SUITE_END()
