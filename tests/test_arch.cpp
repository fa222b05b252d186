// The architectures beside llama (GPT-2, Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3, llama with tied output and
// rope_freqs) against other engines' outputs for ../shared/gguf/arch/: llama.cpp's, or an independent
// float64 numpy pass where llama.cpp lacks the architecture (qwen3, gemma3). Also the new kernels against
// their scalar twins, the engine's BOS/end-of-generation rules, and bad architecture files.
#define BOOST_TEST_MODULE arch
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/model.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/run_spec.hpp"
#include "registry_fixture.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
namespace k = glassbox::kernels;
using nlohmann::json;

namespace {

// One reference file, the GELU form to run it with and ../shared/gguf/arch/README.md's tolerance.
struct Case {
  std::string file, reference;  // reference: "llamacpp" or "numpy"
  glassbox::GeluKind gelu;
  double tol;
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.file << " (gelu " << glassbox::to_string(c.gelu) << ")"; }

using G = glassbox::GeluKind;
const std::vector<Case> kCases = {
    // F32 SiLU files: 1e-4 of llama.cpp
    {"qwen2-synth-f32", "llamacpp", G::Tanh, 1e-4},
    {"phi3-synth-f32", "llamacpp", G::Tanh, 1e-4},
    {"llama-tied-synth-f32", "llamacpp", G::Tanh, 1e-4},
    {"llama-ropefreqs-synth-f32", "llamacpp", G::Tanh, 1e-4},
    // GELU files: 0.05 with the exact tanh form, 0.02 with llama.cpp's fp16 table
    {"gpt2-synth-f32", "llamacpp", G::Tanh, 0.05},
    {"gpt2-synth-f32", "llamacpp", G::Fp16Table, 0.02},
    {"gemma2-synth-f32", "llamacpp", G::Tanh, 0.05},
    {"gemma2-synth-f32", "llamacpp", G::Fp16Table, 0.02},
    // numpy float64 references (llama.cpp at c392 lacks these): 1e-4; gemma3 0.03 with the table
    {"qwen3-synth-f32", "numpy", G::Tanh, 1e-4},
    {"gemma3-synth-f32", "numpy", G::Tanh, 1e-4},
    {"gemma3-synth-f32", "numpy", G::Fp16Table, 0.03},
    // F16: 0.05; Q8_0 with llama.cpp's activation rounding: 0.5
    {"gpt2-synth-f16", "llamacpp", G::Fp16Table, 0.05},
    {"qwen2-synth-f16", "llamacpp", G::Tanh, 0.05},
    {"gpt2-synth-q8_0", "llamacpp", G::Fp16Table, 0.5},
    {"qwen2-synth-q8_0", "llamacpp", G::Tanh, 0.5},
};

using gbtest::registry;  // the default registry, loaded once (registry_fixture.hpp)

std::unique_ptr<glassbox::Tokenizer> tokenizer_of(const glassbox::ModelSource& src) {
  return registry().make_tokenizer({glassbox::tokenizer_for(registry(), src.metadata(), "model"), {}}, src.metadata());
}

glassbox::MetaValue u32(std::int64_t v) { return {glassbox::MetaType::U32, glassbox::MetaType::U8, static_cast<std::uint64_t>(v)}; }
glassbox::MetaValue str(const std::string& v) { return {glassbox::MetaType::String, glassbox::MetaType::U8, v}; }

fs::path arch_file(const std::string& name) { return gbtest::shared("gguf/arch/" + name + ".gguf"); }
fs::path golden_of(const Case& c) { return gbtest::shared("golden/arch/" + c.reference + "-" + c.file + ".jsonl"); }

std::size_t argmax(std::span<const float> v) { return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

// A copy of a GGUF file with its metadata and tensors edited: meta(writer) after the keys are copied,
// tensor(name) returns false to leave a tensor out.
void rewrite(const fs::path& from, const fs::path& to, const std::function<void(glassbox::GgufWriter&)>& meta,
             const std::function<bool(const std::string&)>& keep = {}) {
  auto src = glassbox::ModelSource::open(from);
  const glassbox::GgufFile& g = *src->gguf();
  glassbox::GgufWriter w;
  for (const auto& [key, value] : g.metadata().entries()) w.set(key, value);
  if (meta) meta(w);
  for (const auto& info : g.tensors()) {
    if (keep && !keep(info.name)) continue;
    const glassbox::Tensor t = g.tensor(info);
    std::vector<std::int64_t> shape(t.shape.begin(), t.shape.begin() + t.n_dims);
    w.add_tensor(info.name, t.dtype, shape, std::vector<std::byte>(t.data, t.data + t.bytes));
  }
  w.write(to);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reference_files, *boost::unit_test::precondition(gbtest::NeedsShared{}))

// Prompt ids from the file's own vocabulary (BOS only where it asks for one), and the logits at every
// position teacher-forced on the reference's ids, within the README's tolerance; argmax ≥ 97%. Each
// position runs alone (the decode path), and the prompt also as one block (the prefill path).
BOOST_DATA_TEST_CASE(logits_match_the_reference, bdata::make(kCases), c) {
  auto src = glassbox::ModelSource::open(arch_file(c.file));
  glassbox::Config cfg = src->config();
  cfg.gelu = c.gelu;
  auto tok = tokenizer_of(*src);
  double worst = 0, worst_block = 0;
  int agree = 0, positions = 0;
  for (const json& g : gbtest::read_jsonl(golden_of(c))) {
    const auto prompt_ids = g["prompt_ids"].get<std::vector<std::int32_t>>();
    BOOST_TEST(tok->encode(g["prompt"].get<std::string>(), tok->add_bos(), tok->add_eos()) == prompt_ids,
               c.file << ": prompt ids of '" << g["prompt"].get<std::string>() << "'");
    std::vector<std::int32_t> ids;
    for (const auto& s : g["steps"]) ids.push_back(s["token"].get<std::int32_t>());
    glassbox::Transformer model(cfg, src->weights(), 1);
    auto cache = registry().make_attention({"kv-cache", {}}, cfg.attention_shape());
    for (std::size_t p = 0; p < ids.size(); ++p) {
      const auto got = model.forward(std::span(ids).subspan(p, 1), static_cast<int>(p), *cache);
      const auto& want = g["steps"][p]["logits"];
      BOOST_REQUIRE_EQUAL(want.size(), got.size());
      std::size_t ref_arg = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(double(got[i]) - want[i].get<double>()));
        if (want[i].get<double>() > want[ref_arg].get<double>()) ref_arg = i;
      }
      agree += argmax(got) == ref_arg;
      ++positions;
    }
    // The whole teacher-forced sequence as one block (prefill; crosses the sliding windows at once).
    glassbox::Transformer block(cfg, src->weights(), static_cast<int>(ids.size()));
    auto cache2 = registry().make_attention({"kv-cache", {}}, cfg.attention_shape());
    const auto last = block.forward(std::span(ids), 0, *cache2);
    const auto& want = g["steps"][ids.size() - 1]["logits"];
    for (std::size_t i = 0; i < want.size(); ++i) worst_block = std::max(worst_block, std::abs(double(last[i]) - want[i].get<double>()));
  }
  BOOST_TEST_MESSAGE(c << ": max |Δlogit| " << worst << " (block " << worst_block << "; tolerance " << c.tol << "), argmax " << agree << "/"
                       << positions);
  BOOST_TEST(worst <= c.tol, c << ": max |Δlogit| " << worst << " exceeds " << c.tol);
  BOOST_TEST(worst_block <= c.tol, c << ": prefill block's max |Δlogit| " << worst_block << " exceeds " << c.tol);
  BOOST_TEST(double(agree) / positions >= 0.97, c << ": argmax agrees at only " << agree << "/" << positions);
}

