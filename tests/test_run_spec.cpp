// Run assembly in core (run_spec.hpp): one loaded model shared by several pipelines, each with its own
// context, KV store and chain; the model's Config untouched; the checks a pipeline makes.
#define BOOST_TEST_MODULE run_spec
#include <boost/test/unit_test.hpp>

#include <functional>
#include <thread>

#include "glassbox/engine.hpp"
#include "glassbox/error.hpp"
#include "glassbox/model/gguf.hpp"
#include "glassbox/model/metadata.hpp"
#include "glassbox/model/model_source.hpp"
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

MetaValue text(const char* s) { return MetaValue{MetaType::String, MetaType::U8, std::string(s)}; }

Metadata family(const char* name) {
  Metadata m;
  m.set("tokenizer.ggml.model", text(name));
  return m;
}

// The registry's built-ins plus tests/plugins/test_vocab.cpp, whose tokenizers accept the made-up
// family "glassbox-test".
std::shared_ptr<const Registry> with_test_vocab() {
  std::vector<std::string> warnings;
  auto reg = load_registry({std::filesystem::path(GLASSBOX_TEST_PLUGIN_DIR) / "test_vocab"}, warnings);
  BOOST_TEST(warnings.empty());
  return reg;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// Core names no family: each tokenizer's Accepts says which vocabularies it reads.
BOOST_AUTO_TEST_CASE(tokenizer_chosen_from_the_metadata) {
  std::vector<std::string> warnings;
  const auto reg = load_registry({}, warnings);
  BOOST_TEST(tokenizer_for(*reg, Metadata{}, "m.bin") == "llama2c");  // a llama2.c checkpoint names none
  BOOST_TEST(tokenizer_for(*reg, family("llama"), "m.gguf") == "llama2c");
  BOOST_TEST(tokenizer_for(*reg, family("gpt2"), "m.gguf") == "bpe");
  BOOST_TEST(error_of([&] { tokenizer_for(*reg, family("rwkv"), "m.gguf"); }) ==
             "m.gguf: tokenizer.ggml.model = 'rwkv' is not supported (supported: gpt2 (bpe), llama (llama2c))");
  BOOST_CHECK_THROW(tokenizer_for(*reg, family("rwkv"), "m.gguf"), ConfigError);
  // What each built-in accepts is listed, for `glassbox plugins` and the error above.
  BOOST_TEST(reg->find(PluginKind::Tokenizer, "bpe")->accepts.value_or("") == "gpt2");
  BOOST_TEST(reg->find(PluginKind::Sampler, "greedy")->accepts.has_value() == false);
}

// A module's tokenizer is chosen for the family it accepts, without core knowing the family; two
// that accept the same model, or a test that throws, are one-line errors naming them.
BOOST_AUTO_TEST_CASE(a_module_tokenizer_chooses_itself) {
  const auto reg = with_test_vocab();
  BOOST_TEST(tokenizer_for(*reg, family("glassbox-test"), "m.gguf") == "test-vocab");
  BOOST_TEST(tokenizer_for(*reg, family("gpt2"), "m.gguf") == "bpe");  // the built-ins still choose themselves
  BOOST_TEST(error_of([&] { tokenizer_for(*reg, family("rwkv"), "m.gguf"); }) ==
             "m.gguf: tokenizer.ggml.model = 'rwkv' is not supported (supported: gpt2 (bpe), llama (llama2c), "
             "glassbox-test (test-vocab), anything (test-vocab-throws), glassbox-test (test-vocab-too))");
  Metadata both = family("glassbox-test");
  both.set("glassbox.test.both", text("yes"));
  BOOST_TEST(error_of([&] { tokenizer_for(*reg, both, "m.gguf"); }) ==
             "m.gguf: tokenizer.ggml.model = 'glassbox-test' is accepted by several tokenizers ('test-vocab', 'test-vocab-too'); "
             "name one with --tokenizer-plugin");
  Metadata throws = family("gpt2");
  throws.set("glassbox.test.throw", text("yes"));
  BOOST_CHECK_EXCEPTION(tokenizer_for(*reg, throws, "m.gguf"), PluginError, [](const PluginError& e) {
    const std::string w = e.what();
    return w.find("tokenizer 'test-vocab-throws' (module 'test-vocab', ") != std::string::npos && w.find("accepts exploded") != std::string::npos;
  });
}

// End to end: a GGUF whose tokenizer.ggml.model only the test module knows loads with that module's
// tokenizer, made with the model's vocabulary size from the context; one nobody accepts is one line.
BOOST_AUTO_TEST_CASE(a_gguf_gets_the_tokenizer_that_accepts_it, *boost::unit_test::precondition(gbtest::NeedsShared{})) {
  const auto dir = gbtest::temp_dir("run-spec-accepts");
  auto rewrite = [&](const char* value) {
    auto src = ModelSource::open(gbtest::shared("gguf/stories260K-q4_0.gguf"));
    const GgufFile& g = *src->gguf();
    GgufWriter w;
    for (const auto& [key, v] : g.metadata().entries()) w.set(key, v);
    w.set("tokenizer.ggml.model", text(value));
    for (const auto& info : g.tensors()) {
      const Tensor t = g.tensor(info);
      w.add_tensor(info.name, t.dtype, std::vector<std::int64_t>(t.shape.begin(), t.shape.begin() + t.n_dims),
                   std::vector<std::byte>(t.data, t.data + t.bytes));
    }
    const auto path = dir / (std::string(value) + ".gguf");
    w.write(path);
    return path;
  };
  ModelSpec m;
  m.model = rewrite("glassbox-test");
  m.model_hash = false;
  const auto loaded = load_model(with_test_vocab(), m);
  BOOST_TEST_REQUIRE(loaded->tokenizer != nullptr);
  BOOST_TEST(loaded->tokenizer->name() == "test-vocab");
  BOOST_TEST(loaded->tokenizer->vocab_size() == loaded->config.vocab_size);
  std::vector<std::string> warnings;
  auto p = build_pipeline(loaded, RunSpec{}, warnings);  // the attention module gets the shape from the context
  BOOST_TEST(p->attention->capacity() == p->config.seq_len);

  m.model = rewrite("rwkv");
  const std::string e = error_of([&] { load_model(with_test_vocab(), m); });
  BOOST_TEST(e == m.model.string() + ": tokenizer.ggml.model = 'rwkv' is not supported (supported: gpt2 (bpe), llama (llama2c), "
                 "glassbox-test (test-vocab), anything (test-vocab-throws), glassbox-test (test-vocab-too))");
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
