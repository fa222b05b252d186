// `glassbox convert` and `glassbox inspect` end to end: converted files against llama.cpp's own
// conversions and quantizations byte for byte, their logits against the llama2.c path, and listings.
#define BOOST_TEST_MODULE convert
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>

#include "glassbox/model/gguf.hpp"
#include "glassbox/model/mapped_file.hpp"
#include "glassbox/model/model_source.hpp"
#include "glassbox/pipeline.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using nlohmann::json;
using gbtest::run_cli;
using namespace glassbox;

namespace {

// A mapped GGUF file and its parsed header, kept together.
struct OpenGguf {
  MappedFile file;
  GgufFile gguf;
  explicit OpenGguf(const fs::path& p) : file(p), gguf(p.string(), file.data(), file.size()) {}
};

bool same_value(const MetaValue& a, const MetaValue& b) {
  if (a.type != b.type || a.elem != b.elem) return false;
  if (a.is_array()) {  // packed or not: item by item
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same_value(a.item(i), b.item(i))) return false;
    return true;
  }
  if (a.value.index() != b.value.index()) return false;
  return std::visit([&](const auto& x) {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<T, std::vector<MetaValue>> || std::is_same_v<T, glassbox::PackedArray>) return false;  // handled above
    else return x == std::get<T>(b.value);
  }, a.value);
}

// A run that must fail: exit 2, and stderr's error is one line containing `part`.
void expect_error(const gbtest::CliResult& r, const std::string& part) {
  BOOST_TEST(r.rc == 2, "exit code " << r.rc << "; stderr: " << r.err);
  std::vector<std::string> errors;
  std::string line;
  std::istringstream in(r.err);
  while (std::getline(in, line))
    if (line.find("glassbox: error:") != std::string::npos) errors.push_back(line);
  BOOST_TEST_REQUIRE(errors.size() == 1u, "one error line expected; stderr: " << r.err);
  BOOST_TEST(errors[0].find(part) != std::string::npos, "'" << part << "' not in: " << errors[0]);
}

fs::path convert(const fs::path& dir, const std::string& model, const std::string& type, std::vector<std::string> more = {},
                 std::string* err = nullptr) {
  const fs::path out = dir / (fs::path(model).stem().string() + "-" + type + ".gguf");
  std::vector<std::string> a{"convert", "--model", model, "--type", type, "-o", out.string()};
  a.insert(a.end(), more.begin(), more.end());
  auto r = run_cli(a);
  BOOST_TEST_REQUIRE(r.rc == 0, "convert failed: " << r.err);
  if (err) *err = r.err;
  return out;
}

std::string model(const std::string& name) { return gbtest::shared("models/" + name).string(); }
std::vector<std::string> tok512() { return {"--tokenizer", model("tok512.bin")}; }

// Every tensor of `ref` is in `got` with the same type, shape and bytes (`got` may order them differently).
void expect_same_tensors(const fs::path& got, const fs::path& ref) {
  OpenGguf g(got), r(ref);
  BOOST_TEST(g.gguf.tensors().size() == r.gguf.tensors().size());
  for (const auto& rt : r.gguf.tensors()) {
    const GgufTensorInfo* gt = g.gguf.find(rt.name);
    BOOST_TEST_REQUIRE(gt != nullptr, rt.name << " missing");
    BOOST_TEST(dtype_name(gt->dtype) == dtype_name(rt.dtype), rt.name);
    BOOST_TEST(gt->ne == rt.ne, rt.name);
    BOOST_TEST_REQUIRE(gt->bytes == rt.bytes, rt.name);
    const Tensor a = g.gguf.tensor(*gt), b = r.gguf.tensor(rt);
    BOOST_TEST(std::memcmp(a.data, b.data, a.bytes) == 0, rt.name << " (" << dtype_name(rt.dtype) << ") bytes differ");
  }
}

