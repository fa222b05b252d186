// Batched decode (SampledBatch over Transformer::forward_batch): several runs stepped together give, run by
// run, the trace each gives alone — every token, probability, logit (full traces, base64 float32), stage,
// lens row and attention weight, bit for bit — over architectures, weight types and attention modules, with
// runs of different lengths leaving the batch, runs joining it mid-way, and more runs than rows.
#define BOOST_TEST_MODULE batch
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "glassbox/batch.hpp"
#include "glassbox/error.hpp"
#include "glassbox/run_spec.hpp"
#include "glassbox/strategy.hpp"
#include "glassbox/traces/writer.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using namespace glassbox;
using nlohmann::json;
using glassbox::traces::JsonlWriter;
using glassbox::traces::WriterThread;

namespace {

struct Model {
  std::shared_ptr<const LoadedModel> loaded;
};

std::shared_ptr<const Registry> registry() {
  static std::shared_ptr<const Registry> reg = [] {
    std::vector<std::string> warnings;
    return load_registry({}, warnings);
  }();
  return reg;
}

std::shared_ptr<const LoadedModel> load(const std::string& rel) {
  ModelSpec spec;
  spec.model = gbtest::shared(rel);
  if (rel.ends_with(".bin")) spec.tokenizer = {"llama2c", {{"path", gbtest::shared("models/tok512.bin").string()}}};
  spec.model_hash = false;
  return load_model(registry(), spec);
}

// A trace's lines with the timings taken out (the only fields a batched run may change).
std::vector<json> lines(const fs::path& p) {
  std::vector<json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line);
    for (const char* k : {"ms", "ttft_ms", "decode_tok_s", "prefill_tok_s", "batch"}) j.erase(k);
    out.push_back(std::move(j));
  }
  return out;
}

struct Job {
  std::string prompt;
  std::vector<PluginSpec> sampler;
  std::uint64_t seed;
  int max_tokens;
};

const Job kJobs[] = {
    {"Once upon a time", {{"greedy", {}}}, 1, 24},
    {"The little dog", {{"top-k", {{"k", "40"}}}, {"temperature", {{"temperature", "0.8"}}}, {"dist", {}}}, 7, 17},
    {"Lily and Ben went to the park. They", {{"min-p", {{"p", "0.05"}}}, {"dist", {}}}, 3, 30},
    {"One day", {{"repetition-penalty", {{"penalty", "1.3"}}}, {"top-p", {{"p", "0.9"}}}, {"dist", {}}}, 11, 9},
};

GenerateOptions options(const Job& j) {
  GenerateOptions g;
  g.max_tokens = j.max_tokens;
  g.seed = j.seed;
  g.stop_at_eos = false;  // every run goes its full length (different lengths: runs leave the batch one by one)
  g.stop_at_bos = false;
  g.watch.level = TraceLevel::Full;
  g.watch.lens = LensPoints::All;
  g.watch.attention.on = true;
  return g;
}

