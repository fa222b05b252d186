// The engine loop: stop conditions, teacher forcing, trace events, and no allocation while decoding.
#define BOOST_TEST_MODULE engine
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstdlib>
#include <new>

#include "glassbox/engine.hpp"
#include "glassbox/model.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/registry.hpp"
#include "alloc_counter.hpp"
#include "model_fixture.hpp"
#include "support.hpp"


namespace {

struct Recorder final : glassbox::TraceSink {
  std::vector<std::string> phases;
  std::vector<int> pos, tokens;
  std::vector<long> allocs_at_step;  // allocation counter when each step was reported
  glassbox::Summary sum;
  bool summarized = false;
  void header(const glassbox::RunHeader&) override {}
  void step(const glassbox::StepEvent& e) override {
    allocs_at_step.push_back(g_allocs.load());
    phases.emplace_back(e.phase);
    pos.push_back(e.pos);
    tokens.push_back(e.token);
  }
  void summary(const glassbox::Summary& s) override { sum = s; summarized = true; }
};

// stories260K with greedy sampling, built once.
struct Fixture : gbtest::Stories260K {
  std::unique_ptr<glassbox::Transformer> model;
  std::unique_ptr<glassbox::Attention> attn;
  std::unique_ptr<glassbox::SamplerChain> chain;
  Fixture() {
    if (!ckpt) return;
    model = std::make_unique<glassbox::Transformer>(ckpt->config(), ckpt->weights());
    attn = module("kv-cache");
    chain = greedy_chain();
  }
  Recorder run(const std::string& prompt, glassbox::GenerateOptions opt, std::string* text = nullptr) {
    glassbox::Engine engine(*model, *tok, *attn, *chain);
    Recorder rec;
    rec.phases.reserve(1024);
    rec.pos.reserve(1024);
    rec.tokens.reserve(1024);
    rec.allocs_at_step.reserve(1024);
    if (text) text->reserve(1 << 16);
    rec.sum = engine.generate(prompt, opt, {}, rec, [&](std::string_view p) { if (text) text->append(p); });
    return rec;
  }
};
Fixture& fx() {
  static Fixture f;
  return f;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine, *boost::unit_test::precondition(gbtest::NeedsShared()))

BOOST_AUTO_TEST_CASE(prefill_then_decode_positions) {
  glassbox::GenerateOptions opt;
  opt.max_tokens = 6;
  auto r = fx().run("Once upon a time", opt);
  BOOST_TEST_REQUIRE(r.phases.size() == 6u);
  BOOST_TEST(r.phases[0] == "prefill");
  BOOST_TEST(r.pos[0] == 4);  // BOS + 4 prompt tokens: the last prompt position
  for (int i = 1; i < 6; ++i) {
    BOOST_TEST(r.phases[i] == "decode");
    BOOST_TEST(r.pos[i] == 4 + i);
  }
  BOOST_TEST(r.sum.generated == 6);
  BOOST_TEST(r.sum.stop_reason == "max_tokens");
}

BOOST_AUTO_TEST_CASE(nothing_allocates_inside_the_decode_loop) {
  glassbox::GenerateOptions opt;
  opt.max_tokens = 120;
  opt.stop_at_bos = opt.stop_at_eos = false;
  std::string text;
  auto r = fx().run("Once upon a time", opt, &text);
  BOOST_TEST_REQUIRE(r.allocs_at_step.size() == 120u);
  // After a few warm-up steps (buffers reaching their steady size), decode steps allocate nothing.
  const long warm = r.allocs_at_step[10];
  BOOST_TEST(r.allocs_at_step.back() - warm == 0, "allocations in 109 decode steps: " << r.allocs_at_step.back() - warm);
}

BOOST_AUTO_TEST_CASE(stops_at_the_context_length) {
  glassbox::GenerateOptions opt;
  opt.max_tokens = 1000;
  opt.stop_at_bos = opt.stop_at_eos = false;
  std::string prompt;
  for (int i = 0; i < 50; ++i) prompt += "Tom and Sue played. ";
  auto r = fx().run(prompt, opt);
  BOOST_TEST(r.sum.stop_reason == "context_full");
  BOOST_TEST(r.pos.back() == 511);
}

BOOST_AUTO_TEST_CASE(stops_at_a_stop_token_without_printing_it) {
  glassbox::GenerateOptions opt;
  opt.max_tokens = 500;
  std::string text;
  auto r = fx().run("Once upon a time", opt, &text);
  BOOST_TEST_REQUIRE(r.sum.stop_reason == "stop_token");  // stories end with BOS in TinyStories
  BOOST_TEST(r.tokens.back() == 1);
  BOOST_TEST(r.sum.generated == static_cast<int>(r.tokens.size()) - 1);
  BOOST_TEST(text.find("<s>") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(max_tokens_zero_generates_nothing) {
  glassbox::GenerateOptions opt;
  opt.max_tokens = 0;
  auto r = fx().run("Once upon a time", opt);
  BOOST_TEST(r.phases.empty());
  BOOST_TEST(r.sum.generated == 0);
}

BOOST_AUTO_TEST_CASE(forced_tokens_replace_the_sampled_ones) {
  glassbox::GenerateOptions opt;
  opt.max_tokens = 4;
  opt.forced = {262, 263, 264, 265};
  std::string text;
  auto r = fx().run("Once upon a time", opt, &text);
  BOOST_TEST(r.tokens == opt.forced, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