// Runs greedy generation and returns the trace's step lines.
std::vector<json> greedy_trace(const fs::path& dir, const std::string& tag, std::vector<std::string> model_args,
                               const std::string& prompt, int max_tokens) {
  const fs::path trace = dir / (tag + ".jsonl");
  std::vector<std::string> a{"run"};
  a.insert(a.end(), model_args.begin(), model_args.end());
  for (const std::string& s : {std::string("--prompt"), prompt, std::string("--max-tokens"), std::to_string(max_tokens),
                               std::string("--sampler"), std::string("greedy"), std::string("--trace"), trace.string(),
                               std::string("--trace-level"), std::string("full")})
    a.push_back(s);
  auto r = run_cli(a);
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  std::vector<json> steps;
  for (auto& l : gbtest::read_jsonl(trace))
    if (l["type"] == "step") steps.push_back(std::move(l));
  return steps;
}

// TENSORS.txt: file name -> its tensors as "name TYPE ne=[...] offset=N nbytes=N".
struct RefTensor {
  std::string name, type;
  std::vector<std::int64_t> ne;
  std::uint64_t offset, bytes;
};
std::map<std::string, std::vector<RefTensor>> tensors_txt() {
  std::map<std::string, std::vector<RefTensor>> out;
  std::ifstream f(gbtest::shared("gguf/TENSORS.txt"));
  const std::regex file_re(R"(^== (\S+\.gguf) )");
  const std::regex tensor_re(R"(^\s+tensor\s+(\S+)\s+(\S+)\s+ne=\[([0-9, ]+)\]\s+offset=\s*(\d+).*nbytes=(\d+))");
  std::string line, current;
  std::smatch m;
  while (std::getline(f, line)) {
    if (std::regex_search(line, m, file_re)) current = m[1];
    else if (std::regex_search(line, m, tensor_re)) {
      RefTensor t{m[1], m[2], {}, std::stoull(m[4]), std::stoull(m[5])};
      std::istringstream dims(m[3].str());
      std::string d;
      while (std::getline(dims, d, ',')) t.ne.push_back(std::stoll(d));
      out[current].push_back(t);
    }
  }
  return out;
}

const char* kReferenceFiles[] = {"stories260K-f32.gguf", "stories260K-f16.gguf", "stories260K-q8_0.gguf",
                                 "stories260K-q4_0.gguf", "synth128-q4_0.gguf", "synth256-q4_k_m.gguf"};

// A small llama2.c legacy checkpoint with its own classifier (negative vocab_size) and a vocabulary
// with every kind of piece, written here so these checks need no reference data.
struct TinyModel {
  static constexpr int dim = 8, hidden = 16, layers = 1, heads = 2, kv_heads = 1, vocab = 8, seq_len = 4;
  fs::path checkpoint, tokenizer;
  std::vector<float> weights;
  std::int64_t wcls_at = 0;  // index of the classifier in `weights`

