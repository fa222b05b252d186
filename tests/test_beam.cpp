// Beam search: width 1 is greedy token for token; width V over two steps finds the best two-token
// continuation an exhaustive search (two forwards per first token, through the Transformer alone) finds;
// beam traces validate and render; bad widths and penalties are one-line errors.
#define BOOST_TEST_MODULE beam
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <map>

#include "glassbox/beam_search.hpp"
#include "glassbox/engine.hpp"
#include "glassbox/model.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/traces/reader.hpp"
#include "model_fixture.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;

namespace {

struct Recorder final : glassbox::TraceSink {
  std::vector<std::int32_t> tokens;
  std::vector<glassbox::BeamStep> beams;
  glassbox::Summary sum;
  void header(const glassbox::RunHeader&) override {}
  void step(const glassbox::StepEvent& e) override {
    tokens.push_back(e.token);
    if (e.beams) beams.push_back(*e.beams);
  }
  void summary(const glassbox::Summary& s) override { sum = s; }
};

// stories260K, its tokenizer and a greedy chain, built once; K/V stores of a small capacity made on demand.
struct Fixture : gbtest::Stories260K {
  std::unique_ptr<glassbox::Transformer> model;
  std::unique_ptr<glassbox::SamplerChain> chain;
  Fixture() {
    if (!ckpt) return;
    model = std::make_unique<glassbox::Transformer>(ckpt->config(), ckpt->weights());
    chain = greedy_chain();
  }
  std::unique_ptr<glassbox::KvStore> store(int capacity, const std::string& name = "kv-cache") {
    if (name != "kv-cache") return reg.make_attention({name, {}}, ckpt->config().attention_shape());
    return reg.make_attention({name, {{"capacity", std::to_string(capacity)}}}, ckpt->config().attention_shape());
  }
  int vocab() const { return ckpt->config().vocab_size; }
  std::vector<std::int32_t> encode(const std::string& prompt) { return tok->encode(prompt, true, false); }

  Recorder greedy(const std::string& prompt, int max_tokens) {
    auto kv = store(ckpt->config().seq_len);
    glassbox::Engine engine(*model, *tok, *kv, *chain);
    glassbox::GenerateOptions opt;
    opt.max_tokens = max_tokens;
    Recorder r;
    r.sum = engine.generate(prompt, opt, {}, r, [](std::string_view) {});
    return r;
  }
  Recorder beam(const std::string& prompt, int width, int max_tokens, double penalty = 1.0, int capacity = 0,
                const std::string& module = "kv-cache") {
    std::vector<std::unique_ptr<glassbox::KvStore>> owned;
    std::vector<glassbox::KvStore*> stores;
    for (int i = 0; i < (module == "recompute" ? 1 : width); ++i) {
      owned.push_back(store(capacity > 0 ? capacity : ckpt->config().seq_len, module));
      stores.push_back(owned.back().get());
    }
    glassbox::BeamSearch search(*model, *tok, stores);
    glassbox::GenerateOptions opt;
    opt.max_tokens = max_tokens;
    glassbox::BeamOptions bo;
    bo.width = width;
    bo.length_penalty = penalty;
    Recorder r;
    r.sum = search.generate(encode(prompt), prompt, opt, bo, {}, r, [](std::string_view) {});
    return r;
  }
};
Fixture& fx() {
  static Fixture f;
  return f;
}

const char* const kPrompts[] = {"Once upon a time", "Lily wanted to", "The sun", "One day, a big dog"};

}  // namespace

BOOST_AUTO_TEST_SUITE(beam, *boost::unit_test::precondition(gbtest::NeedsShared()))

// Width 1 keeps the single best continuation at every step: exactly greedy's argmax (ties to the lower id),
// and it stops where greedy stops (the finished hypothesis beats the one live beam of the same length).
BOOST_DATA_TEST_CASE(width_one_is_greedy, bdata::make(kPrompts) * bdata::make({0.0, 1.0, 2.0}), prompt, penalty) {
  const Recorder g = fx().greedy(prompt, 120);
  const Recorder b = fx().beam(prompt, 1, 120, penalty);
  BOOST_TEST(b.tokens == g.tokens, boost::test_tools::per_element());
  BOOST_TEST(b.sum.generated == g.sum.generated);
  BOOST_TEST(b.sum.stop_reason == g.sum.stop_reason);
}