// Every file runs with --model alone; greedy tokens from the CLI equal the reference's greedy ids
// (F32 SiLU files, where the reference is within 2e-5: no near-tie can flip them).
BOOST_DATA_TEST_CASE(greedy_run_from_the_command_line,
                     bdata::make(std::vector<std::string>{"qwen2-synth-f32", "phi3-synth-f32", "llama-tied-synth-f32", "llama-ropefreqs-synth-f32"}),
                     file) {
  const json g = gbtest::read_jsonl(gbtest::shared("golden/arch/llamacpp-" + file + ".jsonl"))[0];
  const auto want = g["greedy_ids"].get<std::vector<std::int32_t>>();
  const fs::path dir = gbtest::temp_dir("arch-greedy-" + file);
  const fs::path trace = dir / "t.jsonl";
  const auto r = gbtest::run_cli({"run", "--model", arch_file(file).string(), "--prompt", g["prompt"].get<std::string>(), "--sampler", "greedy",
                                  "--max-tokens", "20", "--trace", trace.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, file << ": " << r.err);
  const auto lines = gbtest::read_jsonl(trace);
  BOOST_TEST(lines.front()["prompt_ids"] == g["prompt_ids"], file << ": header prompt ids");
  BOOST_TEST(lines.front()["model"]["architecture"] == g["file"].get<std::string>().substr(0, lines.front()["model"]["architecture"].get<std::string>().size()));
  BOOST_TEST(lines.front()["model"].contains("arch"));
  std::vector<std::int32_t> got;
  for (const auto& l : lines)
    if (l["type"] == "step") got.push_back(l["token"]["id"].get<std::int32_t>());  // the prefill step chooses the first
  const std::size_t n = std::min<std::size_t>(got.size(), 20);
  BOOST_TEST_REQUIRE(n >= 1u);
  for (std::size_t i = 0; i < n; ++i) BOOST_TEST(got[i] == want[i], file << " greedy step " << i);
}

// A tokenizer.ggml.eot_token_id other than EOS ends generation there, and the summary names it.
BOOST_AUTO_TEST_CASE(an_end_of_turn_id_other_than_eos_stops_generation) {
  const json g = gbtest::read_jsonl(gbtest::shared("golden/arch/llamacpp-qwen2-synth-f32.jsonl"))[0];
  const std::int32_t first = g["greedy_ids"][0].get<std::int32_t>(), second = g["greedy_ids"][1].get<std::int32_t>();
  BOOST_TEST_REQUIRE(first != second);
  const fs::path dir = gbtest::temp_dir("arch-eot");
  const fs::path model = dir / "eot.gguf", trace = dir / "t.jsonl";
  rewrite(arch_file("qwen2-synth-f32"), model, [&](glassbox::GgufWriter& w) {
    w.set("tokenizer.ggml.eot_token_id", u32(second));
  });
  const auto r = gbtest::run_cli({"run", "--model", model.string(), "--prompt", g["prompt"].get<std::string>(), "--sampler", "greedy",
                                  "--max-tokens", "30", "--trace", trace.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const json summary = gbtest::read_jsonl(trace).back();
  BOOST_TEST(summary["stop_reason"] == "stop_token");
  BOOST_TEST(summary["stop_token"] == second);
  BOOST_TEST(summary["generated"] == 1);
}

// shift re-rotates keys; GPT-2's learned positions have none: exit 2 with one line.
BOOST_AUTO_TEST_CASE(shift_on_learned_positions_is_refused) {
  const auto r = gbtest::run_cli({"run", "--model", arch_file("gpt2-synth-f32").string(), "--prompt", "Once upon a time", "--context", "16",
                                  "--context-policy", "shift", "--max-tokens", "30"});
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("learned absolute positions") != std::string::npos, r.err);
  const auto t = gbtest::run_cli({"run", "--model", arch_file("gpt2-synth-f32").string(), "--prompt", "Once upon a time", "--context", "16",
                                  "--context-policy", "truncate-left", "--max-tokens", "30"});
  BOOST_TEST(t.rc == 0, t.err);
}

// Bad files name what is wrong: an unknown architecture lists the supported ones; a missing tensor, a
// tensor of the wrong shape and a tensor the architecture does not use are named, with shapes.
BOOST_AUTO_TEST_CASE(bad_architecture_files_name_what_is_wrong) {
  const fs::path dir = gbtest::temp_dir("arch-bad");
  auto error_of = [&](const fs::path& p) {
    try {
      glassbox::ModelSource::open(p);
    } catch (const glassbox::ModelError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const fs::path qwen = arch_file("qwen2-synth-f32");
  rewrite(qwen, dir / "mamba.gguf", [](glassbox::GgufWriter& w) { w.set("general.architecture", str("mamba")); });
  std::string e = error_of(dir / "mamba.gguf");
  BOOST_TEST(e.find("'mamba' is not supported") != std::string::npos, e);
  BOOST_TEST(e.find("gpt2, qwen2, qwen3, gemma2, gemma3, phi3") != std::string::npos, e);

  rewrite(qwen, dir / "missing.gguf", {}, [](const std::string& n) { return n != "blk.1.attn_k.bias"; });
  e = error_of(dir / "missing.gguf");
  BOOST_TEST(e.find("tensor 'blk.1.attn_k.bias' is missing (required for architecture qwen2)") != std::string::npos, e);

  // The llama-tied file said to be qwen2 lacks its biases; a qwen2 file said to be llama has unused ones.
  rewrite(qwen, dir / "as-llama.gguf", [](glassbox::GgufWriter& w) {
    glassbox::GgufWriter& x = w;
    x.set("general.architecture", str("llama"));
    for (const char* key : {"embedding_length", "feed_forward_length", "block_count", "attention.head_count", "attention.head_count_kv",
                            "context_length", "attention.layer_norm_rms_epsilon", "rope.freq_base"})
      if (const auto* v = w.metadata().find(std::string("qwen2.") + key)) x.set(std::string("llama.") + key, *v);
  });
  e = error_of(dir / "as-llama.gguf");
  BOOST_TEST(e.find("tensor 'blk.0.attn_q.bias' is not used by architecture llama") != std::string::npos, e);

  // A q bias of the wrong length: named with its shape and the expected one.
  {
    auto src = glassbox::ModelSource::open(qwen);
    const glassbox::GgufFile& g = *src->gguf();
    glassbox::GgufWriter w;
    for (const auto& [key, value] : g.metadata().entries()) w.set(key, value);
    for (const auto& info : g.tensors()) {
      const glassbox::Tensor t = g.tensor(info);
      std::vector<std::int64_t> shape(t.shape.begin(), t.shape.begin() + t.n_dims);
      std::vector<std::byte> data(t.data, t.data + t.bytes);
      if (info.name == "blk.0.attn_q.bias") {
        shape = {64};
        data.resize(64 * 4);
      }
      w.add_tensor(info.name, t.dtype, shape, data);
    }
    w.write(dir / "shape.gguf");
  }
  e = error_of(dir / "shape.gguf");
  BOOST_TEST(e.find("tensor 'blk.0.attn_q.bias' has shape 64 (expected 128") != std::string::npos, e);
  const auto r = gbtest::run_cli({"run", "--model", (dir / "shape.gguf").string(), "--prompt", "x"});
  BOOST_TEST(r.rc == 2, r.err);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- kernels against their scalar twins -------------------------------------------------------------
BOOST_DATA_TEST_CASE(new_kernels_equal_their_scalar_twins, bdata::make({1, 7, 64, 129, 1000}) * bdata::make({1, 2, 3}), n, threads) {
  const int before = k::threads();
  k::set_threads(threads);
  const std::size_t N = static_cast<std::size_t>(n), rows = 5;
  const auto x = gbtest::uniform_floats(rows * N, 1, -12.0f, 12.0f);
  const auto w = gbtest::uniform_floats(N, 2, 0.5f, 1.5f), b = gbtest::uniform_floats(N, 3, -1.0f, 1.0f);
  std::vector<float> got(rows * N), want(rows * N);
  k::layernorm_rows(got.data(), x.data(), w.data(), b.data(), rows, N, 1e-5f);
  for (std::size_t t = 0; t < rows; ++t) k::layernorm_scalar(want.data() + t * N, x.data() + t * N, w.data(), b.data(), N, 1e-5f);
  BOOST_TEST(got == want);
  got = x;
  want = x;
  k::add_bias(got.data(), b.data(), rows, N);
  k::add_bias_scalar(want.data(), b.data(), rows, N);
  BOOST_TEST(got == want);
  for (auto kind : {glassbox::GeluKind::Tanh, glassbox::GeluKind::Erf, glassbox::GeluKind::Fp16Table}) {
    got = x;
    want = x;
    k::gelu(got.data(), got.size(), kind);
    k::gelu_scalar(want.data(), want.size(), kind);
    BOOST_TEST(got == want);
    got = x;
    want = x;
    k::geglu(got.data(), x.data(), got.size(), kind);
    k::geglu_scalar(want.data(), x.data(), want.size(), kind);
    BOOST_TEST(got == want);
  }
  got = x;
  want = x;
  k::softcap(got.data(), got.size(), 1.5f);
  k::softcap_scalar(want.data(), want.size(), 1.5f);
  BOOST_TEST(got == want);
  k::set_threads(before);
}

BOOST_DATA_TEST_CASE(neox_rope_equals_its_scalar_twin, bdata::make({8, 16, 32, 64}) * bdata::make({0, 1}), hs, partial) {
  const std::size_t head = hs, n_rot = partial ? head / 2 : head, heads = 3;
  const auto x = gbtest::uniform_floats(head * heads, 4, -2.0f, 2.0f), cs = gbtest::uniform_floats(head, 5, -1.0f, 1.0f);
  auto got = x, want = x;
  k::rope_neox(got.data(), cs.data(), got.size(), head, n_rot);
  k::rope_neox_scalar(want.data(), cs.data(), want.size(), head, n_rot);
  BOOST_TEST(got == want);
  // Dims from n_rot on are untouched.
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t i = n_rot; i < head; ++i) BOOST_TEST(got[h * head + i] == x[h * head + i]);
}

// The definitions themselves, on values whose results are known.
BOOST_AUTO_TEST_CASE(gelu_forms_and_softcap_definitions) {
  using glassbox::GeluKind;
  BOOST_TEST(k::gelu_one(0.0f, GeluKind::Tanh) == 0.0f);
  BOOST_TEST(k::gelu_one(1.0f, GeluKind::Erf) == 0.8413447f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(k::gelu_one(1.0f, GeluKind::Tanh) == 0.8411920f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(k::gelu_one(-11.0f, GeluKind::Fp16Table) == 0.0f);  // llama.cpp's clamp
  BOOST_TEST(k::gelu_one(12.5f, GeluKind::Fp16Table) == 12.5f);
  BOOST_TEST(k::gelu_one(1.0f, GeluKind::Fp16Table) == 0.8413086f, boost::test_tools::tolerance(1e-7f));  // fp16(0.841192)
  float v[2] = {25.0f, -1e9f};
  k::softcap_scalar(v, 2, 20.0f);
  BOOST_TEST(v[0] == 20.0f * std::tanh(25.0f / 20.0f), boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(v[1] == -20.0f);
}