// Solo: run_strategy with SampledStrategy, one run after another. Batched: the same pipelines through a
// SampledBatch of `rows` rows, job `late` joining after `late_after` steps. Traces compared line by line.
void check_batched_equals_solo(const std::string& model_rel, const std::string& attention, int rows, int late_after, bool own_models) {
  auto loaded = load(model_rel);
  const fs::path dir = fs::temp_directory_path() / ("gb_batch_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::unique_ptr<Pipeline>> pipes;
  for (const Job& j : kJobs) {
    RunSpec spec;
    spec.attention = {attention, {}};
    if (attention == "sliding-window") spec.attention.params = {{"window", "16"}};  // the runs outgrow it: evictions
    if (attention == "paged") spec.attention.params = {{"block", "4"}};             // many blocks per run
    spec.sampler = j.sampler;
    spec.seed = j.seed;
    spec.context = 64;
    std::vector<std::string> warnings;
    pipes.push_back(build_pipeline(loaded, spec, warnings));
  }
  // Prefill blocks of 4 positions (solo and batched alike): the longer prompts take several, which the batch
  // runs one per step (chunked prefill) while the others decode.
  for (auto& p : pipes) p->model = std::make_unique<Transformer>(p->config, loaded->source->weights(), 4);
  const std::size_t n = pipes.size();
  auto ids = [&](std::size_t i) { return pipes[i]->tokenizer->encode(kJobs[i].prompt, pipes[i]->tokenizer->add_bos(), false); };
  for (std::size_t i = 0; i < n; ++i) {
    JsonlWriter w((dir / ("solo" + std::to_string(i) + ".jsonl")).string(), *pipes[i]->tokenizer, false, WriterThread::None);
    SampledStrategy s;
    Pipeline& p = *pipes[i];
    run_strategy({*p.model, *p.tokenizer, *p.attention, p.sampler.get()}, s, ids(i), kJobs[i].prompt, options(kJobs[i]), p.header, w,
                 [](std::string_view) {});
  }
  Transformer batch_model(pipes[0]->config, loaded->source->weights(), rows);
  SampledBatch batch(batch_model);
  std::vector<std::unique_ptr<JsonlWriter>> writers;
  std::vector<std::string> streamed(n);
  const std::size_t late = n - 1;
  auto add = [&](std::size_t i) {
    writers[i] = std::make_unique<JsonlWriter>((dir / ("batch" + std::to_string(i) + ".jsonl")).string(), *pipes[i]->tokenizer, false,
                                               WriterThread::None);
    Pipeline& p = *pipes[i];
    // each run's own Transformer (the chains and records then run on the threads), or the batch's for all but
    // the first (one after another)
    Transformer& m = own_models || i == 0 ? *p.model : batch_model;
    batch.add({m, *p.tokenizer, *p.attention, p.sampler.get()}, ids(i), kJobs[i].prompt, options(kJobs[i]), p.header, *writers[i],
              [&streamed, i](std::string_view piece) { streamed[i] += piece; });
  };
  writers.resize(n);
  for (std::size_t i = 0; i < late; ++i) add(i);
  int steps = 0;
  while (true) {
    if (steps == late_after) add(late);
    const std::size_t open = batch.step();
    ++steps;
    if (open == 0 && steps > late_after) break;
    BOOST_REQUIRE(steps < 500);
  }
  if (attention == "recompute") {
    BOOST_TEST(batch.passes() == 0);  // every step re-runs its own sequence: nothing to batch
  } else {
    BOOST_TEST(batch.passes() > 0);
    BOOST_TEST(static_cast<double>(batch.rows()) / batch.passes() > 1.5, "mean batch " << static_cast<double>(batch.rows()) / batch.passes());
  }
  for (std::size_t i = 0; i < n; ++i) {
    BOOST_TEST_CONTEXT(model_rel << ", " << attention << ", " << rows << " rows, run " << i) {
      BOOST_TEST(!batch.error(i));
      BOOST_TEST(!batch.open(i));
      BOOST_TEST(batch.summary(i).generated == kJobs[i].max_tokens);
      const auto a = lines(dir / ("solo" + std::to_string(i) + ".jsonl"));
      const auto b = lines(dir / ("batch" + std::to_string(i) + ".jsonl"));
      BOOST_REQUIRE_EQUAL(a.size(), b.size());
      BOOST_REQUIRE(a.size() >= 3u);
      for (std::size_t l = 0; l < a.size(); ++l) BOOST_TEST(a[l] == b[l], "line " << l << " differs");
      // The batched trace says which steps ran in a pass of several (the one field beside the timings that differs).
      std::ifstream raw(dir / ("batch" + std::to_string(i) + ".jsonl"));
      const std::string text((std::istreambuf_iterator<char>(raw)), std::istreambuf_iterator<char>());
      if (attention != "recompute") BOOST_TEST(text.find("\"batch\":") != std::string::npos);
      else BOOST_TEST(text.find("\"batch\":") == std::string::npos);
      BOOST_TEST(!streamed[i].empty());
    }
  }
  if (!std::getenv("GB_KEEP")) fs::remove_all(dir);
}

// Counts its steps; throws at step `throw_at`.
struct Counting : TraceSink {
  int steps = 0, throw_at = -1;
  Summary sum;
  bool summarized = false;
  void header(const RunHeader&) override {}
  void step(const StepEvent&) override {
    if (++steps == throw_at) throw OutputError("disk full (test)");
  }
  void summary(const Summary& s) override {
    sum = s;
    summarized = true;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(batch, *boost::unit_test::precondition(gbtest::NeedsShared()))

// Architectures and weight types, the plain K/V cache; 4 rows (every run in one pass; each run its own
// Transformer, so the chains and records run on the threads) and 2 (round robin; the batch's Transformer
// shared, the chains and records one after another).
BOOST_DATA_TEST_CASE(batched_runs_trace_as_solo_runs,
                     bdata::make({"models/stories260K.bin", "gguf/stories260K-q4_0.gguf", "gguf/synth128-q4_k_m.gguf",
                                  "gguf/synth256-q6_k.gguf", "gguf/arch/gpt2-synth-q8_0.gguf", "gguf/arch/gemma3-synth-f32.gguf",
                                  "gguf/arch/qwen2-synth-f16.gguf", "gguf/arch/phi3-synth-f32.gguf"}) *
                         bdata::make({4, 2}),
                     model, rows) {
  check_batched_equals_solo(model, "kv-cache", rows, 3, rows == 4);
}

// Every attention module: paged blocks, a sliding window that evicts (the runs outgrow it), and recompute
// (nothing kept: each step re-runs its sequence alone, so those runs never join a pass — still equal).
BOOST_DATA_TEST_CASE(batched_runs_with_every_attention_module, bdata::make({"paged", "sliding-window", "recompute"}), attention) {
  check_batched_equals_solo("models/stories260K.bin", attention, 4, 5, true);
}

// A run whose sink throws ends alone, with what it threw; the others run to their end; an ended run can be
// forgotten (a server's batch outlives its requests), an open one cannot.
BOOST_AUTO_TEST_CASE(a_failing_run_ends_alone) {
  auto loaded = load("models/stories260K.bin");
  std::vector<std::unique_ptr<Pipeline>> pipes;
  for (int i = 0; i < 3; ++i) {
    RunSpec spec;
    spec.sampler = {{"greedy", {}}};
    spec.context = 64;
    std::vector<std::string> warnings;
    pipes.push_back(build_pipeline(loaded, spec, warnings));
  }
  Transformer batch_model(pipes[0]->config, loaded->source->weights(), 3);
  SampledBatch batch(batch_model);
  Counting sinks[3];
  sinks[1].throw_at = 4;
  GenerateOptions g;
  g.max_tokens = 12;
  g.stop_at_eos = g.stop_at_bos = false;
  std::size_t ids[3];
  for (int i = 0; i < 3; ++i) {
    Pipeline& p = *pipes[i];
    ids[i] = batch.add({*p.model, *p.tokenizer, *p.attention, p.sampler.get()}, p.tokenizer->encode("Once upon a time", true, false),
                       "Once upon a time", g, p.header, sinks[i], [](std::string_view) {});
  }
  batch.forget(ids[0]);  // open: kept
  BOOST_TEST(batch.open(ids[0]));
  batch.run_all();
  BOOST_TEST(!batch.error(ids[0]));
  BOOST_TEST(!batch.error(ids[2]));
  BOOST_TEST(sinks[0].summarized);
  BOOST_TEST(sinks[2].summarized);
  BOOST_TEST(sinks[0].sum.generated == 12);
  BOOST_TEST(sinks[2].sum.generated == 12);
  BOOST_REQUIRE(batch.error(ids[1]));
  BOOST_TEST(!sinks[1].summarized);
  BOOST_CHECK_THROW(std::rethrow_exception(batch.error(ids[1])), OutputError);
  BOOST_TEST(sinks[1].steps == 4);
  batch.forget(ids[1]);
  BOOST_CHECK_THROW(batch.open(ids[1]), InputError);
  BOOST_TEST(batch.open_runs() == 0u);
}

// Chunked prefill: a long prompt goes in one block per step, and a run already decoding gets a token at
// each of those steps (it would wait for the whole prefill otherwise).
BOOST_AUTO_TEST_CASE(a_long_prompt_is_prefilled_a_block_per_step) {
  auto loaded = load("models/stories260K.bin");
  std::vector<std::unique_ptr<Pipeline>> pipes;
  for (int i = 0; i < 2; ++i) {
    RunSpec spec;
    spec.sampler = {{"greedy", {}}};
    spec.context = 64;
    std::vector<std::string> warnings;
    pipes.push_back(build_pipeline(loaded, spec, warnings));
    pipes.back()->model = std::make_unique<Transformer>(pipes.back()->config, loaded->source->weights(), 4);
  }
  Transformer batch_model(pipes[0]->config, loaded->source->weights(), 2);
  SampledBatch batch(batch_model);
  Counting sinks[2];
  GenerateOptions g;
  g.max_tokens = 20;
  g.stop_at_eos = g.stop_at_bos = false;
  const std::string prompts[] = {"One day", "Lily and Ben went to the park. They saw a big tree and"};
  const auto long_ids = pipes[1]->tokenizer->encode(prompts[1], true, false);
  BOOST_TEST_REQUIRE(long_ids.size() > 12u);  // 4 blocks of 4 or more
  for (int i = 0; i < 2; ++i) {
    Pipeline& p = *pipes[i];
    batch.add({*p.model, *p.tokenizer, *p.attention, p.sampler.get()}, p.tokenizer->encode(prompts[i], true, false), prompts[i], g,
              p.header, sinks[i], [](std::string_view) {});
  }
  batch.step();  // run 0: its whole (one-block) prefill; run 1: its first block
  BOOST_TEST(sinks[0].steps == 1);
  BOOST_TEST(sinks[1].steps == 0);
  batch.step();  // run 0 decodes; run 1's second block
  batch.step();  // run 0 decodes; run 1's third block
  BOOST_TEST(sinks[0].steps == 3);
  BOOST_TEST(sinks[1].steps == 0);
  batch.run_all();
  BOOST_TEST(sinks[0].sum.generated == 20);
  BOOST_TEST(sinks[1].sum.generated == 20);
}

// Prefix reuse: prompts that share their first tokens, through a batch with a PrefixCache, give every run's
// solo trace (tokens, probabilities, logits, lens rows, attention weights, bit for bit); only the prefill's
// record differs, by its timings, its attention work (the copied positions' dot products are not done) and
// `prefix_reused`. Prefill blocks of 4 positions, so the copied prefixes end inside blocks; an identical
// prompt reuses all but its last position; a run added later reuses what an earlier run left; over every
// architecture's layout (GQA, learned positions, sliding-window layers) and the paged store.
BOOST_DATA_TEST_CASE(runs_reusing_a_shared_prefix_trace_as_solo_runs,
                     bdata::make({"models/stories260K.bin@kv-cache", "models/stories260K.bin@paged", "gguf/arch/gpt2-synth-q8_0.gguf@kv-cache",
                                  "gguf/arch/gemma3-synth-f32.gguf@kv-cache", "gguf/arch/qwen2-synth-f16.gguf@kv-cache",
                                  "gguf/synth128-q4_k_m.gguf@kv-cache"}),
                     model_at_attention) {
  const std::string what(model_at_attention);
  const std::string model_rel = what.substr(0, what.find('@')), attention = what.substr(what.find('@') + 1);
  auto loaded = load(model_rel);
  const fs::path dir = fs::temp_directory_path() / ("gb_prefix_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string shared = "Lily and Ben went to the park. They saw a big tree";
  const Job jobs[] = {
      {shared + " and a bird", {{"greedy", {}}}, 1, 12},
      {shared + " with red apples", {{"top-k", {{"k", "40"}}}, {"dist", {}}}, 5, 10},
      {shared + " and a bird", {{"min-p", {{"p", "0.05"}}}, {"dist", {}}}, 9, 11},  // the same prompt as the first
      {shared, {{"greedy", {}}}, 2, 8},                                                // a prefix of the others
      {"One day", {{"greedy", {}}}, 3, 6},                                             // nothing shared
  };
  const std::size_t n = std::size(jobs);
  std::vector<std::unique_ptr<Pipeline>> pipes;
  for (const Job& j : jobs) {
    RunSpec spec;
    spec.attention = {attention, {}};
    if (attention == "paged") spec.attention.params = {{"block", "4"}};
    spec.sampler = j.sampler;
    spec.seed = j.seed;
    spec.context = 64;
    std::vector<std::string> warnings;
    pipes.push_back(build_pipeline(loaded, spec, warnings));
    pipes.back()->model = std::make_unique<Transformer>(pipes.back()->config, loaded->source->weights(), 4);
  }
  auto ids = [&](std::size_t i) { return pipes[i]->tokenizer->encode(jobs[i].prompt, pipes[i]->tokenizer->add_bos(), false); };
  for (std::size_t i = 0; i < n; ++i) {
    JsonlWriter w((dir / ("solo" + std::to_string(i) + ".jsonl")).string(), *pipes[i]->tokenizer, false, WriterThread::None);
    SampledStrategy s;
    Pipeline& p = *pipes[i];
    run_strategy({*p.model, *p.tokenizer, *p.attention, p.sampler.get()}, s, ids(i), jobs[i].prompt, options(jobs[i]), p.header, w,
                 [](std::string_view) {});
  }
  Transformer batch_model(pipes[0]->config, loaded->source->weights(), 4);
  SampledBatch batch(batch_model);
  PrefixCache cache(64 << 20, 2);  // more than the BOS alone
  batch.use_prefix_cache(&cache);
  std::vector<std::unique_ptr<JsonlWriter>> writers(n);
  auto add = [&](std::size_t i) {
    writers[i] = std::make_unique<JsonlWriter>((dir / ("batch" + std::to_string(i) + ".jsonl")).string(), *pipes[i]->tokenizer, false,
                                               WriterThread::None);
    Pipeline& p = *pipes[i];
    batch.add({*p.model, *p.tokenizer, *p.attention, p.sampler.get()}, ids(i), jobs[i].prompt, options(jobs[i]), p.header, *writers[i],
              [](std::string_view) {});
  };
  for (std::size_t i = 0; i + 1 < n; ++i) add(i);
  for (int steps = 0; batch.step() > 0 || steps < 6; ++steps) {
    if (steps == 5) add(n - 1);
    BOOST_REQUIRE(steps < 500);
  }
  // what each prefill copied: run 0 nothing (the cache was empty), runs 1..3 the shared words (run 2 all but its
  // last position: run 0 left the same prompt; run 3 all but its last), run 4 nothing
  std::vector<std::int64_t> reused(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    std::ifstream in(dir / ("batch" + std::to_string(i) + ".jsonl"));
    std::string line;
    while (std::getline(in, line)) {
      const json j = json::parse(line);
      if (j.value("phase", "") == "prefill") reused[i] = j.value("prefix_reused", std::int64_t{0});
    }
  }
  const auto n_shared = static_cast<std::int64_t>(ids(3).size());
  BOOST_TEST(reused[0] == 0);
  BOOST_TEST(reused[1] >= n_shared - 1);
  BOOST_TEST(reused[1] < static_cast<std::int64_t>(ids(1).size()));
  BOOST_TEST(reused[2] == static_cast<std::int64_t>(ids(2).size()) - 1);
  BOOST_TEST(reused[3] == n_shared - 1);
  BOOST_TEST(reused[4] == 0);
  const PrefixCache::Stats st = cache.stats();
  BOOST_TEST(st.hits == 3);
  BOOST_TEST(st.reused_positions == reused[1] + reused[2] + reused[3]);
  BOOST_TEST(st.bytes <= st.max_bytes);
  for (std::size_t i = 0; i < n; ++i) {
    BOOST_TEST_CONTEXT(what << ", run " << i << " (" << reused[i] << " positions reused)") {
      BOOST_TEST(!batch.error(i));
      auto a = lines(dir / ("solo" + std::to_string(i) + ".jsonl"));
      auto b = lines(dir / ("batch" + std::to_string(i) + ".jsonl"));
      BOOST_REQUIRE_EQUAL(a.size(), b.size());
      BOOST_REQUIRE(a.size() >= 3u);
      for (std::size_t l = 0; l < a.size(); ++l) {
        if (b[l].value("phase", "") == "prefill" && reused[i] > 0) {
          BOOST_TEST(b[l]["attention_dots"].get<std::int64_t>() < a[l]["attention_dots"].get<std::int64_t>());
          for (json* j : {&a[l], &b[l]}) j->erase("attention_dots"), j->erase("prefix_reused");
        }
        BOOST_TEST(a[l] == b[l], "line " << l << " differs");
      }
    }
  }
  if (!std::getenv("GB_KEEP")) fs::remove_all(dir);
}

// The batched forward itself, over every file in ../shared/gguf (every architecture and weight type there):
// B = 1, 2, 3 and 8 sequences, each at its own position (prompts of different lengths, then a step of every
// earlier B), give each row the logits of that sequence's solo forward, bit for bit.
std::vector<std::string> shared_ggufs() {
  std::vector<std::string> out;
  if (!gbtest::shared_dir()) return {"(no shared data)"};
  for (const char* sub : {"gguf", "gguf/arch"})
    for (const auto& e : fs::directory_iterator(gbtest::shared(sub)))
      if (e.path().extension() == ".gguf") out.push_back(std::string(sub) + "/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

BOOST_DATA_TEST_CASE(forward_batch_rows_are_solo_forwards_bit_for_bit, bdata::make(shared_ggufs()), rel) {
  auto loaded = load(rel);
  const Config& cfg = loaded->config;
  constexpr int kSeqs = 8;
  Transformer solo(cfg, loaded->source->weights(), 16), batched(cfg, loaded->source->weights(), kSeqs);
  std::vector<std::unique_ptr<KvStore>> solo_kv, batch_kv;
  std::vector<int> pos(kSeqs);
  auto token = [&](int b, int i) { return static_cast<std::int32_t>((7 * b + 13 * i + 1) % cfg.vocab_size); };
  for (int b = 0; b < kSeqs; ++b) {
    solo_kv.push_back(registry()->make_attention({"kv-cache", {}}, cfg.attention_shape()));
    batch_kv.push_back(registry()->make_attention({"kv-cache", {}}, cfg.attention_shape()));
    std::vector<std::int32_t> prompt;
    for (int i = 0; i < 1 + (3 * b) % 11; ++i) prompt.push_back(token(b, i));  // 1..11 positions: each sequence elsewhere
    solo.forward(prompt, 0, *solo_kv[b]);
    solo.forward(prompt, 0, *batch_kv[b]);
    pos[b] = static_cast<int>(prompt.size());
  }
  const std::size_t vocab = static_cast<std::size_t>(cfg.vocab_size);
  for (const int B : {1, 2, 3, 8}) {
    std::vector<BatchRow> rows;
    for (int b = 0; b < B; ++b) rows.push_back({token(b, pos[b]), pos[b], batch_kv[b].get()});
    const std::span<const float> all = batched.forward_batch(rows);
    BOOST_REQUIRE_EQUAL(all.size(), static_cast<std::size_t>(B) * vocab);
    const std::vector<float> got(all.begin(), all.end());
    for (int b = 0; b < B; ++b) {
      const std::int32_t t = token(b, pos[b]);
      const std::span<const float> one = solo.forward(std::span(&t, 1), pos[b], *solo_kv[b]);
      std::size_t differ = 0;
      float worst = 0;
      for (std::size_t v = 0; v < vocab; ++v)
        if (std::bit_cast<std::uint32_t>(one[v]) != std::bit_cast<std::uint32_t>(got[b * vocab + v]))
          ++differ, worst = std::max(worst, std::abs(one[v] - got[b * vocab + v]));
      BOOST_TEST(differ == 0u, rel << ", B = " << B << ", row " << b << " at position " << pos[b] << ": " << differ
                                   << " logits differ from the solo forward's (largest by " << worst << ")");
      ++pos[b];
    }
  }
}

BOOST_AUTO_TEST_CASE(forward_batch_refuses_bad_rows) {
  auto loaded = load("models/stories260K.bin");
  Transformer m(loaded->config, loaded->source->weights(), 2);
  auto kv = registry()->make_attention({"kv-cache", {}}, loaded->config.attention_shape());
  const BatchRow three[] = {{1, 0, kv.get()}, {1, 0, kv.get()}, {1, 0, kv.get()}};
  BOOST_CHECK_THROW(m.forward_batch(three), InputError);
  const BatchRow none[] = {{1, 0, nullptr}};
  BOOST_CHECK_THROW(m.forward_batch(none), InputError);
  const BatchRow far[] = {{1, loaded->config.seq_len, kv.get()}};
  BOOST_CHECK_THROW(m.forward_batch(far), InputError);
  const BatchRow bad_token[] = {{loaded->config.vocab_size, 0, kv.get()}};
  BOOST_CHECK_THROW(m.forward_batch(bad_token), InputError);
}

BOOST_AUTO_TEST_SUITE_END()