// The same through a module that keeps nothing (recompute: each beam's sequence runs again) and a paged one.
BOOST_DATA_TEST_CASE(width_one_is_greedy_with_other_modules, bdata::make({"recompute", "paged"}), module) {
  const Recorder g = fx().greedy("Once upon a time", 40);
  const Recorder b = fx().beam("Once upon a time", 1, 40, 1.0, 0, module);
  BOOST_TEST(b.tokens == g.tokens, boost::test_tools::per_element());
}

// Copying K/V rows between beams changes nothing: width 3 through kv-cache (copies), paged (copies) and
// recompute (no K/V kept at all) gives the same hypotheses and scores.
BOOST_AUTO_TEST_CASE(kv_copies_match_recompute) {
  const Recorder a = fx().beam("Lily wanted to", 3, 12, 1.0, 0, "kv-cache");
  const Recorder r = fx().beam("Lily wanted to", 3, 12, 1.0, 0, "recompute");
  BOOST_TEST(a.tokens == r.tokens, boost::test_tools::per_element());
  BOOST_TEST_REQUIRE(a.sum.beam.has_value());
  BOOST_TEST(a.sum.beam->kv_copies > 0);
  BOOST_TEST_REQUIRE(a.sum.beam->hypotheses.size() == r.sum.beam->hypotheses.size());
  for (std::size_t i = 0; i < a.sum.beam->hypotheses.size(); ++i) {
    BOOST_TEST(a.sum.beam->hypotheses[i].tokens == r.sum.beam->hypotheses[i].tokens, boost::test_tools::per_element());
    BOOST_TEST(a.sum.beam->hypotheses[i].score == r.sum.beam->hypotheses[i].score, boost::test_tools::tolerance(1e-4));
  }
}

// Width V (every token) over two steps: the winner is the best of every hypothesis an exhaustive search
// forms — [a, b] for every first token a that does not end generation and every b, and [a] for each a that
// does — scored Σ log p / length^A. The exhaustive side runs the Transformer directly: for each first token,
// the prompt and then that token (two forwards), log-softmax in double.
BOOST_DATA_TEST_CASE(width_vocab_two_steps_is_exhaustive, bdata::make({"Once upon a time", "The cat"}) * bdata::make({0.0, 1.0}),
                     prompt, penalty) {
  Fixture& f = fx();
  const int V = f.vocab();
  const auto ids = f.encode(prompt);
  const int n = static_cast<int>(ids.size());
  auto kv = f.store(n + 2);
  auto log_softmax = [](std::span<const float> l) {
    double m = -INFINITY;
    for (float x : l) m = std::max<double>(m, x);
    double s = 0;
    for (float x : l) s += std::exp(x - m);
    std::vector<double> out(l.size());
    for (std::size_t i = 0; i < l.size(); ++i) out[i] = l[i] - m - std::log(s);
    return out;
  };
  const std::int32_t eos = f.tok->eos_id(), bos = f.tok->bos_id();
  auto ends = [eos, bos](std::int32_t t) { return t == eos || t == bos; };
  kv->clear();
  const auto first = log_softmax(f.model->forward(ids, 0, *kv));
  double best = -INFINITY;
  std::vector<std::int32_t> best_seq;
  for (std::int32_t a = 0; a < V; ++a) {
    if (ends(a)) {
      const double s = first[a] / std::pow(1.0, penalty);
      if (s > best) best = s, best_seq = {a};
      continue;
    }
    kv->clear();
    f.model->forward(ids, 0, *kv);
    const auto second = log_softmax(f.model->forward(std::span(&a, 1), n, *kv));
    for (std::int32_t b = 0; b < V; ++b) {
      const double s = (first[a] + second[b]) / std::pow(2.0, penalty);
      if (s > best) best = s, best_seq = {a, b};
    }
  }
  const Recorder r = f.beam(prompt, V, 2, penalty, n + 2);
  BOOST_TEST_REQUIRE(r.sum.beam.has_value());
  const auto& win = r.sum.beam->hypotheses.at(0);
  BOOST_TEST(win.tokens == best_seq, boost::test_tools::per_element());
  BOOST_TEST(win.normalized == best, boost::test_tools::tolerance(1e-4));
  BOOST_TEST(r.tokens == best_seq, boost::test_tools::per_element());
}

