// GGUF models end to end against llama.cpp's own outputs (../shared/golden/llamacpp-*.jsonl): the
// tokenizer read from the file, logits teacher-forced on llama.cpp's ids, greedy text, and bad files.
#define BOOST_TEST_MODULE gguf_model
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "glassbox/chat_template.hpp"
#include "glassbox/error.hpp"
#include "glassbox/model.hpp"
#include "glassbox/model/gguf.hpp"
#include "glassbox/model/model_source.hpp"
#include "glassbox/registry.hpp"
#include "registry_fixture.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// One reference file and the tolerance gguf/README.md gives for a reader that rounds activations
// as llama.cpp does ("suggested tolerance (1)"; F32: 2e-4, the issue's bar).
struct Case {
  std::string model, type;
  double tol;
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.model << "-" << c.type; }

const std::vector<Case> kCases = {
    {"stories260K", "f32", 2e-4},  {"stories260K", "f16", 0.02},  {"stories260K", "q8_0", 0.5},
    {"stories260K", "q4_0", 0.5},  {"synth128", "f32", 2e-4},     {"synth128", "f16", 0.04},
    {"synth128", "q8_0", 0.75},    {"synth128", "q4_0", 0.75},    {"synth256", "f32", 2e-4},
    {"synth256", "q8_0", 0.75},    {"synth256", "q6_k", 0.75},    {"synth256", "q5_k_m", 0.75},
    {"synth256", "q4_k_m", 0.75},
    // The fallback and low-bit types (README "Fallback and low-bit types"): the same settings, so the
    // same tolerance as the other synthetic files' rounding-reproduced reader.
    {"synth128", "q4_k_m", 0.75},  {"synth128", "q5_k_m", 0.75},  {"synth128", "q4_1", 0.75},
    {"synth256", "q2_k", 0.75},    {"synth256", "q3_k_m", 0.75},  {"synth256", "iq4_nl", 0.75},
};

using gbtest::registry;  // the default registry, loaded once (registry_fixture.hpp)

// Runs `ids` one position at a time (so every position's logits are seen) and returns them.
std::vector<std::vector<float>> logits_at_every_position(const glassbox::ModelSource& src, const std::vector<std::int32_t>& ids) {
  glassbox::Transformer model(src.config(), src.weights(), 1);
  auto cache = registry().make_attention({"kv-cache", {}}, src.config().attention_shape());
  std::vector<std::vector<float>> out;
  for (std::size_t p = 0; p < ids.size(); ++p) {
    auto l = model.forward(std::span(ids).subspan(p, 1), static_cast<int>(p), *cache);
    out.emplace_back(l.begin(), l.end());
  }
  return out;
}

std::int32_t argmax(const std::vector<float>& v) {
  return static_cast<std::int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The gap between the two largest values: a near-tie under the tolerance makes argmax fragile.
double top2_gap(const json& logits) {
  double a = -1e30, b = -1e30;
  for (const auto& x : logits) {
    const double v = x.get<double>();
    if (v > a) { b = a; a = v; } else if (v > b) b = v;
  }
  return a - b;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reference_files, *boost::unit_test::precondition(gbtest::NeedsShared{}))

// Prompt ids from the file's own vocabulary, and logits at every position teacher-forced on
// llama.cpp's ids (prompt + its greedy continuation), within the README's tolerance.
BOOST_DATA_TEST_CASE(logits_match_llama_cpp, bdata::make(kCases), c) {
  const std::string name = c.model + "-" + c.type;
  auto src = glassbox::ModelSource::open(gbtest::shared("gguf/" + name + ".gguf"));
  BOOST_TEST(src->config().format == "gguf");
  auto tok = registry().make_tokenizer({"llama2c", {}}, src->metadata());
  double worst = 0;
  int agree = 0, positions = 0;
  for (const json& g : gbtest::read_jsonl(gbtest::shared("golden/llamacpp-" + name + ".jsonl"))) {
    const auto prompt_ids = g["prompt_ids"].get<std::vector<std::int32_t>>();
    BOOST_TEST(tok->encode(g["prompt"].get<std::string>(), tok->add_bos(), tok->add_eos()) == prompt_ids,
               "prompt ids of '" << g["prompt"].get<std::string>() << "'");
    std::vector<std::int32_t> ids;
    for (const auto& s : g["steps"]) ids.push_back(s["token"].get<std::int32_t>());
    const auto got = logits_at_every_position(*src, ids);
    for (std::size_t p = 0; p < ids.size(); ++p) {
      const auto& want = g["steps"][p]["logits"];
      BOOST_REQUIRE_EQUAL(want.size(), got[p].size());
      std::size_t ref_arg = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(double(got[p][i]) - want[i].get<double>()));
        if (want[i].get<double>() > want[ref_arg].get<double>()) ref_arg = i;
      }
      agree += argmax(got[p]) == static_cast<std::int32_t>(ref_arg);
      ++positions;
    }
  }
  const double share = double(agree) / positions;
  BOOST_TEST_MESSAGE(name << ": max |Δlogit| " << worst << " (tolerance " << c.tol << "), argmax agrees at " << agree
                          << "/" << positions << " positions");
  BOOST_TEST(worst <= c.tol, name << ": max |Δlogit| " << worst << " exceeds " << c.tol);
  BOOST_TEST(share >= 0.97, name << ": argmax agrees at only " << agree << "/" << positions);
}

