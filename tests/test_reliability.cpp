// Hostile inputs and faults (issue 11, docs/reliability.md): malformed files and options across every
// surface end in one clear error line and exit 2 within bounded time and memory; outputs are atomic.
#define BOOST_TEST_MODULE reliability
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "glassbox/file_io.hpp"
#include "glassbox/error.hpp"
#include "glassbox/model/gguf.hpp"
#include "glassbox/thread_group.hpp"
#include "glassbox/model/metadata.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using gbtest::run_cli;

namespace {

// ---- building bad files ----

std::string i32(std::int32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string u32(std::uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string u64(std::uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string f32(float v) { return std::string(reinterpret_cast<const char*>(&v), 4); }

// A llama2.c legacy header: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len.
std::string legacy_header(std::int32_t dim, std::int32_t hidden, std::int32_t layers, std::int32_t heads, std::int32_t kv,
                          std::int32_t vocab, std::int32_t seq) {
  return i32(dim) + i32(hidden) + i32(layers) + i32(heads) + i32(kv) + i32(vocab) + i32(seq);
}

std::string tok_entry(float score, const std::string& piece) { return f32(score) + i32(static_cast<std::int32_t>(piece.size())) + piece; }

std::string gguf_start(std::uint32_t version, std::uint64_t n_tensors, std::uint64_t n_kv) {
  return std::string("GGUF") + u32(version) + u64(n_tensors) + u64(n_kv);
}

// A valid llama GGUF of 512 thin layers (dim 4, one head of 64): 2.2 MB of weights whose KV cache at
// 4,096 positions would be 2 x 512 x 4096 x 64 x 4 bytes = 1 GiB (issue 31's case reserved 528 MB).
void write_thin_layers_gguf(const fs::path& path) {
  using glassbox::MetaType;
  using glassbox::MetaValue;
  auto uint = [](std::uint64_t v) { return MetaValue{MetaType::U32, MetaType::U8, v}; };
  auto text = [](std::string v) { return MetaValue{MetaType::String, MetaType::U8, std::move(v)}; };
  const int dim = 4, head = 64, layers = 512, vocab = 8;
  glassbox::GgufWriter w;
  w.set("general.architecture", text("llama"));
  w.set("llama.context_length", uint(4096));
  w.set("llama.embedding_length", uint(dim));
  w.set("llama.block_count", uint(layers));
  w.set("llama.feed_forward_length", uint(dim));
  w.set("llama.attention.head_count", uint(1));
  w.set("llama.attention.head_count_kv", uint(1));
  w.set("llama.attention.key_length", uint(head));
  w.set("llama.attention.value_length", uint(head));
  w.set("llama.attention.layer_norm_rms_epsilon", MetaValue{MetaType::F32, MetaType::U8, 1e-5});
  w.set("tokenizer.ggml.model", text("llama"));
  std::vector<MetaValue> tokens, scores, types;
  for (int i = 0; i < vocab; ++i) {
    tokens.push_back(text(i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : std::string(1, static_cast<char>('a' + i))));
    scores.push_back(MetaValue{MetaType::F32, MetaType::U8, 0.0});
    types.push_back(MetaValue{MetaType::I32, MetaType::U8, std::int64_t{i < 3 ? 3 : 1}});
  }
  w.set("tokenizer.ggml.tokens", MetaValue{MetaType::Array, MetaType::String, tokens});
  w.set("tokenizer.ggml.scores", MetaValue{MetaType::Array, MetaType::F32, scores});
  w.set("tokenizer.ggml.token_type", MetaValue{MetaType::Array, MetaType::I32, types});
  w.set("tokenizer.ggml.bos_token_id", uint(1));
  w.set("tokenizer.ggml.eos_token_id", uint(2));
  auto tensor = [&](const std::string& name, std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<std::byte> data(static_cast<std::size_t>(n) * 4);
    for (std::size_t i = 0; i < data.size(); i += 4) {  // 0.01 everywhere: finite, small
      const float x = 0.01f;
      std::memcpy(data.data() + i, &x, 4);
    }
    w.add_tensor(name, glassbox::DType::F32, std::move(shape), std::move(data));
  };
  tensor("token_embd.weight", {vocab, dim});
  tensor("output_norm.weight", {dim});
  tensor("output.weight", {vocab, dim});
  for (int l = 0; l < layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    tensor(b + "attn_norm.weight", {dim});
    tensor(b + "attn_q.weight", {head, dim});
    tensor(b + "attn_k.weight", {head, dim});
    tensor(b + "attn_v.weight", {head, dim});
    tensor(b + "attn_output.weight", {dim, head});
    tensor(b + "ffn_norm.weight", {dim});
    tensor(b + "ffn_gate.weight", {dim, dim});
    tensor(b + "ffn_up.weight", {dim, dim});
    tensor(b + "ffn_down.weight", {dim, dim});
  }
  w.write(path);
}

// A one-layer GGUF (dim 4, one head, vocabulary of 8) of architecture `arch` ("llama" or "gpt2"), with
// `more` applied before it is written: the files of round four's architecture cases (issue 46).
void write_tiny_gguf(const fs::path& path, const std::string& arch, const std::function<void(glassbox::GgufWriter&)>& more) {
  using glassbox::MetaType;
  using glassbox::MetaValue;
  auto uint = [](std::uint64_t v) { return MetaValue{MetaType::U32, MetaType::U8, v}; };
  auto text = [](std::string v) { return MetaValue{MetaType::String, MetaType::U8, std::move(v)}; };
  const int dim = 4, vocab = 8;
  const bool gpt2 = arch == "gpt2";
  const std::string a = gpt2 ? "gpt2." : "llama.";
  glassbox::GgufWriter w;
  w.set("general.architecture", text(arch));
  w.set(a + "context_length", uint(16));
  w.set(a + "embedding_length", uint(dim));
  w.set(a + "block_count", uint(1));
  w.set(a + "feed_forward_length", uint(dim));
  w.set(a + "attention.head_count", uint(1));
  if (!gpt2) w.set(a + "attention.layer_norm_rms_epsilon", MetaValue{MetaType::F32, MetaType::U8, 1e-5});
  w.set("tokenizer.ggml.model", text("llama"));
  std::vector<MetaValue> tokens, scores, types;
  for (int i = 0; i < vocab; ++i) {
    tokens.push_back(text(i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : std::string(1, static_cast<char>('a' + i))));
    scores.push_back(MetaValue{MetaType::F32, MetaType::U8, 0.0});
    types.push_back(MetaValue{MetaType::I32, MetaType::U8, std::int64_t{i < 3 ? 3 : 1}});
  }
  w.set("tokenizer.ggml.tokens", MetaValue{MetaType::Array, MetaType::String, tokens});
  w.set("tokenizer.ggml.scores", MetaValue{MetaType::Array, MetaType::F32, scores});
  w.set("tokenizer.ggml.token_type", MetaValue{MetaType::Array, MetaType::I32, types});
  w.set("tokenizer.ggml.bos_token_id", uint(1));
  w.set("tokenizer.ggml.eos_token_id", uint(2));
  auto tensor = [&](const std::string& name, std::vector<std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<std::byte> data(static_cast<std::size_t>(n) * 4);
    for (std::size_t i = 0; i < data.size(); i += 4) {
      const float x = 0.01f;
      std::memcpy(data.data() + i, &x, 4);
    }
    w.add_tensor(name, glassbox::DType::F32, std::move(shape), std::move(data));
  };
  tensor("token_embd.weight", {vocab, dim});
  tensor("output_norm.weight", {dim});
  tensor("output.weight", {vocab, dim});
  if (gpt2) {
    tensor("position_embd.weight", {16, dim});
    tensor("output_norm.bias", {dim});
    for (const char* n : {"attn_norm", "ffn_norm"}) tensor(std::string("blk.0.") + n + ".weight", {dim}), tensor(std::string("blk.0.") + n + ".bias", {dim});
    tensor("blk.0.attn_qkv.weight", {3 * dim, dim});
    tensor("blk.0.attn_qkv.bias", {3 * dim});
    tensor("blk.0.attn_output.weight", {dim, dim});
    tensor("blk.0.attn_output.bias", {dim});
    tensor("blk.0.ffn_up.weight", {dim, dim});
    tensor("blk.0.ffn_up.bias", {dim});
    tensor("blk.0.ffn_down.weight", {dim, dim});
    tensor("blk.0.ffn_down.bias", {dim});
  } else {
    for (const char* n : {"attn_norm", "ffn_norm"}) tensor(std::string("blk.0.") + n + ".weight", {dim});
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) tensor(std::string("blk.0.") + n + ".weight", {dim, dim});
  }
  more(w);
  w.write(path);
}

// The folder of bad files, made once.
const fs::path& bad_dir() {
  static const fs::path dir = [] {
    const fs::path d = gbtest::temp_dir("reliability-inputs");
    auto put = [&](const std::string& name, const std::string& data) { gbtest::write_file(d / name, data); };
    const std::string model = gbtest::shared_dir() ? gbtest::read_file(gbtest::shared("models/stories260K.bin")) : std::string();
    const std::string weights = model.size() > 28 ? model.substr(28) : std::string();
    put("empty.bin", "");
    put("short.bin", "abc");
    put("neg_dim.bin", legacy_header(-64, 172, 5, 8, 4, 512, 512) + weights);
    put("zero_layers.bin", legacy_header(64, 172, 0, 8, 4, 512, 512) + weights);
    put("zero_heads.bin", legacy_header(64, 172, 5, 0, 4, 512, 512) + weights);
    put("heads_7.bin", legacy_header(64, 172, 5, 7, 4, 512, 512) + weights);
    put("kv_gt_heads.bin", legacy_header(64, 172, 5, 8, 16, 512, 512) + weights);
    put("vocab_zero.bin", legacy_header(64, 172, 5, 8, 4, 0, 512) + weights);
    put("seq_zero.bin", legacy_header(64, 172, 5, 8, 4, 512, 0) + weights);
    put("seq_huge.bin", legacy_header(64, 172, 5, 8, 4, 512, 1000000) + weights);
    put("dims_huge.bin", legacy_header(1 << 30, 1 << 30, 1 << 20, 1 << 10, 1 << 10, 1 << 30, 1 << 30) + weights);
    put("truncated.bin", model.substr(0, std::min<std::size_t>(model.size(), 100000)));
    put("header_only.bin", model.substr(0, std::min<std::size_t>(model.size(), 28)));
    put("ak42_version.bin", u32(0x616b3432) + i32(7) + std::string(248, '\0'));
    put("ak42_short.bin", u32(0x616b3432) + i32(1) + std::string(10, '\0'));
    put("gguf_magic.bin", "GGUF");
    put("gguf_version.bin", gguf_start(99, 0, 0));
    put("gguf_tensors.bin", gguf_start(3, std::uint64_t(1) << 62, 0));
    put("gguf_kvs.bin", gguf_start(3, 0, std::uint64_t(1) << 62));
    put("gguf_keylen.bin", gguf_start(3, 0, 1) + u64(std::uint64_t(1) << 60) + "key");
    put("gguf_strlen.bin", gguf_start(3, 0, 1) + u64(3) + "key" + u32(8) + u64(std::uint64_t(1) << 60) + "v");
    put("gguf_arrlen.bin", gguf_start(3, 0, 1) + u64(3) + "key" + u32(9) + u32(6) + u64(std::uint64_t(1) << 61));
    put("gguf_type.bin", gguf_start(3, 0, 1) + u64(3) + "key" + u32(99) + u64(0));
    // Metadata arrays of 12-16 MB (u8, i16, bool items, and empty strings): 0.5-0.8 GB as one object per
    // item (4.2 MB took ~280 MB), beyond the cases' memory bound; packed, about their size. The expected
    // error is the one after the metadata (no tensor data follows), not "out of memory while reading".
    put("gguf_meta_u8.bin", gguf_start(3, 0, 1) + u64(3) + "big" + u32(9) + u32(0) + u64(12000000) + std::string(12000000, '\x07'));
    put("gguf_meta_i16.bin", gguf_start(3, 0, 1) + u64(3) + "big" + u32(9) + u32(3) + u64(8000000) + std::string(16000000, '\x01'));
    put("gguf_meta_bool.bin", gguf_start(3, 0, 1) + u64(3) + "big" + u32(9) + u32(7) + u64(12000000) + std::string(12000000, '\x01'));
    put("gguf_meta_strings.bin", gguf_start(3, 0, 1) + u64(3) + "big" + u32(9) + u32(8) + u64(525000) + std::string(4200000, '\0'));
    put("gguf_meta_bool_2.bin", gguf_start(3, 0, 1) + u64(3) + "big" + u32(9) + u32(7) + u64(3) + std::string("\x01\x00\x02", 3));
    write_thin_layers_gguf(d / "thin_layers.gguf");
    {  // a 1 MB "ak42" checkpoint whose header says seq_len = 10^6 (zero weights: the size the header implies)
      std::string h = u32(0x616b3432) + i32(1) + i32(64) + i32(172) + i32(5) + i32(8) + i32(4) + i32(512) + i32(1000000) + std::string(1, '\1');
      h.resize(256, '\0');
      put("seq_huge_ak42.bin", h + std::string(1040384 - 256, '\0'));
    }
    if (gbtest::shared_dir()) {
      const std::string g = gbtest::read_file(gbtest::shared("gguf/stories260K-f32.gguf"));
      put("gguf_trunc_head.gguf", g.substr(0, 1000));
      put("gguf_trunc_half.gguf", g.substr(0, g.size() / 2));
    }
    // llama2.c tokenizer.bin files: max_token_length, then (score, len, bytes) per token.
    const std::string three = tok_entry(0, "<unk>") + tok_entry(0, "<s>") + tok_entry(0, "</s>");
    put("tok_empty.bin", "");
    put("tok_maxlen0.bin", i32(0) + three);
    put("tok_maxlen_huge.bin", i32(1 << 30) + three);
    put("tok_neglen.bin", i32(8) + three + f32(0) + i32(-5));
    put("tok_len_gt_max.bin", i32(8) + three + tok_entry(0, "0123456789abc"));
    put("tok_trunc_piece.bin", i32(8) + three + f32(0) + i32(6) + "ab");
    put("tok_nan_score.bin", i32(8) + three + tok_entry(std::nanf(""), "ab"));
    put("tok_two.bin", i32(8) + tok_entry(0, "<unk>") + tok_entry(0, "<s>"));
    put("tok_trunc_header.bin", i32(8) + three + f32(0) + "\x01");
    // byte-level BPE tokenizer.json files
    put("bpe_not_json.json", "{not json");
    put("bpe_empty.json", "{}");
    put("bpe_deep.json", std::string(100000, '[') + std::string(100000, ']'));
    put("bpe_wrong_model.json", R"({"model":{"type":"Unigram","vocab":[]}})");
    // YAML configs
    put("cfg_invalid.yaml", "a: [b\n");
    put("cfg_list.yaml", "- a\n- b\n");
    put("cfg_unknown.yaml", "colour: red\n");
    put("cfg_bad_int.yaml", "max_tokens: lots\n");
    put("cfg_seed_neg.yaml", "seed: -1\n");
    put("cfg_deep.yaml", "sampler: " + std::string(5000, '[') + std::string(5000, ']') + "\n");
    put("cfg_sampler.yaml", "sampler:\n  - name: top-k\n    k: -3\n");
    put("cfg_huge_int.yaml", "max_tokens: 99999999999999999999\n");
    // traces
    put("tr_empty.jsonl", "");
    put("tr_text.jsonl", "hello\n");
    put("tr_binary.jsonl", std::string("\x00\x01\x02\xff\xfe\n", 6));
    put("tr_deep.jsonl", R"({"type":"header","x":)" + std::string(100000, '[') + std::string(100000, ']') + "}\n");
    put("tr_schema.jsonl", R"({"type":"header","schema":"glassbox.trace/99"})" "\n");
    put("tr_step_first.jsonl", R"({"type":"step","step":0})" "\n");
    put("tr_array.jsonl", "[1,2,3]\n");
    put("tr_numbers.jsonl", R"({"type":"header","schema":"glassbox.trace/1","model":{"path":"m","sha256":1e999}})" "\n");
    {
      // 1,200 steps (the topk40 golden's decode step repeated): more than trace render lays out.
      auto lines = gbtest::read_jsonl(fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "golden" / "stories260K-topk40-temp0.8-seed7.jsonl");
      nlohmann::json h = lines.at(0), s0 = lines.at(1);
      const int n = 1200, tok = s0["token"]["id"], pos = s0["pos"];
      h["max_tokens"] = n;
      std::string out = h.dump() + "\n" + s0.dump() + "\n";
      for (int k = 1; k < n; ++k) {
        nlohmann::json st = lines.at(2);
        st["step"] = k, st["pos"] = pos + k, st["input_ids"] = {tok}, st["token"]["id"] = tok, st["draw"]["selected"] = tok;
        out += st.dump() + "\n";
      }
      out += nlohmann::json{{"type", "summary"}, {"generated", n}, {"stop_reason", "max_tokens"}, {"ttft_ms", 1},
                            {"prefill_tok_s", 1}, {"decode_tok_s", 1}}.dump() + "\n";
      put("tr_1200_steps.jsonl", out);
    }
    // ---- round three (issue 31) ----
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    // A tokenizer.json whose pre_tokenizer nests 100,000 deep (used to overflow the stack in a copy).
    put("bpe_deep_pre.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":1}},"pre_tokenizer":)" + deep + "}");
    // A pre-tokenizer regex that backtracks catastrophically on "aaaa...a!".
    put("bpe_redos.json",
        R"({"model":{"type":"BPE","vocab":{"a":0,"!":1},"merges":[]},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(a+)+b"},"behavior":"Isolated"}})");
    // A tokenizer.json with one id far beyond its two entries.
    put("bpe_id_huge.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":4194303}}})");
    // GPT-2 release files with one id of 4194303 among two entries (used to take 272 MB).
    fs::create_directories(d / "gpt2_id_huge");
    put("gpt2_id_huge/encoder.json", R"({"a":0,"b":4194303})");
    put("gpt2_id_huge/vocab.bpe", "#version: 0.2\n");
    // compare experiments, shards and trace imports nested deep / malformed / out of range
    put("exp_deep.yaml", "prompts: [a]\nstrategies: [greedy]\nx: " + std::string(5000, '[') + std::string(5000, ']') + "\n");
    const std::string experiment =
        R"({"model":"m","tokenizer":"","tokenizer_plugin":"","attention":"","plugin_path":[],"prompts":["a"],)"
        R"("strategies":[{"label":"greedy","chain":"greedy"}],"seed":0,"max_tokens":2,"independent_seeds":false,)";
    auto shard = [&](const std::string& samples, const std::string& index, const std::string& count) {
      return R"({"schema":"glassbox.compare-shard/1","experiment":)" + experiment + R"("samples":)" + samples +
             R"(},"model_sha256":"x","shard":{"index":)" + index + R"(,"count":)" + count + R"(},"runs":[],"timings":{"wall_s":0}})";
    };
    put("shard_malformed.json", R"({"schema":"glassbox.compare-shard/1","shard":{"index":"one"}})");
    put("shard_samples_2e9.json", shard("2e9", "1", "1"));
    put("shard_samples_2000000000.json", shard("2000000000", "1", "1"));
    put("shard_index_0.json", shard("1", "0", "2"));
    put("shard_index_3_of_2.json", shard("1", "3", "2"));
    put("shard_deep.json", R"({"schema":"glassbox.compare-shard/1","experiment":)" + deep + "}");
    put("import_deep.jsonl", R"({"prompt":"x","steps":)" + deep + "}\n");
    // ---- round four (issue 46) ----
    using glassbox::MetaType;
    using glassbox::MetaValue;
    auto text = [](std::string v) { return MetaValue{MetaType::String, MetaType::U8, std::move(v)}; };
    write_tiny_gguf(d / "arch_escape.gguf", "llama", [&](glassbox::GgufWriter& w) { w.set("general.architecture", text(std::string("ll\x1b[31mama\x07\0x", 13))); });
    write_tiny_gguf(d / "gpt2_no_eps.gguf", "gpt2", [](glassbox::GgufWriter&) {});
    write_tiny_gguf(d / "experts.gguf", "llama", [](glassbox::GgufWriter& w) { w.set("llama.expert_count", MetaValue{MetaType::U32, MetaType::U8, std::uint64_t{8}}); });
    write_tiny_gguf(d / "rope_freqs_zero.gguf", "llama", [](glassbox::GgufWriter& w) {
      w.add_tensor("rope_freqs.weight", glassbox::DType::F32, {2}, std::vector<std::byte>(8, std::byte{0}));
    });
    write_tiny_gguf(d / "tensor_escape.gguf", "llama", [](glassbox::GgufWriter& w) {
      w.add_tensor(std::string("blk.0.x\x1b]0;pwned\x07"), glassbox::DType::F32, {2}, std::vector<std::byte>(8, std::byte{0}));
    });
    {
      // A step whose top list sums to 5 (every listed probability 0.5): validated before (issue 46).
      auto lines = gbtest::read_jsonl(fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "golden" / "stories260K-greedy.jsonl");
      for (auto& t : lines.at(1)["top"]) t["prob"] = 0.5;
      std::string out;
      for (const auto& l : lines) out += l.dump() + "\n";
      put("tr_mass.jsonl", out);
    }
    // tokenizer.json fields of the wrong JSON type
    put("bpe_type_number.json", R"({"model":{"type":7,"vocab":{"a":0}}})");
    put("bpe_merges_object.json", R"({"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":{"a":"b"}}})");
    put("bpe_added_object.json", R"({"model":{"type":"BPE","vocab":{"a":0}},"added_tokens":{"id":0}})");
    put("bpe_post_id_number.json",
        R"({"model":{"type":"BPE","vocab":{"a":0,"<s>":1}},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":1,"type_id":0}}]}})");
    // check suites: a complex key, a NUL in a name, invalid UTF-8 in a name; a --junit over the suite's model
    put("check_complex_key.yaml", "cases:\n  - name: a\n    ? [x, y]\n    : 1\n");
    put("check_nul_name.yaml", "cases:\n  - name: \"a\\0b\"\n    model: m.bin\n    golden: g.jsonl\n");
    put("check_utf8_name.yaml", std::string("cases:\n  - name: \"a\xff\xfe\"\n    model: m.bin\n    golden: g.jsonl\n"));
    put("check_model.bin", "a model the suite names");
    put("check_golden.jsonl", "a golden the suite names");
    put("check_suite.yaml", "cases:\n  - name: a\n    model: check_model.bin\n    golden: check_golden.jsonl\n    prompt: x\n");
    // compare experiments: a key given twice, a negative seed
    put("exp_twice.yaml", "prompts: [a]\nstrategies: [greedy]\nsamples: 1\nsamples: 2\n");
    put("exp_seed_neg.yaml", "prompts: [a]\nstrategies: [greedy]\nseed: -1\n");
    ::mkfifo((d / "fifo").c_str(), 0600);
    fs::create_directories(d / "folder");
    return d;
  }();
  static const struct Cleanup {
    ~Cleanup() { fs::remove_all(dir); }
  } cleanup;
  return dir;
}