// --- through the binary: traces validate and render, bad values are one-line errors ---

BOOST_AUTO_TEST_CASE(trace_validates_and_renders) {
  const fs::path dir = gbtest::temp_dir("beam");
  const std::string trace = (dir / "beam.jsonl").string();
  std::vector<std::string> args{"run"};
  for (const auto& x : gbtest::stories_args()) args.push_back(x);
  for (const char* x : {"-p", "Once upon a time", "-n", "16", "--beam-width", "4", "--length-penalty", "0.5", "--trace"}) args.push_back(x);
  args.push_back(trace);
  const auto r = gbtest::run_cli(args);
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto t = glassbox::traces::read_trace(trace);
  BOOST_TEST_REQUIRE(t.summary->beam.has_value());
  BOOST_TEST(t.summary->beam->width == 4);
  BOOST_TEST(t.summary->beam->hypotheses.at(0).tokens == t.tokens(), boost::test_tools::per_element());
  for (const auto& s : t.steps) BOOST_TEST(s.beams.has_value());
  // The streamed text is the winner's: its steps' texts (the end-of-generation token's not shown).
  std::string text;
  for (int k = 0; k < t.summary->generated; ++k) text += t.steps[k].token_text;
  BOOST_TEST(r.out.substr(0, text.size()) == text);
  const auto v = gbtest::run_cli({"trace", "validate", trace});
  BOOST_TEST(v.rc == 0, v.err);
  const auto d = gbtest::run_cli({"trace", "render", trace, "--to", "dot", "-o", (dir / "beam.dot").string()});
  BOOST_TEST_REQUIRE(d.rc == 0, d.err);
  const std::string dot = gbtest::read_file(dir / "beam.dot");
  BOOST_TEST(dot.find("beam search, width 4") != std::string::npos);
  BOOST_TEST(dot.find("b0_3") != std::string::npos);  // step 0's fourth beam
  const auto svg = gbtest::run_cli({"trace", "render", trace, "-o", (dir / "beam.svg").string()});
  BOOST_TEST(svg.rc == 0, svg.err);
  // A corrupted parent is named by the validator: at step 0 (line 2) every entry extends the prompt, beam 0.
  std::string text2 = gbtest::read_file(trace);
  const auto line2 = text2.find('\n') + 1;
  const auto at = text2.find("\"parent\":0", line2);
  BOOST_TEST_REQUIRE((at != std::string::npos && at < text2.find('\n', line2)));
  text2.replace(at, 10, "\"parent\":9");
  gbtest::write_file(dir / "bad.jsonl", text2);
  const auto bad = gbtest::run_cli({"trace", "validate", (dir / "bad.jsonl").string()});
  BOOST_TEST(bad.rc != 0);
  BOOST_TEST(bad.err.find("parent") != std::string::npos, bad.err);
}

struct NeedsToy {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    boost::test_tools::assertion_result r(fs::exists(fs::path(GLASSBOX_BINARY_DIR) / "share/glassbox/models/toy.bin"));
    if (!r) r.message() << "the embedded toy model is not built (models/toy/toy.bin missing)";
    return r;
  }
};

// The toy model (embedded default): width 1 and greedy give the same text and the same trace tokens.
BOOST_AUTO_TEST_CASE(toy_width_one_is_greedy, *boost::unit_test::precondition(NeedsToy())) {
  const fs::path dir = gbtest::temp_dir("beam-toy");
  const auto g = gbtest::run_cli({"run", "-p", "the weather in Paris is", "-n", "24", "--sampler", "greedy", "--trace",
                                  (dir / "g.jsonl").string()});
  BOOST_TEST_REQUIRE(g.rc == 0, g.err);
  const auto b = gbtest::run_cli({"run", "-p", "the weather in Paris is", "-n", "24", "--beam-width", "1", "--trace",
                                  (dir / "b.jsonl").string()});
  BOOST_TEST_REQUIRE(b.rc == 0, b.err);
  BOOST_TEST(b.out == g.out);
  const auto tg = glassbox::traces::read_trace((dir / "g.jsonl").string());
  const auto tb = glassbox::traces::read_trace((dir / "b.jsonl").string());
  BOOST_TEST(tb.tokens() == tg.tokens(), boost::test_tools::per_element());
}