// Every llama.cpp reference of a GGUF file in ../shared/golden/ is one of the cases above, so a file
// added there (or a type it needs) cannot go unchecked.
BOOST_AUTO_TEST_CASE(every_reference_file_is_a_case) {
  int found = 0;
  for (const auto& e : fs::directory_iterator(gbtest::shared("golden"))) {
    const std::string f = e.path().filename().string();
    if (f.rfind("llamacpp-", 0) != 0 || e.path().extension() != ".jsonl") continue;
    ++found;
    const std::string name = f.substr(9, f.size() - 9 - 6);
    const bool listed = std::any_of(kCases.begin(), kCases.end(), [&](const Case& c) { return c.model + "-" + c.type == name; });
    BOOST_TEST(listed, f << " has no case in logits_match_llama_cpp");
    BOOST_TEST(fs::exists(gbtest::shared("gguf/" + name + ".gguf")), f << " has no GGUF file");
  }
  BOOST_TEST(found == static_cast<int>(kCases.size()));
}

// Greedy decoding from the prompt gives llama.cpp's ids until a near-tie: a step where the
// reference's top-2 gap is within twice our actual distance from its logits at that step (same
// history so far), so rounding alone can pick either token. Past it both texts are legitimate.
BOOST_DATA_TEST_CASE(greedy_ids_match_llama_cpp_until_a_near_tie, bdata::make(kCases), c) {
  const std::string name = c.model + "-" + c.type;
  auto src = glassbox::ModelSource::open(gbtest::shared("gguf/" + name + ".gguf"));
  int compared = 0;
  for (const json& g : gbtest::read_jsonl(gbtest::shared("golden/llamacpp-" + name + ".jsonl"))) {
    auto ids = g["prompt_ids"].get<std::vector<std::int32_t>>();
    const auto want = g["greedy_ids"].get<std::vector<std::int32_t>>();
    const std::size_t n_prompt = ids.size();
    glassbox::Transformer model(src->config(), src->weights(), 64);
    auto cache = registry().make_attention({"kv-cache", {}}, src->config().attention_shape());
    auto logits = model.forward(std::span(ids), 0, *cache);
    for (std::size_t k = 0; k < want.size(); ++k) {
      const json& ref = g["steps"][n_prompt - 1 + k]["logits"];
      double dist = 0;
      for (std::size_t i = 0; i < ref.size(); ++i) dist = std::max(dist, std::abs(double(logits[i]) - ref[i].get<double>()));
      if (top2_gap(ref) <= 2 * dist) break;
      const auto next = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      BOOST_TEST(next == want[k], name << " '" << g["prompt"].get<std::string>() << "' greedy step " << k);
      if (next != want[k]) break;
      ++compared;
      ids.push_back(next);
      logits = model.forward(std::span(&ids.back(), 1), static_cast<int>(ids.size() - 1), *cache);
    }
  }
  BOOST_TEST_MESSAGE(name << ": " << compared << " greedy steps compared before any near-tie");
  if (c.type == "f32") BOOST_TEST(compared == 120, name << ": F32 must follow llama.cpp for all 3 × 40 steps");
}