std::string bad(const std::string& name) { return (bad_dir() / name).string(); }
std::string model() { return gbtest::shared("models/stories260K.bin").string(); }
std::string tok() { return gbtest::shared("models/tok512.bin").string(); }
std::string golden() { return (fs::path(GLASSBOX_SOURCE_DIR) / "tests" / "golden" / "stories260K-greedy.jsonl").string(); }

std::vector<std::string> run_with(std::vector<std::string> more, const std::string& max_tokens = "2") {
  std::vector<std::string> a{"run", "--model", model(), "--tokenizer", tok(), "--prompt", "Once", "--max-tokens", max_tokens};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}
std::vector<std::string> run_model(const std::string& m) { return {"run", "--model", m, "--tokenizer", tok(), "--prompt", "x", "--max-tokens", "2"}; }
std::vector<std::string> run_gguf(const std::string& m) { return {"run", "--model", m, "--prompt", "x", "--max-tokens", "2"}; }
std::vector<std::string> run_tok(const std::string& t) { return {"run", "--model", model(), "--tokenizer", t, "--prompt", "x", "--max-tokens", "2"}; }

struct Case {
  const char* name;
  std::function<std::vector<std::string>()> args;
  std::function<std::string()> expect;  // a part of the one error line: the file or option it names
  std::function<std::string()> file;    // the input whose size bounds the memory (empty: none)
};
std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.name; }