// compare takes beam:N as a strategy: beam:1 writes greedy's texts, the report says what the search cost,
// and each run's command is the `run --beam-width` that reproduces it.
BOOST_AUTO_TEST_CASE(compare_takes_beam_strategies) {
  std::vector<std::string> args{"compare"};
  for (const auto& x : gbtest::stories_args()) args.push_back(x);
  for (const char* x : {"-p", "Once upon a time", "-p", "The cat", "-s", "greedy", "-s", "beam:1", "-s", "wide=beam:width=3;length_penalty=0.5",
                        "-N", "2", "-n", "12", "-j", "1", "--json"})
    args.push_back(x);
  const auto r = gbtest::run_cli(args);
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto rep = nlohmann::json::parse(r.out);
  const auto& st = rep.at("strategies");
  BOOST_TEST_REQUIRE(st.size() == 3u);
  BOOST_TEST(!st[0].contains("beam"));
  BOOST_TEST(st[1].at("beam").at("width") == 1);
  BOOST_TEST(st[1].at("beam").at("forwards_per_step").get<double>() == 1.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(st[2].at("label") == "wide");
  BOOST_TEST(st[2].at("beam").at("width") == 3);
  BOOST_TEST(st[2].at("beam").at("length_penalty").get<double>() == 0.5);
  BOOST_TEST(st[2].at("beam").at("forwards_per_step").get<double>() > 2.0);
  std::map<std::pair<int, int>, std::string> greedy;
  for (const auto& run : rep.at("runs"))
    if (run.at("strategy") == 0) greedy[{run.at("prompt").get<int>(), run.at("sample").get<int>()}] = run.at("text");
  int checked = 0;
  for (const auto& run : rep.at("runs")) {
    if (run.at("strategy") == 1) {
      BOOST_TEST(run.at("text") == greedy.at({run.at("prompt").get<int>(), run.at("sample").get<int>()}));
      ++checked;
    }
    if (run.at("strategy") == 2)
      BOOST_TEST(run.at("command").get<std::string>().find("--beam-width 3 --length-penalty 0.5") != std::string::npos);
  }
  BOOST_TEST(checked == 4);
  const auto bad = gbtest::run_cli({"compare", "-p", "Hi", "-s", "beam:0", "-N", "1", "-n", "2"});
  BOOST_TEST(bad.rc == 2);
  BOOST_TEST(bad.err.find("width '0'") != std::string::npos, bad.err);
}

struct BadCase {
  std::vector<std::string> args;
  std::string says;
};
std::ostream& operator<<(std::ostream& o, const BadCase& c) { return o << c.says; }

const BadCase kBad[] = {
    {{"--beam-width", "0"}, "--beam-width = 0"},
    {{"--beam-width", "513"}, "beam width 513"},
    {{"--beam-width", "-2"}, "--beam-width = -2"},
    {{"--beam-width", "x"}, "--beam-width = 'x'"},
    {{"--beam-width", "2", "--length-penalty", "nan"}, "--length-penalty = nan"},
    {{"--beam-width", "2", "--length-penalty", "11"}, "--length-penalty = 11"},
    {{"--length-penalty", "0.5"}, "--length-penalty applies to beam search only"},
    {{"--beam-width", "2", "--sampler", "top-k:40"}, "drop --sampler top-k"},
    {{"--beam-width", "2", "--attention", "sliding-window:8"}, "evicts"},
    {{"--beam-width", "2", "--context-policy", "shift"}, "beam search keeps several"},
    // A grammar is a sampler stage: refused with beams rather than silently ignored.
    {{"--beam-width", "2", "--grammar", GLASSBOX_SOURCE_DIR "/docs/grammars/yesno.gbnf"}, "--grammar constrains the sampler chain"},
    {{"--beam-width", "2", "--json-schema", GLASSBOX_SOURCE_DIR "/docs/grammars/answer.schema.json"}, "--json-schema constrains"},
};

// Every beam's K/V rows are bounded together: 512 beams of 500 positions on the 1 MB model would need
// ~335 MB, beyond the run memory bound; the error names --beam-width and the widest that fits.
BOOST_AUTO_TEST_CASE(the_beams_memory_is_bounded) {
  auto args = gbtest::stories_args();
  args.insert(args.begin(), "run");
  args.insert(args.end(), {"-p", "Hi", "-n", "500", "--beam-width", "512"});
  const auto r = gbtest::run_cli(args);
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(r.err.find("--beam-width 512: 512 beams' K/V rows") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("at most --beam-width") != std::string::npos, r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
  // Within the bound, a wide search still runs (its stores hold the prompt and -n more, not the context).
  auto ok = gbtest::stories_args();
  ok.insert(ok.begin(), "run");
  ok.insert(ok.end(), {"-p", "Hi", "-n", "8", "--beam-width", "512"});
  const auto w = gbtest::run_cli(ok);
  BOOST_TEST(w.rc == 0, w.err);
}

// Beam steps go through the step recorder: a full trace with the logit lens and every attention row
// records them on every step of the winner, the lens's last block is the step's own distribution, and the
// tokens, probabilities and beams are the basic trace's, bit for bit (the winner's path replayed).
BOOST_AUTO_TEST_CASE(beams_record_lens_attention_and_logits) {
  const fs::path dir = gbtest::temp_dir("beam-full");
  auto run = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args{"run"};
    for (const auto& x : gbtest::stories_args()) args.push_back(x);
    for (const char* x : {"-p", "Once upon a time", "-n", "12", "--beam-width", "3", "--trace"}) args.push_back(x);
    args.push_back((dir / name).string());
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = gbtest::run_cli(args);
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    return std::make_pair(r.out, glassbox::traces::read_trace(dir / name));
  };
  const auto [basic_out, basic] = run("basic.jsonl", {});
  const auto [full_out, full] = run("full.jsonl", {"--trace-lens", "--trace-attention", "all", "--trace-level", "full"});
  BOOST_TEST(full_out == basic_out);
  BOOST_TEST(full.tokens() == basic.tokens(), boost::test_tools::per_element());
  BOOST_TEST_REQUIRE(full.steps.size() == basic.steps.size());
  const int V = 512, layers = 5;
  for (std::size_t k = 0; k < full.steps.size(); ++k) {
    const auto& f = full.steps[k];
    const auto& b = basic.steps[k];
    BOOST_TEST_CONTEXT("step " << k) {
      BOOST_TEST(f.logits.size() == static_cast<std::size_t>(V));
      BOOST_TEST_REQUIRE(f.lens.has_value());
      BOOST_TEST_REQUIRE(f.lens->size() == static_cast<std::size_t>(layers));
      BOOST_TEST_REQUIRE(f.attention.has_value());
      BOOST_TEST(!f.attention->empty());
      BOOST_TEST(f.beams.has_value());
      // the last block's lens point is the model's own output: the step's distribution
      BOOST_TEST_REQUIRE(f.lens->back().top.size() == f.top.size());
      for (std::size_t j = 0; j < f.top.size(); ++j) BOOST_TEST(f.lens->back().top[j].id == f.top[j].id);
      // the replayed forward gives the search's bits: the same top list and the same chosen probability
      BOOST_TEST((f.top == b.top));
      BOOST_TEST(f.prob == b.prob);
      BOOST_TEST(f.entropy == b.entropy);
      BOOST_TEST((*f.beams == *b.beams));
    }
  }
  const auto v = gbtest::run_cli({"trace", "validate", (dir / "full.jsonl").string()});
  BOOST_TEST(v.rc == 0, v.err);
}

BOOST_DATA_TEST_CASE(bad_values_are_one_line_errors, bdata::make(kBad), c) {
  auto args = gbtest::stories_args();
  args.insert(args.begin(), "run");
  args.insert(args.end(), {"-p", "Hi", "-n", "4"});
  args.insert(args.end(), c.args.begin(), c.args.end());
  const auto r = gbtest::run_cli(args);
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(r.err.find(c.says) != std::string::npos, r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') <= 1, r.err);
}

BOOST_AUTO_TEST_SUITE_END()