// The GGUF F32 files hold the llama2.c checkpoints' arrays bit for bit, so both paths agree (1e-4).
BOOST_DATA_TEST_CASE(f32_gguf_equals_the_llama2c_path, bdata::make({"stories260K", "synth128", "synth256"}), model) {
  auto gguf = glassbox::ModelSource::open(gbtest::shared(std::string("gguf/") + model + "-f32.gguf"));
  auto bin = glassbox::ModelSource::open(gbtest::shared(std::string("models/") + model + ".bin"));
  BOOST_TEST(bin->config().format == "llama2c");
  const json g = gbtest::read_jsonl(gbtest::shared(std::string("golden/llamacpp-") + model + "-f32.jsonl")).at(0);
  std::vector<std::int32_t> ids;
  for (const auto& s : g["steps"]) ids.push_back(s["token"].get<std::int32_t>());
  const auto a = logits_at_every_position(*gguf, ids), b = logits_at_every_position(*bin, ids);
  double worst = 0;
  for (std::size_t p = 0; p < a.size(); ++p)
    for (std::size_t i = 0; i < a[p].size(); ++i) worst = std::max(worst, double(std::abs(a[p][i] - b[p][i])));
  BOOST_TEST(worst <= 1e-4, model << ": GGUF vs llama2.c max |Δ| " << worst);
}

// The trace header and `run` name the stored types; a Q4_0 model stays Q4_0 in memory.
BOOST_AUTO_TEST_CASE(weights_keep_their_stored_type) {
  auto src = glassbox::ModelSource::open(gbtest::shared("gguf/stories260K-q4_0.gguf"));
  const auto& w = src->weights();
  BOOST_TEST(glassbox::dtype_name(w.layers[0].wq.dtype) == "Q4_0");
  BOOST_TEST(glassbox::dtype_name(w.layers[0].w2.dtype) == "F16");
  BOOST_TEST(glassbox::dtype_name(w.wcls.dtype) == "Q8_0");
  BOOST_TEST(w.type_summary() == "F16:5, F32:11, Q4_0:31, Q8_0:1");
  // The view points into the mapped file: nothing was converted.
  const auto* begin = src->file().data();
  BOOST_TEST((w.layers[0].wq.data >= begin && w.layers[0].wq.data < begin + src->file().size()));
}

BOOST_AUTO_TEST_CASE(run_needs_only_the_gguf_file) {
  const auto r = gbtest::run_cli({"run", "--model", gbtest::shared("gguf/stories260K-q8_0.gguf").string(), "--prompt",
                                  "Once upon a time", "--sampler", "greedy", "-n", "12", "--seed", "1"});
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(r.out.rfind(", there was a little girl named Lily", 0) == 0, r.out);
}