auto same(std::string s) { return [s] { return s; }; }
auto file_is(std::string name) { return [name] { return bad(name); }; }
auto none() { return [] { return std::string(); }; }

const Case kCases[] = {
    // llama2.c checkpoints
    {"model_empty", [] { return run_model(bad("empty.bin")); }, file_is("empty.bin"), file_is("empty.bin")},
    {"model_3_bytes", [] { return run_model(bad("short.bin")); }, file_is("short.bin"), file_is("short.bin")},
    {"model_negative_dim", [] { return run_model(bad("neg_dim.bin")); }, file_is("neg_dim.bin"), file_is("neg_dim.bin")},
    {"model_zero_layers", [] { return run_model(bad("zero_layers.bin")); }, file_is("zero_layers.bin"), file_is("zero_layers.bin")},
    {"model_zero_heads", [] { return run_model(bad("zero_heads.bin")); }, file_is("zero_heads.bin"), file_is("zero_heads.bin")},
    {"model_heads_not_dividing_dim", [] { return run_model(bad("heads_7.bin")); }, file_is("heads_7.bin"), file_is("heads_7.bin")},
    {"model_kv_heads_above_heads", [] { return run_model(bad("kv_gt_heads.bin")); }, file_is("kv_gt_heads.bin"), file_is("kv_gt_heads.bin")},
    {"model_vocab_zero", [] { return run_model(bad("vocab_zero.bin")); }, file_is("vocab_zero.bin"), file_is("vocab_zero.bin")},
    {"model_seq_len_zero", [] { return run_model(bad("seq_zero.bin")); }, file_is("seq_zero.bin"), file_is("seq_zero.bin")},
    {"model_seq_len_huge_v0", [] { return run_model(bad("seq_huge.bin")); }, file_is("seq_huge.bin"), file_is("seq_huge.bin")},
    {"model_dims_overflow", [] { return run_model(bad("dims_huge.bin")); }, file_is("dims_huge.bin"), file_is("dims_huge.bin")},
    {"model_truncated", [] { return run_model(bad("truncated.bin")); }, file_is("truncated.bin"), file_is("truncated.bin")},
    {"model_header_only", [] { return run_model(bad("header_only.bin")); }, file_is("header_only.bin"), file_is("header_only.bin")},
    {"model_ak42_bad_version", [] { return run_model(bad("ak42_version.bin")); }, file_is("ak42_version.bin"), file_is("ak42_version.bin")},
    {"model_ak42_short", [] { return run_model(bad("ak42_short.bin")); }, file_is("ak42_short.bin"), file_is("ak42_short.bin")},
    {"model_fifo", [] { return run_model(bad("fifo")); }, file_is("fifo"), none()},
    {"model_folder", [] { return run_model(bad("folder")); }, file_is("folder"), none()},
    {"model_dev_zero", [] { return run_model("/dev/zero"); }, same("/dev/zero"), none()},
    {"model_missing", [] { return run_model(bad("nonexistent.bin")); }, file_is("nonexistent.bin"), none()},
    // GGUF
    {"gguf_magic_only", [] { return run_model(bad("gguf_magic.bin")); }, file_is("gguf_magic.bin"), file_is("gguf_magic.bin")},
    {"gguf_unknown_version", [] { return run_model(bad("gguf_version.bin")); }, file_is("gguf_version.bin"), file_is("gguf_version.bin")},
    {"gguf_2e62_tensors", [] { return run_model(bad("gguf_tensors.bin")); }, file_is("gguf_tensors.bin"), file_is("gguf_tensors.bin")},
    {"gguf_2e62_keys", [] { return run_model(bad("gguf_kvs.bin")); }, file_is("gguf_kvs.bin"), file_is("gguf_kvs.bin")},
    {"gguf_key_length_2e60", [] { return run_model(bad("gguf_keylen.bin")); }, file_is("gguf_keylen.bin"), file_is("gguf_keylen.bin")},
    {"gguf_string_length_2e60", [] { return run_model(bad("gguf_strlen.bin")); }, file_is("gguf_strlen.bin"), file_is("gguf_strlen.bin")},
    {"gguf_array_length_2e61", [] { return run_model(bad("gguf_arrlen.bin")); }, file_is("gguf_arrlen.bin"), file_is("gguf_arrlen.bin")},
    {"gguf_unknown_value_type", [] { return run_model(bad("gguf_type.bin")); }, file_is("gguf_type.bin"), file_is("gguf_type.bin")},
    {"gguf_truncated_in_header", [] { return run_model(bad("gguf_trunc_head.gguf")); }, file_is("gguf_trunc_head.gguf"), file_is("gguf_trunc_head.gguf")},
    {"gguf_truncated_in_data", [] { return run_model(bad("gguf_trunc_half.gguf")); }, file_is("gguf_trunc_half.gguf"), file_is("gguf_trunc_half.gguf")},
    {"gguf_metadata_array_12mb_u8", [] { return run_gguf(bad("gguf_meta_u8.bin")); }, same("padding after the tensor infos"), file_is("gguf_meta_u8.bin")},
    {"gguf_metadata_array_16mb_i16", [] { return run_gguf(bad("gguf_meta_i16.bin")); }, same("padding after the tensor infos"), file_is("gguf_meta_i16.bin")},
    {"gguf_metadata_array_12mb_bool", [] { return run_gguf(bad("gguf_meta_bool.bin")); }, same("padding after the tensor infos"), file_is("gguf_meta_bool.bin")},
    {"gguf_metadata_array_4mb_strings", [] { return run_gguf(bad("gguf_meta_strings.bin")); }, same("padding after the tensor infos"), file_is("gguf_meta_strings.bin")},
    {"gguf_metadata_bool_array_item_2", [] { return run_gguf(bad("gguf_meta_bool_2.bin")); }, same("expected 0 or 1"), file_is("gguf_meta_bool_2.bin")},
    {"gguf_512_thin_layers_kv_cache", [] { return run_gguf(bad("thin_layers.gguf")); }, same("MiB for its KV cache and activations"), file_is("thin_layers.gguf")},
    {"context_beyond_the_run_memory_limit", [] { auto a = run_model(bad("seq_huge_ak42.bin")); a.insert(a.end(), {"--context", "1000000"}); return a; }, same("use --context"), file_is("seq_huge_ak42.bin")},
    // llama2.c tokenizer files
    {"tok_empty", [] { return run_tok(bad("tok_empty.bin")); }, file_is("tok_empty.bin"), file_is("tok_empty.bin")},
    {"tok_max_length_0", [] { return run_tok(bad("tok_maxlen0.bin")); }, file_is("tok_maxlen0.bin"), file_is("tok_maxlen0.bin")},
    {"tok_max_length_2e30", [] { return run_tok(bad("tok_maxlen_huge.bin")); }, file_is("tok_maxlen_huge.bin"), file_is("tok_maxlen_huge.bin")},
    {"tok_negative_length", [] { return run_tok(bad("tok_neglen.bin")); }, file_is("tok_neglen.bin"), file_is("tok_neglen.bin")},
    {"tok_length_above_max", [] { return run_tok(bad("tok_len_gt_max.bin")); }, file_is("tok_len_gt_max.bin"), file_is("tok_len_gt_max.bin")},
    {"tok_truncated_piece", [] { return run_tok(bad("tok_trunc_piece.bin")); }, file_is("tok_trunc_piece.bin"), file_is("tok_trunc_piece.bin")},
    {"tok_truncated_entry", [] { return run_tok(bad("tok_trunc_header.bin")); }, file_is("tok_trunc_header.bin"), file_is("tok_trunc_header.bin")},
    {"tok_nan_score", [] { return run_tok(bad("tok_nan_score.bin")); }, file_is("tok_nan_score.bin"), file_is("tok_nan_score.bin")},
    {"tok_two_tokens", [] { return run_tok(bad("tok_two.bin")); }, file_is("tok_two.bin"), file_is("tok_two.bin")},
    {"tok_fifo", [] { return run_tok(bad("fifo")); }, file_is("fifo"), none()},
    {"tok_dev_zero", [] { return run_tok("/dev/zero"); }, same("/dev/zero"), none()},
    {"tok_other_vocabulary", [] { return run_tok(gbtest::shared("models/tokenizer.bin").string()); }, same("tokenizer.bin"), none()},
    // byte-level BPE tokenizer.json
    {"bpe_not_json", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_not_json.json"), "x"}; }, file_is("bpe_not_json.json"), file_is("bpe_not_json.json")},
    {"bpe_empty_object", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_empty.json"), "x"}; }, file_is("bpe_empty.json"), file_is("bpe_empty.json")},
    {"bpe_deep_nesting", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_deep.json"), "x"}; }, file_is("bpe_deep.json"), file_is("bpe_deep.json")},
    {"bpe_not_bpe", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_wrong_model.json"), "x"}; }, file_is("bpe_wrong_model.json"), file_is("bpe_wrong_model.json")},
    {"bpe_fifo", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("fifo"), "x"}; }, file_is("fifo"), none()},
    // YAML configs
    {"config_invalid_yaml", [] { return run_with({"--config", bad("cfg_invalid.yaml")}); }, file_is("cfg_invalid.yaml"), file_is("cfg_invalid.yaml")},
    {"config_a_list", [] { return run_with({"--config", bad("cfg_list.yaml")}); }, file_is("cfg_list.yaml"), file_is("cfg_list.yaml")},
    {"config_unknown_key", [] { return run_with({"--config", bad("cfg_unknown.yaml")}); }, same("colour"), file_is("cfg_unknown.yaml")},
    {"config_max_tokens_text", [] { return run_with({"--config", bad("cfg_bad_int.yaml")}); }, file_is("cfg_bad_int.yaml"), file_is("cfg_bad_int.yaml")},
    {"config_max_tokens_2e20", [] { return run_with({"--config", bad("cfg_huge_int.yaml")}); }, file_is("cfg_huge_int.yaml"), file_is("cfg_huge_int.yaml")},
    {"config_seed_negative", [] { return run_with({"--config", bad("cfg_seed_neg.yaml")}); }, same("seed"), file_is("cfg_seed_neg.yaml")},
    {"config_deep_nesting", [] { return run_with({"--config", bad("cfg_deep.yaml")}); }, file_is("cfg_deep.yaml"), file_is("cfg_deep.yaml")},
    {"config_negative_top_k", [] { return run_with({"--config", bad("cfg_sampler.yaml")}); }, same("'k'"), file_is("cfg_sampler.yaml")},
    {"config_fifo", [] { return run_with({"--config", bad("fifo")}); }, file_is("fifo"), none()},
    {"config_missing", [] { return run_with({"--config", bad("nonexistent.yaml")}); }, file_is("nonexistent.yaml"), none()},
    // options
    {"seed_minus_1", [] { return run_with({"--seed", "-1"}); }, same("--seed"), none()},
    {"seed_2e64", [] { return run_with({"--seed", "18446744073709551616"}); }, same("--seed"), none()},
    {"max_tokens_negative", [] { return run_with({"--max-tokens", "-1"}); }, same("max-tokens"), none()},
    {"context_zero", [] { return run_with({"--context", "0"}); }, same("--context"), none()},
    {"context_1e9", [] { return run_with({"--context", "1000000000"}); }, same("--context"), none()},
    {"context_above_model", [] { return run_with({"--context", "100000"}); }, same("--context"), none()},
    {"kv_capacity_wraps_32_bits", [] { return run_with({"--attention", "kv-cache:4294967396"}); }, same("capacity"), none()},
    {"kv_capacity_negative", [] { return run_with({"--attention", "kv-cache:-1"}); }, same("capacity"), none()},
    {"temperature_1e-40", [] { return run_with({"--sampler", "temperature:1e-40"}); }, same("temperature"), none()},
    {"temperature_overflows_logits", [] { return run_with({"--sampler", "temperature:1.5e-38,dist"}); }, same("step 0: sampler stage 'temperature' produced an infinite logit"), none()},
    {"repetition_penalty_overflows_logits", [] { return std::vector<std::string>{"run", "--model", model(), "--tokenizer", tok(), "--prompt", "Once upon a time", "--sampler", "repetition-penalty:1.5e-38,dist"}; }, same("step 0: sampler stage 'repetition-penalty' produced an infinite logit"), none()},
    {"repetition_penalty_1e-300", [] { return run_with({"--sampler", "repetition-penalty:1e-300"}); }, same("penalty"), none()},
    {"frequency_penalty_1e300", [] { return run_with({"--sampler", "frequency-penalty:1e300"}); }, same("penalty"), none()},
    {"presence_penalty_minus_1e300", [] { return run_with({"--sampler", "presence-penalty:-1e300"}); }, same("penalty"), none()},
    {"repetition_last_n_1e9", [] { return run_with({"--sampler", "repetition-penalty:penalty=1.1;last_n=1000000000"}); }, same("last_n"), none()},
    {"top_k_negative", [] { return run_with({"--sampler", "top-k:-1"}); }, same("top-k"), none()},
    {"top_p_2", [] { return run_with({"--sampler", "top-p:2"}); }, same("top-p"), none()},
    {"min_p_nan", [] { return run_with({"--sampler", "min-p:nan"}); }, same("min-p"), none()},
    {"unknown_sampler", [] { return run_with({"--sampler", "nosuch"}); }, same("nosuch"), none()},
    {"logit_bias_outside_vocab", [] { return run_with({"--sampler", "logit-bias:99999=1.0"}); }, same("99999"), none()},
    {"logit_bias_nan", [] { return run_with({"--sampler", "logit-bias:5=nan"}); }, same("logit-bias"), none()},
    {"trace_level_verbose", [] { return run_with({"--trace-level", "verbose"}); }, same("verbose"), none()},
    {"trace_top_0", [] { return run_with({"--trace-top", "0"}); }, same("--trace-top"), none()},
    {"replay_missing", [] { return run_with({"--replay", bad("nonexistent.jsonl")}); }, file_is("nonexistent.jsonl"), none()},
    {"replay_fifo", [] { return run_with({"--replay", bad("fifo")}); }, file_is("fifo"), none()},
    {"bench_int_overflow", [] { return std::vector<std::string>{"bench", "--model", model(), "--tokenizer", tok(), "--prompt-tokens", "2147483647", "--gen-tokens", "2147483647"}; }, same("--prompt-tokens"), none()},
    {"unknown_command", [] { return std::vector<std::string>{"frobnicate"}; }, same("frobnicate"), none()},
    // traces
    {"trace_dev_zero", [] { return std::vector<std::string>{"trace", "validate", "/dev/zero"}; }, same("/dev/zero"), none()},
    {"trace_fifo", [] { return std::vector<std::string>{"trace", "validate", bad("fifo")}; }, file_is("fifo"), none()},
    {"trace_empty", [] { return std::vector<std::string>{"trace", "validate", bad("tr_empty.jsonl")}; }, file_is("tr_empty.jsonl"), file_is("tr_empty.jsonl")},
    {"trace_text", [] { return std::vector<std::string>{"trace", "validate", bad("tr_text.jsonl")}; }, file_is("tr_text.jsonl"), file_is("tr_text.jsonl")},
    {"trace_binary", [] { return std::vector<std::string>{"trace", "validate", bad("tr_binary.jsonl")}; }, file_is("tr_binary.jsonl"), file_is("tr_binary.jsonl")},
    {"trace_deep_nesting", [] { return std::vector<std::string>{"trace", "validate", bad("tr_deep.jsonl")}; }, same("nested deeper"), file_is("tr_deep.jsonl")},
    {"trace_html_deep_nesting", [] { return std::vector<std::string>{"trace", "html", bad("tr_deep.jsonl"), "-o", bad("deep.html")}; }, file_is("tr_deep.jsonl"), file_is("tr_deep.jsonl")},
    {"trace_other_schema", [] { return std::vector<std::string>{"trace", "validate", bad("tr_schema.jsonl")}; }, same("glassbox.trace/99"), file_is("tr_schema.jsonl")},
    {"trace_step_first", [] { return std::vector<std::string>{"trace", "validate", bad("tr_step_first.jsonl")}; }, file_is("tr_step_first.jsonl"), file_is("tr_step_first.jsonl")},
    {"trace_array_line", [] { return std::vector<std::string>{"trace", "validate", bad("tr_array.jsonl")}; }, file_is("tr_array.jsonl"), file_is("tr_array.jsonl")},
    {"trace_number_overflow", [] { return std::vector<std::string>{"trace", "validate", bad("tr_numbers.jsonl")}; }, file_is("tr_numbers.jsonl"), file_is("tr_numbers.jsonl")},
    {"diff_atol_nan", [] { return std::vector<std::string>{"trace", "diff", "--atol", "nan", golden(), golden()}; }, same("--atol"), none()},
    {"diff_kl_negative", [] { return std::vector<std::string>{"trace", "diff", "--kl", "-1", golden(), golden()}; }, same("--kl"), none()},
    {"diff_rtol_inf", [] { return std::vector<std::string>{"trace", "diff", "--rtol", "inf", golden(), golden()}; }, same("--rtol"), none()},
    {"render_1200_steps", [] { return std::vector<std::string>{"trace", "render", bad("tr_1200_steps.jsonl"), "-o", bad("r.svg")}; }, same("--steps A:B"), file_is("tr_1200_steps.jsonl")},
    {"render_fifo", [] { return std::vector<std::string>{"trace", "render", bad("fifo"), "-o", bad("r.svg")}; }, file_is("fifo"), none()},
    {"html_output_is_input", [] { return std::vector<std::string>{"trace", "html", bad("tr_text.jsonl"), "-o", bad("tr_text.jsonl")}; }, same("refusing to overwrite"), none()},
    // ---- round three (issue 31): one JSON/YAML rule, bounds, regex limits, threads ----
    {"bpe_deep_pre_tokenizer", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_deep_pre.json"), "x"}; }, same("nested deeper"), file_is("bpe_deep_pre.json")},
    {"bpe_regex_backtracks", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_redos.json"), std::string(40, 'a') + "!"}; }, same("(a+)+b"), file_is("bpe_redos.json")},
    {"bpe_id_beyond_entries", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_id_huge.json"), "x"}; }, same("only 2 entries"), file_is("bpe_id_huge.json")},
    {"encoder_json_id_beyond_entries", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("gpt2_id_huge"), "x"}; }, same("only 2 entries"), file_is("gpt2_id_huge/encoder.json")},
    {"experiment_deep_nesting", [] { return std::vector<std::string>{"compare", "--experiment", bad("exp_deep.yaml"), "--model", model(), "--tokenizer", tok()}; }, same("nested deeper"), file_is("exp_deep.yaml")},
    {"merge_shard_deep_nesting", [] { return std::vector<std::string>{"compare", "merge", bad("shard_deep.json")}; }, same("nested deeper"), file_is("shard_deep.json")},
    {"merge_shard_malformed", [] { return std::vector<std::string>{"compare", "merge", bad("shard_malformed.json")}; }, same("shard.count: missing"), file_is("shard_malformed.json")},
    {"merge_shard_not_json", [] { return std::vector<std::string>{"compare", "merge", bad("tr_text.jsonl")}; }, file_is("tr_text.jsonl"), file_is("tr_text.jsonl")},
    {"merge_samples_2e9", [] { return std::vector<std::string>{"compare", "merge", bad("shard_samples_2e9.json")}; }, same("experiment.samples"), file_is("shard_samples_2e9.json")},
    {"merge_samples_2000000000", [] { return std::vector<std::string>{"compare", "merge", bad("shard_samples_2000000000.json")}; }, same("experiment.samples"), file_is("shard_samples_2000000000.json")},
    {"merge_shard_index_0", [] { return std::vector<std::string>{"compare", "merge", bad("shard_index_0.json")}; }, same("shard.index"), file_is("shard_index_0.json")},
    {"merge_shard_index_above_count", [] { return std::vector<std::string>{"compare", "merge", bad("shard_index_3_of_2.json")}; }, same("shard.index"), file_is("shard_index_3_of_2.json")},
    {"import_deep_nesting", [] { return std::vector<std::string>{"trace", "import", bad("import_deep.jsonl"), "--model", model(), "--tokenizer", tok(), "-o", bad("imported.jsonl")}; }, same("nested deeper"), file_is("import_deep.jsonl")},
    {"import_fifo", [] { return std::vector<std::string>{"trace", "import", bad("fifo"), "--model", model(), "--tokenizer", tok(), "-o", bad("imported.jsonl")}; }, file_is("fifo"), none()},
    {"convert_tokenizer_fifo", [] { return std::vector<std::string>{"convert", "--model", model(), "-t", bad("fifo"), "-o", bad("converted.gguf")}; }, file_is("fifo"), none()},
    {"chat_endless_line", [] { return std::vector<std::string>{"chat", "--model", model(), "--tokenizer", tok(), "--input", "/dev/zero", "--max-tokens", "2"}; }, same("longer than 1 MiB"), none()},
    {"synth_70tb_shape", [] { return std::vector<std::string>{"synth", "--dim", "65536", "--hidden-dim", "262144", "--layers", "1024", "--heads", "256", "--kv-heads", "256", "-o", bad("huge.bin")}; }, same("MiB"), none()},
    // ---- round four (issue 46): architectures, tokenizer.json types, check suites, options accepted silently ----
    {"gguf_architecture_name_escaped", [] { return run_gguf(bad("arch_escape.gguf")); }, same("architecture 'll\\x1b[31mama\\x07\\x00x' is not supported"), file_is("arch_escape.gguf")},
    {"gguf_tensor_name_escaped", [] { return run_gguf(bad("tensor_escape.gguf")); }, same("tensor 'blk.0.x\\x1b]0;pwned\\x07' is not used"), file_is("tensor_escape.gguf")},
    {"gguf_gpt2_without_layer_norm_epsilon", [] { return run_gguf(bad("gpt2_no_eps.gguf")); }, same("metadata has no 'gpt2.attention.layer_norm_epsilon'"), file_is("gpt2_no_eps.gguf")},
    {"gguf_mixture_of_experts", [] { return run_gguf(bad("experts.gguf")); }, same("'llama.expert_count' = 8: a mixture of experts"), file_is("experts.gguf")},
    {"gguf_rope_freqs_zero", [] { return run_gguf(bad("rope_freqs_zero.gguf")); }, same("tensor 'rope_freqs.weight' value #0 is 0"), file_is("rope_freqs_zero.gguf")},
    {"bpe_model_type_a_number", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_type_number.json"), "x"}; }, same("bpe_type_number.json: model.type: expected a string"), file_is("bpe_type_number.json")},
    {"bpe_merges_an_object", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_merges_object.json"), "x"}; }, same("bpe_merges_object.json: model.merges: expected an array"), file_is("bpe_merges_object.json")},
    {"bpe_added_tokens_an_object", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_added_object.json"), "x"}; }, same("bpe_added_object.json: added_tokens: expected an array"), file_is("bpe_added_object.json")},
    {"bpe_post_processor_id_a_number", [] { return std::vector<std::string>{"tokenize", "--tokenizer-plugin", "bpe", "-t", bad("bpe_post_id_number.json"), "x"}; }, same("bpe_post_id_number.json: post_processor.single[0].SpecialToken.id: expected a string"), file_is("bpe_post_id_number.json")},
    {"trace_probabilities_sum_past_1", [] { return std::vector<std::string>{"trace", "validate", bad("tr_mass.jsonl")}; }, same("tr_mass.jsonl:2: step.top: the listed probabilities sum to 5"), file_is("tr_mass.jsonl")},
    {"check_complex_key", [] { return std::vector<std::string>{"check", bad("check_complex_key.yaml")}; }, same("check_complex_key.yaml:3: a key that is not a text"), file_is("check_complex_key.yaml")},
    {"check_nul_in_a_name", [] { return std::vector<std::string>{"check", bad("check_nul_name.yaml")}; }, same("case name 'a\\x00b' holds control characters"), file_is("check_nul_name.yaml")},
    {"check_invalid_utf8_in_a_name", [] { return std::vector<std::string>{"check", bad("check_utf8_name.yaml")}; }, same("check_utf8_name.yaml"), file_is("check_utf8_name.yaml")},
    {"check_junit_over_the_model", [] { return std::vector<std::string>{"check", bad("check_suite.yaml"), "--junit", bad("check_model.bin")}; }, same("refusing to overwrite an input"), none()},
    {"check_junit_over_the_golden", [] { return std::vector<std::string>{"check", bad("check_suite.yaml"), "--junit", bad("check_golden.jsonl")}; }, same("refusing to overwrite an input"), none()},
    {"check_work_folder_over_the_golden", [] {
       fs::create_directories(bad_dir() / "w" / "a");
       std::error_code ec;
       fs::create_hard_link(bad("check_golden.jsonl"), bad_dir() / "w" / "a" / "new.jsonl", ec);
       return std::vector<std::string>{"check", bad("check_suite.yaml"), "--work", bad("w")}; }, same("new.jsonl: is the same file as the suite's"), none()},
    {"experiment_key_twice", [] { return std::vector<std::string>{"compare", "--experiment", bad("exp_twice.yaml"), "--model", model(), "--tokenizer", tok()}; }, same("exp_twice.yaml:4: key 'samples' given twice"), file_is("exp_twice.yaml")},
    {"experiment_seed_negative", [] { return std::vector<std::string>{"compare", "--experiment", bad("exp_seed_neg.yaml"), "--model", model(), "--tokenizer", tok()}; }, same("seed = '-1'"), file_is("exp_seed_neg.yaml")},
    {"compare_empty_shard", [] { return std::vector<std::string>{"compare", "--model", model(), "--tokenizer", tok(), "-p", "a", "-s", "greedy", "-N", "1", "-n", "1", "--shard", "3/5", "-o", bad("empty-shard.json")}; }, same("--shard 3/5: the sweep has 1 runs, none of them in this shard"), none()},
    {"explain_seed_minus_1", [] { return std::vector<std::string>{"explain", "-d", "a=.5,b=.5", "--seed", "-1"}; }, same("--seed: '-1' is not a seed"), none()},
    {"compare_seed_2e64", [] { return std::vector<std::string>{"compare", "--model", model(), "--tokenizer", tok(), "-p", "a", "-s", "greedy", "--seed", "18446744073709551616"}; }, same("--seed: '18446744073709551616' is not a seed"), none()},
    {"synth_seed_minus_1", [] { return std::vector<std::string>{"synth", "--seed", "-1", "-o", bad("synth.bin")}; }, same("--seed: '-1' is not a seed"), none()},
    {"synth_empty_preset", [] { return std::vector<std::string>{"synth", "--preset", "", "-o", bad("synth.bin")}; }, same("--preset ''"), none()},
    {"bench_json_and_csv", [] { return std::vector<std::string>{"bench", "--model", model(), "--tokenizer", tok(), "--json", "--csv"}; }, same("excludes"), none()},
    {"import_negative_prompt_index", [] { return std::vector<std::string>{"trace", "import", golden(), "--model", model(), "--tokenizer", tok(), "--prompt-index", "-1", "-o", bad("imported.jsonl")}; }, same("--prompt-index: Value -1 not in range 0 to 1073741824"), none()},
#if !defined(GBTEST_ASAN)  // (no address-space limit under ASan: the threads would start)
    // (a prompt long enough for the products to go parallel: the pool starts on the first such product)
    {"threads_300_without_address_space", [] {
       std::string p;
       for (int i = 0; i < 40; ++i) p += "Once upon a time there was a cat. ";
       return std::vector<std::string>{"run", "--model", model(), "--tokenizer", tok(), "--prompt", p, "--max-tokens", "2", "--threads", "300"}; },
     same("--threads 300"), none()},
#endif
};

// Under AddressSanitizer (tools/sanitize.sh) the CLI reserves terabytes of shadow address space, so an
// address-space limit cannot be applied: the memory bound is then checked by the normal build only.
#if defined(GBTEST_ASAN)
constexpr bool kAsLimit = false;
#else
constexpr bool kAsLimit = true;
#endif
std::string as_limit(std::uint64_t bytes) { return kAsLimit ? "prlimit --as=" + std::to_string(bytes) : std::string(); }

// Address-space baseline of the CLI on a good run (libraries, thread stacks): the smallest of a
// ladder of limits under which it still succeeds.
std::uint64_t baseline_bytes() {
  static const std::uint64_t b = [] {
    for (std::uint64_t mib : {16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024}) {
      if (!kAsLimit) return std::uint64_t(0);
      const auto r = run_cli(run_with({}), "prlimit --as=" + std::to_string(mib << 20));
      if (r.rc == 0) return mib << 20;
    }
    return std::uint64_t(2048) << 20;
  }();
  return b;
}

void expect_one_error(const gbtest::CliResult& r, const std::string& part) {
  BOOST_TEST(r.rc == 2, "exit code " << r.rc << "; stderr: " << r.err);
  std::vector<std::string> errors;
  std::string line;
  std::istringstream in(r.err);
  while (std::getline(in, line))
    if (line.rfind("glassbox: error:", 0) == 0 || line.rfind("glassbox: internal error:", 0) == 0) errors.push_back(line);
  BOOST_TEST_REQUIRE(errors.size() == 1u, "one error line expected; stderr: " << r.err);
  BOOST_TEST(errors[0].find(part) != std::string::npos, "'" << part << "' not in: " << errors[0]);
  BOOST_TEST(errors[0].find("internal error") == std::string::npos, errors[0]);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(malformed, *boost::unit_test::precondition(gbtest::NeedsShared()))

// Each bad input: one error line naming it, exit 2, within 20 s, within 2 x its size + 64 MiB beyond
// the CLI's own baseline address space.
BOOST_DATA_TEST_CASE(one_line_error_exit_2_bounded_time_and_memory, bdata::make(kCases), c) {
  const std::string file = c.file();
  const std::uint64_t size = file.empty() ? 0 : fs::file_size(file);
  const std::uint64_t limit = 2 * size + (std::uint64_t(64) << 20) + baseline_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_cli(c.args(), as_limit(limit) + " timeout 20");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST(s < 20.0, c.name << " took " << s << " s");
  expect_one_error(r, c.expect());
}

// A 1 MB ak42 checkpoint whose header says seq_len = 10^6: the RoPE table and KV cache follow the run's
// context (capped at 4096 by default), not seq_len, so it runs within the same memory bound.
BOOST_AUTO_TEST_CASE(huge_seq_len_allocates_by_the_runs_context) {
  const fs::path dir = gbtest::temp_dir("rel-v1");
  std::string h = u32(0x616b3432) + i32(1) + i32(64) + i32(172) + i32(5) + i32(8) + i32(4) + i32(512) + i32(1000000) + std::string(1, '\1');
  h.resize(256, '\0');
  gbtest::write_file(dir / "v1.bin", h + std::string(1040384 - 256, '\0'));  // zero weights: the size the header implies
  const std::uint64_t limit = 2 * fs::file_size(dir / "v1.bin") + (std::uint64_t(64) << 20) + baseline_bytes();
  const auto r = run_cli(run_model((dir / "v1.bin").string()), as_limit(limit));
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(r.err.find("using a context of 4096") != std::string::npos, r.err);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(there_are_sixty_plus_cases) { BOOST_TEST(std::size(kCases) >= 60u); }

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(outputs, *boost::unit_test::precondition(gbtest::NeedsShared()))

// A run that fails after its trace was opened leaves an existing trace byte for byte as it was; the
// cut-short trace goes beside it as TRACE.partial and validates (with --partial) as cut short.
BOOST_AUTO_TEST_CASE(failed_run_leaves_an_existing_trace_untouched) {
  const fs::path dir = gbtest::temp_dir("rel-keep");
  const fs::path trace = dir / "t.jsonl";
  BOOST_TEST_REQUIRE(run_cli(run_with({"--trace", trace.string()})).rc == 0);
  const std::string before = gbtest::read_file(trace);
  // A sampler module that throws mid-run (a full KV cache now stops cleanly under the context policy).
  const std::string throwing = std::string(GLASSBOX_TEST_PLUGIN_DIR) + "/throwing";
  const auto r = run_cli(run_with({"--trace", trace.string(), "--sampler", "throwing", "--plugin-path", throwing}, "20"));
  expect_one_error(r, "sampler 'throwing'");
  BOOST_TEST(gbtest::read_file(trace) == before);
  BOOST_TEST(r.err.find(trace.string() + ".partial") != std::string::npos, r.err);
  const auto v = run_cli({"trace", "validate", "--partial", trace.string() + ".partial"});
  BOOST_TEST(v.rc == 0, v.err);
  BOOST_TEST(v.out.find("cut short: error") != std::string::npos, v.out);
  // Asked to, the cut-short trace replaces it.
  const auto k = run_cli(run_with({"--trace", trace.string(), "--sampler", "throwing", "--plugin-path", throwing, "--trace-keep-partial"}, "20"));
  BOOST_TEST(k.rc == 2);
  BOOST_TEST(gbtest::read_jsonl(trace).back()["type"] == "error");
  // A failure before the trace opens (a bad model) touches nothing at all.
  gbtest::write_file(trace, before);
  run_cli({"run", "--model", bad("short.bin"), "--tokenizer", tok(), "--trace", trace.string()});
  BOOST_TEST(gbtest::read_file(trace) == before);
  // No temporary files are left behind.
  for (const auto& e : fs::directory_iterator(dir)) BOOST_TEST(e.path().filename().string().find(".tmp-") == std::string::npos, e.path());
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(trace_equal_to_an_input_is_refused) {
  const fs::path dir = gbtest::temp_dir("rel-input");
  fs::copy_file(model(), dir / "m.bin");
  fs::copy_file(tok(), dir / "tok.bin");
  gbtest::write_file(dir / "c.yaml", "max_tokens: 2\n");
  fs::copy_file(golden(), dir / "g.jsonl");
  fs::create_symlink(dir / "m.bin", dir / "link.bin");
  const std::string m = (dir / "m.bin").string(), t = (dir / "tok.bin").string();
  const std::string m_bytes = gbtest::read_file(m), t_bytes = gbtest::read_file(t), g_bytes = gbtest::read_file(dir / "g.jsonl");
  struct { std::string trace, option; } cases[] = {
      {m, "--model"}, {(dir / "link.bin").string(), "--model"}, {t, "--tokenizer"}, {(dir / "c.yaml").string(), "--config"}};
  for (const auto& c : cases) {
    const auto r = run_cli({"run", "--model", m, "--tokenizer", t, "--config", (dir / "c.yaml").string(), "--trace", c.trace});
    expect_one_error(r, "is the same file as " + c.option);
  }
  const auto r = run_cli({"run", "--model", m, "--tokenizer", t, "--replay", (dir / "g.jsonl").string(), "--trace", (dir / "g.jsonl").string()});
  expect_one_error(r, "is the same file as --replay");
  BOOST_TEST(gbtest::read_file(m) == m_bytes);
  BOOST_TEST(gbtest::read_file(t) == t_bytes);
  BOOST_TEST(gbtest::read_file(dir / "g.jsonl") == g_bytes);
  fs::remove_all(dir);
}

// SIGINT after the first streamed token: the run stops between steps, exits 130, and its trace ends in
// an interrupted line that validates (--partial) as interrupted.
BOOST_AUTO_TEST_CASE(sigint_mid_run_leaves_a_trace_marked_interrupted) {
  const fs::path dir = gbtest::temp_dir("rel-sigint");
  const fs::path trace = dir / "t.jsonl";
  int out[2];
  BOOST_TEST_REQUIRE(::pipe(out) == 0);
  const pid_t pid = ::fork();
  BOOST_TEST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    // Slow enough to interrupt: every logit traced (full), stdout read one byte at a time by the parent.
    ::execl(GLASSBOX_BIN, "glassbox", "run", "--model", model().c_str(), "--tokenizer", tok().c_str(), "--prompt", "Once",
            "--max-tokens", "100000", "--trace", trace.c_str(), "--trace-level", "full", (char*)nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  char ch;
  BOOST_TEST_REQUIRE(::read(out[0], &ch, 1) == 1);  // the first streamed token
  ::kill(pid, SIGINT);
  while (::read(out[0], &ch, 1) > 0) {}
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT), "status " << status);
  const auto lines = gbtest::read_jsonl(trace);
  BOOST_TEST_REQUIRE(lines.size() >= 2u);
  BOOST_TEST(lines.back()["type"] == "interrupted");
  BOOST_TEST(lines.back()["signal"] == "SIGINT");
  const auto v = run_cli({"trace", "validate", "--partial", trace.string()});
  BOOST_TEST(v.rc == 0, v.err);
  BOOST_TEST(v.out.find("cut short: interrupted") != std::string::npos, v.out);
  // Without --partial the validator says it was cut short (exit 2), naming the last line.
  const auto strict = run_cli({"trace", "validate", trace.string()});
  expect_one_error(strict, "cut short: the run was interrupted by SIGINT");
  fs::remove_all(dir);
}

// Two runs writing one trace at once: each writes its own temporary file and renames it, so the result
// is always one whole valid trace (never interleaved bytes).
BOOST_AUTO_TEST_CASE(concurrent_writers_never_interleave) {
  const fs::path dir = gbtest::temp_dir("rel-concurrent");
  const fs::path trace = dir / "t.jsonl";
  for (int round = 0; round < 3; ++round) {
    const std::string a = "\"" + std::string(GLASSBOX_BIN) + "\" run --model " + model() + " --tokenizer " + tok() +
                          " --prompt Once --max-tokens 60 --trace-level full --trace " + trace.string() + " >/dev/null 2>&1";
    const std::string cmd = "(" + a + " --seed 1 & " + a + " --seed 2 & " + a + " --seed 3 & wait)";
    BOOST_TEST_REQUIRE(std::system(cmd.c_str()) == 0);
    const auto v = run_cli({"trace", "validate", trace.string()});
    BOOST_TEST(v.rc == 0, v.err);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(write_errors_on_stdout_exit_non_zero) {
  for (const std::string redirect : {"> /dev/full", ">&-"}) {
    const std::string cmd = "\"" + std::string(GLASSBOX_BIN) + "\" run --model " + model() + " --tokenizer " + tok() +
                            " --prompt Once --max-tokens 5 " + redirect + " 2>/dev/null";
    const int status = std::system(cmd.c_str());
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 2), redirect << ": status " << status);
  }
  const std::string v = "\"" + std::string(GLASSBOX_BIN) + "\" trace validate " + golden() + " > /dev/full 2>/dev/null";
  const int status = std::system(v.c_str());
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 2), "trace validate > /dev/full: status " << status);
}

// A file size limit mid-trace is a write error naming the file (not a kill by SIGXFSZ, not a half line in place).
BOOST_AUTO_TEST_CASE(file_size_limit_is_an_error_and_leaves_no_file) {
  const fs::path dir = gbtest::temp_dir("rel-fsize");
  const fs::path trace = dir / "t.jsonl";
  const auto r = run_cli(run_with({"--trace", trace.string(), "--trace-level", "full"}, "50"), "prlimit --fsize=20000");
  expect_one_error(r, trace.string());
  // No earlier file: the cut-short trace is kept in place, valid up to its error line (when that fit).
  if (fs::exists(trace)) BOOST_TEST(run_cli({"trace", "validate", "--partial", trace.string()}).rc == 0);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_1mb_prompt_is_refused_within_2s) {
  std::string prompt;
  while (prompt.size() < (1u << 20)) prompt += "Once upon a time there was a cat. ";
  const fs::path dir = gbtest::temp_dir("rel-prompt");
  gbtest::write_file(dir / "c.yaml", "prompt: \"" + prompt + "\"\n");
  const auto t0 = std::chrono::steady_clock::now();
  // (through --config: one command-line argument holds at most 128 KiB)
  const auto r = run_cli({"run", "--model", model(), "--tokenizer", tok(), "--config", (dir / "c.yaml").string()});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expect_one_error(r, "context holds 512");
  BOOST_TEST(s < 2.0 * gbtest::kTimeScale, "took " << s << " s");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

#if !defined(GBTEST_ASAN)  // (no address-space limit under ASan)
// ThreadGroup (compare --jobs, check --jobs, bench's triad, serve's HTTP pool): under an address-space
// limit that holds a few 8 MiB stacks, starting 300 threads is refused with a ConfigError naming the
// option; the threads already started are told to stop and joined (else the child would hang or
// std::terminate). Run in a forked child, whose address space alone is limited.
BOOST_AUTO_TEST_CASE(a_refused_thread_is_an_error_naming_the_option) {
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(20);  // a hang (threads never told to stop) ends as SIGALRM
    std::ifstream statm("/proc/self/statm");
    std::uint64_t pages = 0;
    statm >> pages;
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) + (std::uint64_t(64) << 20);
    if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(10);
    std::atomic<bool> stop{false};
    std::atomic<int> ran{0};
    try {
      glassbox::ThreadGroup g("--jobs 300", [&] { stop = true; });
      for (int i = 0; i < 300; ++i)
        g.start([&] {
          ++ran;
          while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
      ::_exit(11);  // every thread started: the limit did not bite
    } catch (const glassbox::ConfigError& e) {
      const std::string m = e.what();
      const bool named = m.find("--jobs 300: the system refused to start thread ") != std::string::npos;
      ::_exit(named && ran > 0 && stop ? 0 : 12);
    } catch (...) {
      ::_exit(13);
    }
  }
  int status = 0;
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  BOOST_TEST(WIFEXITED(status), "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
  BOOST_TEST(WEXITSTATUS(status) == 0, "child exit " << WEXITSTATUS(status) << " (10 setrlimit, 11 no refusal, 12 wrong message or no stop, 13 other error)");
}
#endif

// OutputFile itself: commit renames, an abandoned one leaves the target untouched and no temp file.
BOOST_AUTO_TEST_CASE(output_file_is_atomic) {
  const fs::path dir = gbtest::temp_dir("rel-outfile");
  const fs::path p = dir / "x.txt";
  gbtest::write_file(p, "old");
  {
    glassbox::OutputFile f(p);
    f.write("new contents");
    BOOST_TEST(gbtest::read_file(p) == "old");
  }
  BOOST_TEST(gbtest::read_file(p) == "old");
  {
    glassbox::OutputFile f(p);
    f.write("new");
    f.commit();
  }
  BOOST_TEST(gbtest::read_file(p) == "new");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) (void)e, ++files;
  BOOST_TEST(files == 1);
  BOOST_CHECK_THROW(glassbox::OutputFile f(dir / "missing-folder" / "x"), glassbox::OutputError);
  BOOST_CHECK_THROW(glassbox::OutputFile f(dir), glassbox::OutputError);
  // A device or FIFO is refused (an output is a regular file, written whole) unless the output is a live
  // stream, which is written in place, never renamed over.
  BOOST_CHECK_THROW(glassbox::OutputFile f("/dev/null"), glassbox::OutputError);
  ::mkfifo((dir / "fifo").c_str(), 0600);
  BOOST_CHECK_THROW(glassbox::OutputFile f(dir / "fifo"), glassbox::OutputError);
  {
    glassbox::OutputFile f("/dev/null", glassbox::OutputFile::Live::Allowed);
    f.write("x");
    f.commit();
  }
  BOOST_TEST(fs::is_character_file("/dev/null"));
  BOOST_TEST(fs::is_fifo(dir / "fifo"));
  fs::remove(dir / "fifo");
  // An input of the process (recorded when it was checked and opened) is never replaced, under any name:
  // refused when the output opens, and at the rename when the input was read after it opened.
  glassbox::record_inputs(true);  // as the CLI does
  gbtest::write_file(dir / "in.txt", "input");
  fs::create_symlink(dir / "in.txt", dir / "link.txt");
  BOOST_TEST(!glassbox::not_a_regular_file(dir / "in.txt"));  // the check every input passes, and records
  BOOST_CHECK_THROW(glassbox::OutputFile f(dir / "link.txt"), glassbox::OutputError);
  gbtest::write_file(dir / "late.txt", "late input");
  {
    glassbox::OutputFile f(dir / "late.txt");
    f.write("output");
    glassbox::note_input(dir / "late.txt");
    BOOST_CHECK_THROW(f.commit(), glassbox::OutputError);
  }
  BOOST_TEST(gbtest::read_file(dir / "in.txt") == "input");
  BOOST_TEST(gbtest::read_file(dir / "late.txt") == "late input");
  glassbox::record_inputs(false);
  // A check on the complete temporary file that fails abandons the output: the old file stays.
  {
    glassbox::OutputFile f(p);
    f.write("does not validate");
    f.check_before_commit([](const fs::path& tmp) {
      BOOST_TEST(gbtest::read_file(tmp) == "does not validate");
      throw glassbox::TraceError("invalid");
    });
    BOOST_CHECK_THROW(f.commit(), glassbox::TraceError);
  }
  BOOST_TEST(gbtest::read_file(p) == "new");
  // A signal handler removes the temporary files of outputs not yet committed.
  {
    glassbox::OutputFile f(dir / "sig.txt");
    f.write("half");
    glassbox::remove_output_temporaries();
    for (const auto& e : fs::directory_iterator(dir)) BOOST_TEST(e.path().filename().string().find(".tmp-") == std::string::npos, e.path());
  }
  // A symbolic link to a file: the file it names is replaced, the link stays a link (before: a plain file
  // took the link's place).
  gbtest::write_file(dir / "real.txt", "old");
  fs::create_symlink(dir / "real.txt", dir / "to-real.txt");
  glassbox::write_file_atomically(dir / "to-real.txt", "through the link");
  BOOST_TEST(fs::is_symlink(dir / "to-real.txt"));
  BOOST_TEST(gbtest::read_file(dir / "real.txt") == "through the link");
  // The process's own descriptor open on a file (`--trace /dev/stderr 2>log`): written through it, after
  // what is already there, for a live stream and a whole output alike; /proc/self/fd/N (and so /dev/stderr,
  // a link to /proc/self/fd/2) is never renamed over.
  const int fd = ::open((dir / "log.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  BOOST_TEST_REQUIRE(fd >= 0);
  BOOST_TEST_REQUIRE(::write(fd, "before\n", 7) == 7);
  const std::string own = "/proc/self/fd/" + std::to_string(fd);
  for (const auto live : {glassbox::OutputFile::Live::Allowed, glassbox::OutputFile::Live::Refused}) {
    glassbox::OutputFile f(own, live);
    BOOST_TEST(f.in_place());
    f.write(live == glassbox::OutputFile::Live::Allowed ? "live\n" : "whole\n");
    f.commit();
  }
  BOOST_TEST(gbtest::read_file(dir / "log.txt") == "before\nlive\nwhole\n");
  BOOST_TEST(::write(fd, "after\n", 6) == 6);  // the descriptor itself still open on the file
  ::close(fd);
  BOOST_TEST(gbtest::read_file(dir / "log.txt") == "before\nlive\nwhole\nafter\n");
  for (const auto& e : fs::directory_iterator(dir)) BOOST_TEST(e.path().filename().string().find(".tmp-") == std::string::npos, e.path());
  BOOST_TEST(fs::is_symlink("/dev/stderr"));
  fs::remove_all(dir);
}

// Metadata floats are checked against float's range before use (issue 31): an F64 rope.freq_base of
// 1e300 used to become inf, an epsilon of 1e-50 zero, and the run went on.
BOOST_DATA_TEST_CASE(metadata_floats_outside_float_range_are_refused, bdata::make({1e300, -1e300, 1e-50, 1e39}), x) {
  glassbox::Metadata m;
  m.source = "m.gguf";
  m.set("llama.rope.freq_base", glassbox::MetaValue{glassbox::MetaType::F64, glassbox::MetaType::U8, x});
  try {
    (void)m.get_float("llama.rope.freq_base");
    BOOST_ERROR("accepted " << x);
  } catch (const glassbox::ModelError& e) {
    BOOST_TEST(std::string(e.what()).find("m.gguf: metadata 'llama.rope.freq_base'") != std::string::npos, e.what());
  }
}

BOOST_DATA_TEST_CASE(metadata_floats_inside_float_range_are_read, bdata::make({10000.0, 1e-5, 0.0, 5e5, 3.0e38}), x) {
  glassbox::Metadata m;
  m.set("k", glassbox::MetaValue{glassbox::MetaType::F64, glassbox::MetaType::U8, x});
  BOOST_TEST(*m.get_float("k") == x);
}

// ---------------------------------------------------------------- round three (issue 31)

namespace {

// The files the output table's commands read: copies, so that a command that wrongly wrote over its
// input would not damage ../shared.
struct Ctx {
  fs::path dir, m, t, trace, golden, shard, turns, suite;
};
const Ctx& ctx() {
  static const Ctx c = [] {
    Ctx x;
    x.dir = gbtest::temp_dir("rel-outputs-inputs");
    x.m = x.dir / "m.bin";
    x.t = x.dir / "tok.bin";
    x.trace = x.dir / "t.jsonl";
    x.golden = x.dir / "g.jsonl";
    x.shard = x.dir / "s.json";
    x.turns = x.dir / "turns.txt";
    fs::copy_file(model(), x.m);
    fs::copy_file(tok(), x.t);
    fs::copy_file(golden(), x.trace);
    fs::copy_file(gbtest::shared("golden/llama2c-stories260K-greedy.jsonl"), x.golden);
    gbtest::write_file(x.turns, "Hello\n");
    x.suite = x.dir / "suite.yaml";  // check: one case, the trace as its golden
    gbtest::write_file(x.suite, "cases:\n  - name: g\n    model: m.bin\n    tokenizer: tok.bin\n    golden: t.jsonl\n");
    const auto r = run_cli({"compare", "--shard", "1/1", "-o", x.shard.string(), "--model", x.m.string(), "--tokenizer", x.t.string(),
                            "-p", "Once", "-s", "greedy", "-N", "1", "-n", "2", "--jobs", "1"});
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    return x;
  }();
  static const struct Cleanup {
    ~Cleanup() { fs::remove_all(c.dir); }
  } cleanup;
  return c;
}

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Every command that writes a file, by the option that names it. `args(out)` writes `out`;
// `over_input` gives the arguments that make the output one of the command's inputs and that input
// (for chat, the derived FILE-turn1 name), or nothing for a command that reads no file.
struct OutputRow {
  const char* name;     // "COMMAND OPTION", as the coverage test finds them in --help
  bool live;            // a trace stream: a FIFO or device is written in place (someone reads it live)
  std::function<std::vector<std::string>(const std::string& out)> args;
  std::function<std::optional<std::pair<std::vector<std::string>, fs::path>>()> over_input;
};
std::ostream& operator<<(std::ostream& o, const OutputRow& r) { return o << r.name; }

std::string S(const fs::path& p) { return p.string(); }
std::vector<std::string> mt() { return {"--model", S(ctx().m), "--tokenizer", S(ctx().t)}; }
std::vector<std::string> small_compare() { return cat(cat({"compare"}, mt()), {"-p", "Once", "-s", "greedy", "-N", "1", "-n", "2", "--jobs", "1"}); }
auto over(std::function<std::vector<std::string>(const std::string&)> args, std::function<fs::path()> input) {
  return [args, input]() -> std::optional<std::pair<std::vector<std::string>, fs::path>> { return std::pair{args(S(input())), input()}; };
}
auto no_input() { return []() -> std::optional<std::pair<std::vector<std::string>, fs::path>> { return std::nullopt; }; }

const OutputRow kOutputs[] = {
    {"run --trace", true, [](const std::string& o) { return cat(cat({"run"}, mt()), {"-p", "Once", "-n", "2", "--trace", o}); },
     over([](const std::string& o) { return cat(cat({"run"}, mt()), {"-p", "Once", "-n", "2", "--trace", o}); }, [] { return ctx().m; })},
    // chat writes FILE-turnN: the derived name is what must not be an input.
    {"chat --trace", true, [](const std::string& o) { return cat(cat({"chat"}, mt()), {"--input", S(ctx().turns), "-n", "2", "--trace", o}); },
     [] {
       const fs::path derived = ctx().dir / "cm-turn1.bin";
       if (!fs::exists(derived)) fs::copy_file(ctx().m, derived);
       return std::optional{std::pair{std::vector<std::string>{"chat", "--model", S(derived), "--tokenizer", S(ctx().t), "--input", S(ctx().turns),
                                                              "-n", "2", "--trace", S(ctx().dir / "cm.bin")},
                                      derived}};
     }},
    {"trace html -o", false, [](const std::string& o) { return std::vector<std::string>{"trace", "html", S(ctx().trace), "-o", o}; },
     over([](const std::string& o) { return std::vector<std::string>{"trace", "html", S(ctx().trace), "-o", o}; }, [] { return ctx().trace; })},
    {"trace render -o", false, [](const std::string& o) { return std::vector<std::string>{"trace", "render", S(ctx().trace), "--to", "dot", "-o", o}; },
     over([](const std::string& o) { return std::vector<std::string>{"trace", "render", S(ctx().trace), "--to", "dot", "-o", o}; }, [] { return ctx().trace; })},
    {"trace import -o", false, [](const std::string& o) { return cat(cat({"trace", "import", S(ctx().golden)}, mt()), {"-o", o}); },
     over([](const std::string& o) { return cat(cat({"trace", "import", S(ctx().golden)}, mt()), {"-o", o}); }, [] { return ctx().golden; })},
    {"plugins -o", false, [](const std::string& o) { return std::vector<std::string>{"plugins", "--graph", "--to", "dot", "-o", o}; }, no_input()},
    {"compare -o", false, [](const std::string& o) { return cat(small_compare(), {"-o", o}); },
     over([](const std::string& o) { return cat(small_compare(), {"-o", o}); }, [] { return ctx().m; })},
    {"compare --html", false, [](const std::string& o) { return cat(small_compare(), {"--html", o}); },
     over([](const std::string& o) { return cat(small_compare(), {"--html", o}); }, [] { return ctx().t; })},
    {"compare merge -o", false, [](const std::string& o) { return std::vector<std::string>{"compare", "merge", S(ctx().shard), "-o", o}; },
     over([](const std::string& o) { return std::vector<std::string>{"compare", "merge", S(ctx().shard), "-o", o}; }, [] { return ctx().shard; })},
    {"compare merge --html", false, [](const std::string& o) { return std::vector<std::string>{"compare", "merge", S(ctx().shard), "--html", o}; },
     over([](const std::string& o) { return std::vector<std::string>{"compare", "merge", S(ctx().shard), "--html", o}; }, [] { return ctx().shard; })},
    {"convert -o", false, [](const std::string& o) { return cat(cat({"convert"}, mt()), {"-o", o}); },
     over([](const std::string& o) { return cat(cat({"convert"}, mt()), {"-o", o}); }, [] { return ctx().t; })},
    {"check --junit", false, [](const std::string& o) { return std::vector<std::string>{"check", S(ctx().suite), "--junit", o}; },
     over([](const std::string& o) { return std::vector<std::string>{"check", S(ctx().suite), "--junit", o}; }, [] { return ctx().m; })},
    {"synth -o", false,
     [](const std::string& o) { return std::vector<std::string>{"synth", "--dim", "8", "--hidden-dim", "8", "--layers", "1", "--heads", "2",
                                                                "--kv-heads", "2", "--vocab", "8", "--seq-len", "8", "-o", o}; },
     no_input()},
};

// Output options that name a folder, not a file (the files inside go through the same OutputFile).
const char* const kFolderOutputs[] = {"compare --traces", "check --html"};

void expect_no_temporaries(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) BOOST_TEST(e.path().filename().string().find(".tmp-") == std::string::npos, e.path());
}

// The subcommands (with their parents: "trace html") and their output options, from --help.
std::vector<std::string> cli_output_options() {
  const char* const outputs[] = {"-o", "--output", "--out", "--html", "--trace", "--traces", "--junit"};
  std::vector<std::string> found;
  std::function<void(const std::string&)> walk = [&](const std::string& path) {
    std::vector<std::string> args;
    std::istringstream words(path);
    for (std::string w; words >> w;) args.push_back(w);
    args.push_back("--help");
    const auto r = run_cli(args);
    std::istringstream in(r.out);
    bool subcommands = false;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("Subcommands:", 0) == 0 || line.rfind("SUBCOMMANDS:", 0) == 0) { subcommands = true; continue; }
      if (!line.empty() && line[0] != ' ') subcommands = false;
      const auto first = line.find_first_not_of(' ');
      if (first == std::string::npos) continue;
      const std::string token = line.substr(first, line.find(' ', first) - first);
      if (subcommands && first == 2 && token[0] != '-') {
        walk(path.empty() ? token : path + " " + token);
        continue;
      }
      if (token[0] != '-') continue;
      std::istringstream names(token);
      std::string match;
      for (std::string n; std::getline(names, n, ',');)
        for (const char* o : outputs)
          if (n == o) match = (n == "-o" || n == "--output" || n == "--out") ? "-o" : n;
      if (!match.empty()) found.push_back(path + " " + match);
    }
  };
  walk("");
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(output_rule, *boost::unit_test::precondition(gbtest::NeedsShared()))

// A new command, or a new output option, cannot skip the rule: every output option --help shows is a
// row of kOutputs (or a folder option), and every row is a real option.
BOOST_AUTO_TEST_CASE(every_output_option_of_the_cli_is_in_the_table) {
  const auto found = cli_output_options();
  BOOST_TEST_REQUIRE(found.size() >= 8u, "the --help walk found too little: " << found.size());
  std::set<std::string> table;
  for (const auto& r : kOutputs) table.insert(r.name);
  for (const char* f : kFolderOutputs) table.insert(f);
  for (const auto& f : found) BOOST_TEST(table.count(f) == 1u, "'" << f << "' writes a file but is not a row of kOutputs");
  for (const auto& t : table) BOOST_TEST(std::count(found.begin(), found.end(), t) == 1, "row '" << t << "' is no option of the CLI");
}

// Each row: the output is written (and no temporary file is left); refused, with the input untouched,
// when it is an input (a derived name too); refused when it is a FIFO (no hang), a device or a folder.
BOOST_DATA_TEST_CASE(every_output_follows_the_rule, bdata::make(kOutputs), row) {
  const fs::path dir = gbtest::temp_dir("rel-output-rule");
  const fs::path out = dir / "out.file";
  const auto ok = run_cli(row.args(S(out)), "timeout 60");
  BOOST_TEST_REQUIRE(ok.rc == 0, row.name << ": " << ok.err);
  BOOST_TEST((fs::exists(out) || fs::exists(dir / "out-turn1.file")), row.name);
  expect_no_temporaries(dir);
  if (auto c = row.over_input()) {
    const std::string before = gbtest::read_file(c->second);
    const auto r = run_cli(c->first, "timeout 60");
    expect_one_error(r, "refusing to overwrite");
    BOOST_TEST(gbtest::read_file(c->second) == before, row.name << ": the input changed");
    expect_no_temporaries(c->second.parent_path());
  }
  ::mkfifo((dir / "fifo").c_str(), 0600);
  fs::create_directories(dir / "folder");
  fs::create_directories(dir / "folder-turn1");  // chat's derived name for --trace folder
  const auto folder = run_cli(row.args(S(dir / "folder")), "timeout 60");
  BOOST_TEST(folder.rc == 2, row.name << ": " << folder.err);
  if (!row.live) {
    const auto fifo = run_cli(row.args(S(dir / "fifo")), "timeout 20");
    expect_one_error(fifo, "FIFO");
    BOOST_TEST(fs::is_fifo(dir / "fifo"));
    const auto dev = run_cli(row.args("/dev/full"), "timeout 20");
    expect_one_error(dev, "/dev/full");
    BOOST_TEST(fs::is_character_file("/dev/full"));
  }
  expect_no_temporaries(dir);
  fs::remove_all(dir);
}

// SIGINT while a command writes its output: the temporary file is removed and an existing file is left
// as it was (synth of a ~0.5 GB checkpoint takes long enough to interrupt).
BOOST_AUTO_TEST_CASE(sigint_while_writing_leaves_no_temporary_and_the_old_file) {
  const fs::path dir = gbtest::temp_dir("rel-sigint-write");
  const fs::path out = dir / "big.bin";
  gbtest::write_file(out, "the old file");
  const pid_t pid = ::fork();
  BOOST_TEST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execl(GLASSBOX_BIN, "glassbox", "synth", "--dim", "1024", "--hidden-dim", "2816", "--layers", "8", "--heads", "8", "--kv-heads", "8",
            "--vocab", "32000", "--seq-len", "256", "-o", out.c_str(), (char*)nullptr);
    ::_exit(127);
  }
  // Wait for its temporary file to appear, then interrupt.
  bool seen = false;
  for (int i = 0; i < 2000 && !seen; ++i) {
    for (const auto& e : fs::directory_iterator(dir)) seen = seen || e.path().filename().string().find(".tmp-") != std::string::npos;
    if (!seen) ::usleep(5000);
  }
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_TEST(seen);
  BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGINT), "status " << status);
  BOOST_TEST(gbtest::read_file(out) == "the old file");
  expect_no_temporaries(dir);
  fs::remove_all(dir);
}

// --context-policy truncate-left with a context of 1 or 2 positions and prompts of 0..several tokens: the
// policy makes it fit (it used to be a double free for 1 token, a forward error for 2), and the trace validates.
BOOST_DATA_TEST_CASE(truncate_left_fits_any_prompt_into_a_tiny_context,
                     bdata::make({"", "x", "Once upon", "Once upon a time"}) * bdata::make({1, 2, 3}), prompt, context) {
  const fs::path dir = gbtest::temp_dir("rel-truncate");
  for (const char* policy : {"truncate-left", "shift"}) {
    const fs::path trace = dir / "t.jsonl";
    const auto r = run_cli(cat(cat({"run"}, {"--model", model(), "--tokenizer", tok()}),
                               {"-p", prompt, "--context", std::to_string(context), "--context-policy", policy, "-n", "4", "--trace", S(trace)}),
                           "timeout 20");
    BOOST_TEST(r.rc == 0, policy << " '" << prompt << "' context " << context << ": " << r.err);
    const auto v = run_cli({"trace", "validate", S(trace)});
    BOOST_TEST(v.rc == 0, policy << " '" << prompt << "' context " << context << ": " << v.out << v.err);
  }
  fs::remove_all(dir);
}

// --pace 60000 (a minute before each token) ends at SIGINT, as a run does: exit 130 within seconds.
BOOST_AUTO_TEST_CASE(pace_is_interruptible) {
  int out[2];
  BOOST_TEST_REQUIRE(::pipe(out) == 0);
  const pid_t pid = ::fork();
  BOOST_TEST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(out[1], 2);
    ::close(out[0]);
    ::close(out[1]);
    ::execl(GLASSBOX_BIN, "glassbox", "run", "--model", model().c_str(), "--tokenizer", tok().c_str(), "--prompt", "Once",
            "--max-tokens", "5", "--pace", "60000", (char*)nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  ::usleep(1500000);  // loaded and into its first pause
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(out[0]);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT), "status " << status);
  BOOST_TEST(s < 5.0 * gbtest::kTimeScale, "took " << s << " s after SIGINT");
}

BOOST_AUTO_TEST_SUITE_END()