  explicit TinyModel(const fs::path& dir) : checkpoint(dir / "tiny.bin"), tokenizer(dir / "tiny-tok.bin") {
    const int hs = dim / heads, kvd = kv_heads * hs;
    const std::int64_t n = vocab * dim + layers * (2 * dim + dim * dim + 2 * kvd * dim + dim * dim + 3 * hidden * dim) +
                           dim + seq_len * hs + vocab * dim;
    wcls_at = n - vocab * dim;
    for (std::int64_t i = 0; i < n; ++i) weights.push_back(static_cast<float>(std::sin(0.37 * static_cast<double>(i))) * 0.5f);
    std::string bin;
    for (std::int32_t v : {dim, hidden, layers, heads, kv_heads, -vocab, seq_len}) bin.append(reinterpret_cast<const char*>(&v), 4);
    bin.append(reinterpret_cast<const char*>(weights.data()), weights.size() * sizeof(float));
    gbtest::write_file(checkpoint, bin);
    std::string tok;
    auto put = [&tok](auto v) { tok.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(std::int32_t{8});
    float score = 0;
    for (std::string p : {"<unk>", "\n<s>\n", "\n</s>\n", "<0x41>", " a", "b", "", "a b"}) {
      put(score -= 1.5f);
      put(static_cast<std::int32_t>(p.size()));
      tok += p;
    }
    gbtest::write_file(tokenizer, tok);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(self_contained)

// The vocabulary as llama.cpp's converter writes it, and a separate classifier copied as output.weight.
BOOST_AUTO_TEST_CASE(tiny_checkpoint_with_own_classifier) {
  const fs::path dir = gbtest::temp_dir("tiny");
  TinyModel m(dir);
  const fs::path out = dir / "tiny.gguf";
  auto r = run_cli({"convert", "--model", m.checkpoint.string(), "--tokenizer", m.tokenizer.string(), "-o", out.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  OpenGguf g(out);
  const Metadata& md = g.gguf.metadata();
  const std::vector<std::string> want_tokens{"<unk>", "<s>", "</s>", "<0x41>", "\xE2\x96\x81" "a", "b", "", "a\xE2\x96\x81" "b"};
  BOOST_TEST(*md.get_strings("tokenizer.ggml.tokens") == want_tokens, boost::test_tools::per_element());
  const std::vector<std::int64_t> want_types{2, 3, 3, 6, 1, 1, 3, 1};
  BOOST_TEST(*md.get_ints("tokenizer.ggml.token_type") == want_types, boost::test_tools::per_element());
  BOOST_TEST((*md.get_floats("tokenizer.ggml.scores"))[7] == -12.0);
  BOOST_TEST(*md.get_int("llama.context_length") == TinyModel::seq_len);
  BOOST_TEST(*md.get_int("general.file_type") == 0);
  BOOST_TEST(!md.has("general.quantization_version"));
  const auto* out_w = g.gguf.find("output.weight");
  BOOST_TEST_REQUIRE(out_w != nullptr);
  BOOST_TEST(std::memcmp(g.gguf.tensor(*out_w).data, m.weights.data() + m.wcls_at, out_w->bytes) == 0);
  // --tie-output cannot drop a classifier the checkpoint does not share.
  r = run_cli({"convert", "--model", m.checkpoint.string(), "--tokenizer", m.tokenizer.string(), "--tie-output", "-o", out.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(OpenGguf(out).gguf.find("output.weight") != nullptr);
  // The converted file loads, and inspect lists the llama2.c original.
  BOOST_TEST(!ModelSource::open(out)->config().shared_classifier);
  r = run_cli({"inspect", "--json", m.checkpoint.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const json j = json::parse(r.out);
  BOOST_TEST(j["format"] == "llama2c");
  BOOST_TEST(j["config"]["shared_classifier"] == false);
  BOOST_TEST(j["tensors"].size() == 12u);  // embedding, final norm, classifier, 9 per layer
  BOOST_TEST(j["tensors"].back()["name"] == "wcls");
  BOOST_TEST(j["tensors"].back()["offset"] == 4 * m.wcls_at);
  BOOST_TEST(j["tokenizer"].is_null());
  BOOST_TEST(!j.contains("sha256"));
  // --sha256: the digest a trace header names, the file's SHA-256, in JSON and in text.
  const std::string digest = glassbox::sha256_file(m.checkpoint);
  r = run_cli({"inspect", "--json", "--sha256", m.checkpoint.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(json::parse(r.out)["sha256"] == digest);
  r = run_cli({"inspect", "--sha256", m.checkpoint.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(r.out.find("\nsha256        " + digest + "\n") != std::string::npos, r.out);
}

// Bad input exits 2 with one error line and leaves no output file behind.
BOOST_AUTO_TEST_CASE(bad_input_is_one_line) {
  const fs::path dir = gbtest::temp_dir("bad");
  TinyModel m(dir);
  const fs::path out = dir / "out.gguf";
  expect_error(run_cli({"inspect", (dir / "missing.gguf").string()}), "missing.gguf");
  expect_error(run_cli({"inspect", "--sha256", (dir / "missing.gguf").string()}), "missing.gguf");
  expect_error(run_cli({"convert", "--model", (dir / "missing.bin").string(), "--tokenizer", m.tokenizer.string(), "-o", out.string()}),
               "missing.bin");
  expect_error(run_cli({"convert", "--model", m.checkpoint.string(), "--tokenizer", m.tokenizer.string(), "--type", "Q5_K",
                        "-o", out.string()}),
               "--type 'Q5_K' is not supported");
  expect_error(run_cli({"convert", "--model", m.checkpoint.string(), "-o", out.string()}), "--tokenizer is required");
  // A vocabulary shorter than the model's.
  std::string tok = gbtest::read_file(m.tokenizer);
  gbtest::write_file(dir / "short.bin", tok.substr(0, tok.size() - 5));
  expect_error(run_cli({"convert", "--model", m.checkpoint.string(), "--tokenizer", (dir / "short.bin").string(), "-o", out.string()}),
               "short.bin");
  // A truncated GGUF.
  auto r = run_cli({"convert", "--model", m.checkpoint.string(), "--tokenizer", m.tokenizer.string(), "-o", out.string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const std::string gguf = gbtest::read_file(out);
  fs::remove(out);
  gbtest::write_file(dir / "cut.gguf", gguf.substr(0, gguf.size() / 2));
  expect_error(run_cli({"inspect", (dir / "cut.gguf").string()}), "cut.gguf");
  expect_error(run_cli({"inspect", "--sha256", (dir / "cut.gguf").string()}), "cut.gguf");
  expect_error(run_cli({"convert", "--model", (dir / "cut.gguf").string(), "-o", out.string()}), "cut.gguf");
  BOOST_TEST(!fs::exists(out));
}

// A GGUF of an architecture glassbox does not run is still listed, with the reason instead of a config.
BOOST_AUTO_TEST_CASE(inspect_lists_unsupported_architecture) {
  const fs::path dir = gbtest::temp_dir("arch");
  GgufWriter w;
  w.set("general.architecture", MetaValue{MetaType::String, MetaType::U8, std::string("mamba")});
  std::vector<std::byte> data(4 * 6 * sizeof(float));
  w.add_tensor("blk.0.ssm_a", DType::F32, {4, 6}, data);
  w.write(dir / "m.gguf");
  auto r = run_cli({"inspect", "--json", (dir / "m.gguf").string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const json j = json::parse(r.out);
  BOOST_TEST(j["architecture"] == "mamba");
  BOOST_TEST(j["config"].is_null());
  BOOST_TEST(j["config_error"].get<std::string>().find("'mamba' is not supported") != std::string::npos, j["config_error"]);
  BOOST_TEST(j["tensors"][0]["shape"] == json({4, 6}));
  BOOST_TEST(j["tensors"][0]["ne"] == json({6, 4}));
  r = run_cli({"inspect", (dir / "m.gguf").string()});
  BOOST_TEST(r.out.find("not runnable by glassbox") != std::string::npos, r.out);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(reference_files, *boost::unit_test::precondition(gbtest::NeedsShared()))

// stories260K → F32: every tensor is bit-identical to llama.cpp's convert-llama2c-to-ggml output and
// the metadata equal key by key, except context_length (the checkpoint's 512, not the converter's 128)
// and the added general.file_type.
BOOST_AUTO_TEST_CASE(f32_matches_llamacpp_converter) {
  const fs::path dir = gbtest::temp_dir("f32");
  const fs::path out = convert(dir, model("stories260K.bin"), "F32", tok512());
  const fs::path ref = gbtest::shared("gguf/stories260K-f32.gguf");
  expect_same_tensors(out, ref);
  OpenGguf g(out), r(ref);
  std::vector<std::string> order;
  for (const auto& [key, v] : g.gguf.metadata().entries()) order.push_back(key);
  std::vector<std::string> ref_order;
  for (const auto& [key, v] : r.gguf.metadata().entries()) {
    ref_order.push_back(key);
    const MetaValue* mine = g.gguf.metadata().find(key);
    BOOST_TEST_REQUIRE(mine != nullptr, key << " missing");
    if (key == "llama.context_length") BOOST_TEST(*g.gguf.metadata().get_int(key) == 512);
    else BOOST_TEST(same_value(*mine, v), key << ": " << mine->to_string() << " vs " << v.to_string());
  }
  ref_order.push_back("general.file_type");
  BOOST_TEST(order == ref_order, boost::test_tools::per_element());
  BOOST_TEST(*g.gguf.metadata().get_int("general.file_type") == 0);
}

// Conversions equal llama-quantize's files tensor by tensor, types and bytes (the reference files'
// README: llama-quantize with 1 thread and no imatrix, from the F32 conversion of the same checkpoint).
// The types come from llama-quantize's rules: ffn_down of stories260K (rows of 172) falls back to F16;
// output.weight is Q6_K where its rows are a multiple of 256 (synth256) and Q8_0 where not (synth128,
// stories260K), also for Q4_0; the _M mixes raise attn_v and ffn_down of use_more_bits layers to Q6_K;
// Q2_K/Q3_K_M raise attn_v, ffn_down and attn_output; synth128's rows of 128 make Q4_K fall back to Q5_0,
// Q5_K to Q5_1 and Q6_K to Q8_0. `note` is what stderr's fallback note must contain ("" = no note).
struct QuantCase {
  const char *ckpt, *type, *ref, *note;
};
const QuantCase kQuantCases[] = {
    {"synth128.bin", "Q8_0", "synth128-q8_0.gguf", ""},
    {"synth128.bin", "Q4_0", "synth128-q4_0.gguf", ""},
    {"synth128.bin", "F16", "synth128-f16.gguf", ""},
    {"stories260K.bin", "Q8_0", "stories260K-q8_0.gguf", "blk.4.ffn_down.weight"},
    {"stories260K.bin", "Q4_0", "stories260K-q4_0.gguf", "blk.4.ffn_down.weight"},
    {"stories260K.bin", "F16", "stories260K-f16.gguf", ""},
    {"synth128.bin", "Q4_1", "synth128-q4_1.gguf", ""},
    {"synth128.bin", "Q4_K_M", "synth128-q4_k_m.gguf", "written as Q5_0 because their rows of 128 values are not a multiple of Q4_K's"},
    {"synth128.bin", "Q5_K_M", "synth128-q5_k_m.gguf", "written as Q5_1 because their rows of 128 values are not a multiple of Q5_K's"},
    {"synth256.bin", "Q8_0", "synth256-q8_0.gguf", ""},
    {"synth256.bin", "Q6_K", "synth256-q6_k.gguf", ""},
    {"synth256.bin", "Q5_K_M", "synth256-q5_k_m.gguf", ""},
    {"synth256.bin", "Q4_K_M", "synth256-q4_k_m.gguf", ""},
    {"synth256.bin", "Q3_K_M", "synth256-q3_k_m.gguf", ""},
    {"synth256.bin", "Q2_K", "synth256-q2_k.gguf", ""},
    {"synth256.bin", "IQ4_NL", "synth256-iq4_nl.gguf", ""}};
std::ostream& operator<<(std::ostream& os, const QuantCase& c) { return os << c.ckpt << " --type " << c.type; }
BOOST_DATA_TEST_CASE(quantized_matches_llama_quantize, bdata::make(kQuantCases), c) {
  const fs::path dir = gbtest::temp_dir(std::string("q-") + c.type + "-" + fs::path(c.ckpt).stem().string());
  std::string err;
  const fs::path out = convert(dir, model(c.ckpt), c.type, tok512(), &err);
  const fs::path ref = gbtest::shared(std::string("gguf/") + c.ref);
  expect_same_tensors(out, ref);
  if (*c.note) BOOST_TEST(err.find(c.note) != std::string::npos, err);
  else BOOST_TEST(err.find("written as") == std::string::npos, err);
  OpenGguf g(out), r(ref);
  BOOST_TEST(*g.gguf.metadata().get_int("general.quantization_version") == 2);
  // stories260K's Q8_0/Q4_0 files had general.file_type set by hand to what these types write (7, 2).
  BOOST_TEST(*g.gguf.metadata().get_int("general.file_type") == *r.gguf.metadata().get_int("general.file_type"));
}

// Q2_K and Q3_K fall back to IQ4_NL where 256 does not divide the rows (the reference files' README,
// "Fallback and low-bit types"): on synth128 every matrix is IQ4_NL, attn_v/ffn_down/attn_output (which
// Q2_K raises to Q3_K) included, except the classifier, Q8_0 by the output rule. The IQ4_NL bytes
// themselves are checked against llama-quantize in test_quant (synth256-iq4_nl.gguf).
BOOST_AUTO_TEST_CASE(low_k_quants_fall_back_to_iq4_nl) {
  const fs::path dir = gbtest::temp_dir("q2k128");
  std::string err;
  const fs::path out = convert(dir, model("synth128.bin"), "Q2_K", tok512(), &err);
  OpenGguf g(out);
  for (const auto& t : g.gguf.tensors())
    BOOST_TEST(dtype_name(t.dtype) == (t.n_dims < 2 ? "F32" : t.name == "output.weight" ? "Q8_0" : "IQ4_NL"), t.name);
  BOOST_TEST(err.find("written as IQ4_NL because their rows of 128 values are not a multiple of Q2_K's") != std::string::npos, err);
  BOOST_TEST(err.find("written as IQ4_NL because their rows of 128 values are not a multiple of Q3_K's") != std::string::npos, err);
  BOOST_TEST(*g.gguf.metadata().get_int("general.file_type") == 10);
}

// The classifier rule on 256-wide rows, checked against llama-quantize's own Q6_K bytes of the same
// tensor: with --type Q4_0, synth256's output.weight is Q6_K (llama-quantize: output → Q6_K where 256
// divides its rows), equal to synth256-q6_k.gguf's; with --tie-output there is no output.weight, so
// token_embd is the classifier and gets Q6_K (llama-quantize's !has_output rule), equal to the same
// bytes since synth256's classifier is its embedding.
BOOST_AUTO_TEST_CASE(classifier_is_q6_k_where_its_rows_allow) {
  const fs::path dir = gbtest::temp_dir("cls256");
  const OpenGguf ref(gbtest::shared("gguf/synth256-q6_k.gguf"));
  const Tensor want = ref.gguf.tensor(*ref.gguf.find("output.weight"));
  auto expect_q6_k = [&](const fs::path& file, const std::string& name) {
    const OpenGguf g(file);
    const GgufTensorInfo* t = g.gguf.find(name);
    BOOST_TEST_REQUIRE(t != nullptr, name);
    BOOST_TEST(dtype_name(t->dtype) == "Q6_K", name);
    BOOST_TEST_REQUIRE(t->bytes == want.bytes);
    BOOST_TEST(std::memcmp(g.gguf.tensor(*t).data, want.data, want.bytes) == 0, name << " bytes differ");
  };
  const fs::path q4 = convert(dir, model("synth256.bin"), "Q4_0", tok512());
  expect_q6_k(q4, "output.weight");
  BOOST_TEST(dtype_name(OpenGguf(q4).gguf.find("token_embd.weight")->dtype) == "Q4_0");
  std::vector<std::string> more = tok512();
  more.push_back("--tie-output");
  const fs::path tied = convert(dir, model("synth256.bin"), "Q4_K_M", more);
  BOOST_TEST(OpenGguf(tied).gguf.find("output.weight") == nullptr);
  expect_q6_k(tied, "token_embd.weight");
}

// --pure: every matrix in the base type, the classifier included (synth256: all Q4_K, none Q6_K).
BOOST_AUTO_TEST_CASE(pure_k_quant_keeps_the_base_type) {
  const fs::path dir = gbtest::temp_dir("pure");
  std::vector<std::string> more = tok512();
  more.push_back("--pure");
  const fs::path out = convert(dir, model("synth256.bin"), "Q4_K_M", more);
  OpenGguf g(out);
  for (const auto& t : g.gguf.tensors()) BOOST_TEST(dtype_name(t.dtype) == (t.n_dims >= 2 ? "Q4_K" : "F32"), t.name);
}

// A GGUF input is re-quantized: llama.cpp's F32 file → Q8_0 equals llama-quantize's Q8_0 file, and its
// metadata (context_length 128) is kept.
BOOST_AUTO_TEST_CASE(gguf_input_requantized) {
  const fs::path dir = gbtest::temp_dir("requant");
  const fs::path out = convert(dir, gbtest::shared("gguf/synth128-f32.gguf").string(), "Q8_0");
  expect_same_tensors(out, gbtest::shared("gguf/synth128-q8_0.gguf"));
  BOOST_TEST(*OpenGguf(out).gguf.metadata().get_int("llama.context_length") == 128);
}

// The F32 conversion gives the llama2.c path's logits at every traced step of the golden prompts, with
// output.weight written and with it omitted (--tie-output: the loader then uses the embedding).
BOOST_DATA_TEST_CASE(f32_logits_equal_llama2c_path, bdata::xrange(2), tied) {
  const fs::path dir = gbtest::temp_dir("logits" + std::to_string(tied));
  std::vector<std::string> more = tok512();
  if (tied) more.push_back("--tie-output");
  const fs::path out = convert(dir, model("stories260K.bin"), "F32", more);
  BOOST_TEST((OpenGguf(out).gguf.find("output.weight") == nullptr) == (tied == 1));
  for (const auto& g : gbtest::read_jsonl(gbtest::shared("golden/llama2c-stories260K-greedy.jsonl"))) {
    const std::string prompt = g["prompt"];
    const auto a = greedy_trace(dir, "bin", gbtest::stories_args(), prompt, 24);
    const auto b = greedy_trace(dir, "gguf", {"--model", out.string()}, prompt, 24);
    BOOST_TEST_REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t s = 0; s < a.size(); ++s) {
      BOOST_TEST(a[s]["pos"] == b[s]["pos"]);
      BOOST_TEST(a[s]["token"]["id"] == b[s]["token"]["id"], "pos " << a[s]["pos"]);
      const auto la = gbtest::step_logits(a[s]), lb = gbtest::step_logits(b[s]);
      BOOST_TEST_REQUIRE(la.size() == lb.size());
      for (std::size_t k = 0; k < la.size(); ++k) worst = std::max(worst, std::abs(la[k] - lb[k]));
    }
    BOOST_TEST(worst <= 1e-6, "prompt '" << prompt << "': max |Δlogit| " << worst);
  }
}

// The converted Q8_0 file (ffn_down F16) runs and greedy-decodes llama.cpp's first 10 tokens.
// A GGUF given a llama2.c tokenizer.bin (-t): its vocabulary is replaced with the tokenizer's special ids
// (0 <unk>, 1 <s>, 2 </s>, as for a checkpoint), so glassbox runs the file it wrote; it used to refuse it
// (add_bos_token true, no bos_token_id; issue 46).
BOOST_AUTO_TEST_CASE(gguf_with_a_llama2c_tokenizer_runs) {
  const fs::path dir = gbtest::temp_dir("convert-gguf-tok");
  const auto c = gbtest::run_cli({"convert", "-m", gbtest::shared("gguf/stories260K-f32.gguf").string(), "-t", model("tok512.bin"), "-o", (dir / "c.gguf").string()});
  BOOST_TEST_REQUIRE(c.rc == 0, c.err);
  const auto r = gbtest::run_cli({"run", "-m", (dir / "c.gguf").string(), "-p", "Once upon", "-n", "4", "--sampler", "greedy"});
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(!r.out.empty());
}

BOOST_AUTO_TEST_CASE(q8_0_greedy_matches_llamacpp) {
  const fs::path dir = gbtest::temp_dir("q8run");
  const fs::path out = convert(dir, model("stories260K.bin"), "Q8_0", tok512());
  const auto golden = gbtest::read_jsonl(gbtest::shared("golden/llamacpp-stories260K-q8_0.jsonl"));
  const json* once = nullptr;
  for (const auto& g : golden)
    if (g["prompt"] == "Once upon a time") once = &g;
  BOOST_TEST_REQUIRE(once != nullptr);
  const auto steps = greedy_trace(dir, "q8", {"--model", out.string()}, "Once upon a time", 10);
  BOOST_TEST_REQUIRE(steps.size() == 10u);
  for (std::size_t k = 0; k < 10; ++k) BOOST_TEST(steps[k]["token"]["id"] == (*once)["greedy_ids"][k], "token " << k);
}

// inspect lists every tensor of llama.cpp's files with gguf-py's types, shapes, offsets and sizes.
BOOST_DATA_TEST_CASE(inspect_lists_reference_tensors, bdata::xrange(std::size(kReferenceFiles)), i) {
  const std::string name = kReferenceFiles[i];
  const auto want = tensors_txt().at(name);
  BOOST_TEST_REQUIRE(!want.empty());
  const std::string path = gbtest::shared("gguf/" + name).string();
  auto r = run_cli({"inspect", "--json", path});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const json j = json::parse(r.out);
  BOOST_TEST(j["format"] == "gguf");
  BOOST_TEST(j["version"] == 3);
  BOOST_TEST(j["architecture"] == "llama");
  BOOST_TEST(j["tokenizer"]["model"] == "llama");
  BOOST_TEST(j["tokenizer"]["vocab_size"] == 512);
  BOOST_TEST(j["tokenizer"]["bos"]["id"] == 1);
  BOOST_TEST(j["config"]["context_length"] == 128);
  BOOST_TEST_REQUIRE(j["tensors"].size() == want.size());
  std::int64_t params = 0;
  for (std::size_t k = 0; k < want.size(); ++k) {
    const auto& t = j["tensors"][k];
    BOOST_TEST(t["name"] == want[k].name);
    BOOST_TEST(t["type"] == want[k].type, want[k].name);
    BOOST_TEST(t["ne"].get<std::vector<std::int64_t>>() == want[k].ne, boost::test_tools::per_element());
    BOOST_TEST(t["offset"] == want[k].offset, want[k].name);
    BOOST_TEST(t["bytes"] == want[k].bytes, want[k].name);
    std::int64_t n = 1;
    for (auto d : want[k].ne) n *= d;
    params += n;
  }
  BOOST_TEST(j["parameters"] == params);

  r = run_cli({"inspect", path});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  for (const auto& t : want) {
    // One table row: name, type, shape as rows × cols (ne reversed), offset, bytes.
    std::string shape;
    for (auto it = t.ne.rbegin(); it != t.ne.rend(); ++it) shape += (shape.empty() ? "" : " × ") + std::to_string(*it);
    const std::regex row("\\n  " + std::regex_replace(t.name, std::regex("\\."), "\\.") + " +" + t.type + " +" + shape + " +" +
                         std::to_string(t.offset) + " +" + std::to_string(t.bytes) + "\\n");
    BOOST_TEST(std::regex_search(r.out, row), "no row for " << t.name << " " << t.type << " " << shape);
  }
  BOOST_TEST(r.out.find("GGUF v3") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