BOOST_AUTO_TEST_CASE(trace_header_names_format_and_weight_types) {
  const fs::path dir = gbtest::temp_dir("gguf-trace");
  const auto r = gbtest::run_cli({"run", "--model", gbtest::shared("gguf/stories260K-q4_0.gguf").string(), "--prompt", "Hi",
                                  "--sampler", "greedy", "-n", "2", "--trace", (dir / "t.jsonl").string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const json h = gbtest::read_jsonl(dir / "t.jsonl").at(0);
  BOOST_TEST(h["model"]["format"] == "gguf");
  BOOST_TEST(h["model"]["weight_types"] == "F16:5, F32:11, Q4_0:31, Q8_0:1");
  BOOST_TEST(h["tokenizer"]["path"] == "");
  const auto v = gbtest::run_cli({"trace", "validate", (dir / "t.jsonl").string()});
  BOOST_TEST(v.rc == 0, v.err + v.out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

// Bad GGUF files through the CLI: one line naming the file, exit 2 (the reader's own cases are in test_gguf).
namespace {
struct BadFile {
  std::string name;
  std::function<std::string(std::string)> mutate;
  std::string expect;
};
std::ostream& operator<<(std::ostream& o, const BadFile& b) { return o << b.name; }

void put_u32(std::string& s, std::size_t at, std::uint32_t v) { std::memcpy(&s[at], &v, 4); }
void put_u64(std::string& s, std::size_t at, std::uint64_t v) { std::memcpy(&s[at], &v, 8); }

std::vector<BadFile> bad_files() {
  return {
      {"truncated_header", [](std::string s) { return s.substr(0, 20); }, "the file ends at byte 20"},
      {"truncated_data", [](std::string s) { return s.substr(0, s.size() - 5000); }, "extends past the end of the file"},
      {"version_1", [](std::string s) { put_u32(s, 4, 1); return s; }, "GGUF version 1 is not supported"},
      {"tensor_count_2_40", [](std::string s) { put_u64(s, 8, 1ull << 40); return s; }, "tensor"},
      {"kv_count_2_40", [](std::string s) { put_u64(s, 16, 1ull << 40); return s; }, "metadata"},
      {"not_a_model", [](std::string) { return std::string("GGUF") + std::string(100, '\xff'); }, "version 4294967295 is not supported"},
  };
}
}  // namespace

BOOST_DATA_TEST_CASE(bad_gguf_exits_2_naming_the_file, bdata::make(bad_files()), b) {
  if (!gbtest::shared_dir()) return;  // needs a real file to damage
  const fs::path dir = gbtest::temp_dir("bad-gguf");
  const fs::path f = dir / (b.name + ".gguf");
  gbtest::write_file(f, b.mutate(gbtest::read_file(gbtest::shared("gguf/stories260K-q4_0.gguf"))));
  const auto r = gbtest::run_cli({"run", "--model", f.string(), "--prompt", "Hi", "-n", "2"});
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(r.err.find(f.string()) != std::string::npos, r.err);
  BOOST_TEST(r.err.find(b.expect) != std::string::npos, r.err);
  int lines = 0;  // non-empty ones: main() separates the error from streamed text with a blank line
  for (std::size_t i = 0, j; i < r.err.size(); i = j + 1) {
    j = r.err.find('\n', i);
    if (j == std::string::npos) j = r.err.size();
    lines += j > i;
  }
  BOOST_TEST(lines == 1, r.err);
  fs::remove_all(dir);
}

// A NaN or infinite block scale (d, dmin, m) or F16 weight is refused at load with the file and the
// tensor named (issue #31): one case per stored type and scale field, planted in a block in the
// middle of a reference file's tensor of that type. Offsets are the block layouts of ggml-common.h.
namespace {
struct BadScale {
  std::string file, type, field;
  std::size_t at;      // byte offset of the fp16 field inside a block
  std::uint16_t bits;  // what is planted there
};
std::ostream& operator<<(std::ostream& o, const BadScale& b) { return o << b.type << "." << b.field << "=" << std::hex << b.bits; }

std::vector<BadScale> bad_scales() {
  const std::uint16_t inf = 0x7C00, nan = 0x7E00, ninf = 0xFC00;
  return {
      {"synth128-q8_0", "Q8_0", "d", 0, nan},       {"synth128-q4_0", "Q4_0", "d", 0, inf},
      {"synth128-q4_1", "Q4_1", "d", 0, nan},       {"synth128-q4_1", "Q4_1", "m", 2, ninf},
      {"synth128-q4_k_m", "Q5_0", "d", 0, inf},     {"synth128-q5_k_m", "Q5_1", "d", 0, nan},
      {"synth128-q5_k_m", "Q5_1", "m", 2, inf},     {"synth256-iq4_nl", "IQ4_NL", "d", 0, nan},
      {"synth256-q2_k", "Q2_K", "d", 80, inf},      {"synth256-q2_k", "Q2_K", "dmin", 82, nan},
      {"synth256-q2_k", "Q3_K", "d", 108, ninf},    {"synth256-q4_k_m", "Q4_K", "d", 0, nan},
      {"synth256-q4_k_m", "Q4_K", "dmin", 2, inf},  {"synth256-q5_k_m", "Q5_K", "d", 0, inf},
      {"synth256-q5_k_m", "Q5_K", "dmin", 2, nan},  {"synth256-q6_k", "Q6_K", "d", 208, nan},
      {"synth128-f16", "F16", "value", 0, inf},
  };
}
}  // namespace

BOOST_DATA_TEST_CASE(nonfinite_block_scales_are_refused_naming_file_and_tensor, bdata::make(bad_scales()), b) {
  if (!gbtest::shared_dir()) return;
  const fs::path good = gbtest::shared("gguf/" + b.file + ".gguf");
  std::string bytes = gbtest::read_file(good);
  std::string tensor;
  std::size_t block = 0;
  {
    auto src = glassbox::ModelSource::open(good);  // the intact file loads
    const auto* base = src->file().data();
    for (const auto& info : src->gguf()->tensors())
      if (glassbox::dtype_name(info.dtype) == b.type) {
        const auto& ti = glassbox::dtype_info(info.dtype);
        tensor = info.name;
        block = info.bytes / ti.block_bytes / 2;
        const std::size_t at = static_cast<std::size_t>(src->gguf()->tensor(info).data - base) + block * ti.block_bytes + b.at;
        std::memcpy(&bytes[at], &b.bits, 2);
        break;
      }
  }
  BOOST_TEST_REQUIRE(!tensor.empty(), b.file << " has no " << b.type << " tensor");
  const fs::path dir = gbtest::temp_dir("bad-scale");
  const fs::path f = dir / "bad.gguf";
  gbtest::write_file(f, bytes);
  const std::string where = b.type == "F16" ? "value #" + std::to_string(block) : "block #" + std::to_string(block) + " scale " + b.field;
  try {
    glassbox::ModelSource::open(f);
    BOOST_ERROR("a non-finite " << b.type << " " << b.field << " was accepted");
  } catch (const glassbox::ModelError& e) {
    const std::string m = e.what();
    BOOST_TEST(m.find(f.string() + ": tensor '" + tensor + "' (" + b.type + ") " + where + " is not a finite number") != std::string::npos, m);
  }
  // And through the CLI: one line, exit 2.
  const auto r = gbtest::run_cli({"run", "--model", f.string(), "--prompt", "Hi", "-n", "2"});
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(r.err.find("tensor '" + tensor + "'") != std::string::npos, r.err);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(unsupported_architecture_lists_what_is) {
  if (!gbtest::shared_dir()) return;
  const fs::path dir = gbtest::temp_dir("arch");
  std::string s = gbtest::read_file(gbtest::shared("gguf/stories260K-f32.gguf"));
  // general.architecture = "llama" → "qwen2" is longer; rewrite its value in place as "gpt2x".
  const std::string key = "general.architecture";
  auto at = s.find(key);
  BOOST_TEST_REQUIRE(at != std::string::npos);
  at += key.size() + 4 + 8;  // value type u32, string length u64
  s.replace(at, 5, "llamb");
  const fs::path f = dir / "arch.gguf";
  gbtest::write_file(f, s);
  const auto r = gbtest::run_cli({"run", "--model", f.string(), "-n", "1"});
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("architecture 'llamb' is not supported (supported: llama, gpt2, qwen2, qwen3, gemma2, gemma3, phi3)") !=
                 std::string::npos,
             r.err);
  fs::remove_all(dir);
}

// Chat formats recognized from the templates that real models ship (abridged from their GGUF files).
BOOST_DATA_TEST_CASE(chat_formats_are_recognized,
                     bdata::make({std::string("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"),
                                  std::string("{{ '<|begin_of_text|>' }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"),
                                  std::string("{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}"),
                                  std::string("{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token }}{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n' }}{% endif %}{% endfor %}</s>"),
                                  std::string("{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"),
                                  std::string("{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + '<|end|>\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"),
                                  std::string("{{ messages }}"), std::string("")}) ^
                         bdata::make({"chatml", "llama-3", "llama-2", "zephyr", "gemma", "phi-3", "plain", "none"}),
                     tmpl, name) {
  BOOST_TEST(glassbox::chat_format_name(glassbox::detect_chat_format(tmpl)) == name);
}

BOOST_AUTO_TEST_CASE(chat_turns_render_in_each_format) {
  using glassbox::ChatFormat;
  const std::vector<glassbox::ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Name?"}};
  BOOST_TEST(glassbox::render_chat(ChatFormat::ChatML, m) ==
             "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
             "<|im_start|>user\nName?<|im_end|>\n<|im_start|>assistant\n");
  BOOST_TEST(glassbox::render_chat(ChatFormat::Llama2, m) ==
             "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Name? [/INST]");
  BOOST_TEST(glassbox::render_chat(ChatFormat::Llama3, {{"user", "Hi"}}) ==
             "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  BOOST_TEST(glassbox::render_chat(ChatFormat::Zephyr, {{"user", "Hi"}}) == "<|user|>\nHi</s>\n<|assistant|>\n");
  // Gemma: no system role (it heads the first user turn), the assistant is "model".
  BOOST_TEST(glassbox::render_chat(ChatFormat::Gemma, m) ==
             "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
             "<start_of_turn>user\nName?<end_of_turn>\n<start_of_turn>model\n");
  BOOST_TEST(glassbox::render_chat(ChatFormat::Phi3, {{"user", "Hi"}}) == "<|user|>\nHi<|end|>\n<|assistant|>\n");
  // Two system messages (chat's pinned one, then its summary of older turns): where the format folds
  // the system message into the first user turn, both are kept, in order.
  const std::vector<glassbox::ChatMessage> two = {{"system", "Be brief."}, {"system", "Summary: hi."}, {"user", "Name?"}};
  BOOST_TEST(glassbox::render_chat(ChatFormat::Llama2, two) ==
             "[INST] <<SYS>>\nBe brief.\n\nSummary: hi.\n<</SYS>>\n\nName? [/INST]");
  BOOST_TEST(glassbox::render_chat(ChatFormat::Gemma, two) ==
             "<start_of_turn>user\nBe brief.\n\nSummary: hi.\n\nName?<end_of_turn>\n<start_of_turn>model\n");
}
