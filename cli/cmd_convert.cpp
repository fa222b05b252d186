// `glassbox convert`: a llama2.c checkpoint and its tokenizer.bin (or a GGUF file) → a self-contained
// GGUF v3 file laid out as llama.cpp's convert-llama2c-to-ggml writes it, with the matrices in F32, F16, BF16, Q8_0 or Q4_0.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>

#include "commands.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/model/gguf.hpp"
#include "glassbox/model/model_source.hpp"
#include "glassbox/quant.hpp"
#include "glassbox/tokenizer.hpp"
#include "session.hpp"

namespace glassbox::cli {

namespace {

MetaValue u32(std::int64_t v) { return {MetaType::U32, MetaType::U8, static_cast<std::uint64_t>(v)}; }
MetaValue f32(double v) { return {MetaType::F32, MetaType::U8, v}; }
MetaValue str(std::string v) { return {MetaType::String, MetaType::U8, std::move(v)}; }

// The target types and their general.file_type (llama_ftype: MOSTLY_F16 = 1, MOSTLY_Q4_0 = 2, ...).
struct Target {
  std::string_view name;
  DType type;
  std::uint32_t file_type;
};
constexpr Target kTargets[] = {{"F32", DType::F32, 0}, {"F16", DType::F16, 1}, {"BF16", DType::BF16, 32},
                               {"Q8_0", DType::Q8_0, 7}, {"Q4_0", DType::Q4_0, 2}};

const Target& parse_target(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const auto& t : kTargets)
    if (t.name == s) return t;
  throw ConfigError("--type '" + s + "' is not supported (expected F32, F16, BF16, Q8_0 or Q4_0)");
}

// A llama2.c tokenizer.bin as llama.cpp's converter reads it: exactly vocab_size entries (score,
// length, bytes) after the max_token_length header; ids 0..2 renamed <unk>, <s>, </s>; spaces
// spelled "▁" as SentencePiece models store them.
struct Vocab {
  std::vector<MetaValue> tokens, scores, types;
};

Vocab read_llama2c_vocab(const std::filesystem::path& path, int vocab_size) {
  const std::string where = path.string() + ": ";
  // A FIFO would block in open(); every input is checked (and recorded as an input) first.
  if (auto why = not_a_regular_file(path)) throw TokenizerError(where + *why + " (expected a llama2.c tokenizer.bin)");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw TokenizerError(where + "cannot open tokenizer file: " + std::strerror(errno));
  auto fail = [&](const std::string& why) { return TokenizerError(where + why + " (expected a llama2.c tokenizer.bin)"); };
  std::int32_t max_len = 0;
  if (!f.read(reinterpret_cast<char*>(&max_len), 4)) throw fail("file shorter than its 4-byte header");
  if (max_len <= 0 || max_len > 65536) throw fail("max_token_length = " + std::to_string(max_len) + " is not in 1..65536");
  Vocab v;
  for (int id = 0; id < vocab_size; ++id) {
    const std::string at = "token " + std::to_string(id);
    float score;
    std::int32_t len;
    if (!f.read(reinterpret_cast<char*>(&score), 4) || !f.read(reinterpret_cast<char*>(&len), 4))
      throw fail(at + ": file ends early; the model's vocab_size is " + std::to_string(vocab_size));
    if (!std::isfinite(score)) throw fail(at + ": score is not a finite number");
    if (len < 0 || len > max_len) throw fail(at + ": length " + std::to_string(len) + " is not in 0.." + std::to_string(max_len));
    std::string text(static_cast<std::size_t>(len), '\0');
    if (len > 0 && !f.read(text.data(), len)) throw fail(at + ": truncated piece bytes");
    TokenType type = TokenType::Normal;
    unsigned int byte = 0;
    char tail = 0;
    if (id == 0) text = "<unk>", type = TokenType::Unknown;
    else if (id == 1) text = "<s>", type = TokenType::Control;
    else if (id == 2) text = "</s>", type = TokenType::Control;
    else if (text.empty()) type = TokenType::Control;
    else if (text.size() == 6 && std::sscanf(text.c_str(), "<0x%2X%c", &byte, &tail) == 2 && tail == '>') type = TokenType::Byte;
    std::string piece;
    for (char c : text) piece += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
    v.tokens.push_back(str(std::move(piece)));
    v.scores.push_back(f32(score));
    v.types.push_back({MetaType::I32, MetaType::U8, std::int64_t{static_cast<int>(type)}});
  }
  if (f.peek() != std::char_traits<char>::eof())
    throw fail("more than the model's vocab_size = " + std::to_string(vocab_size) + " tokens (wrong tokenizer for this model?)");
  return v;
}

MetaValue array(MetaType elem, std::vector<MetaValue> items) { return {MetaType::Array, elem, std::move(items)}; }

// The tokenizer keys in the order llama.cpp's converter writes them.
void set_vocab(Metadata& m, Vocab v) {
  m.set("tokenizer.ggml.tokens", array(MetaType::String, std::move(v.tokens)));
  m.set("tokenizer.ggml.scores", array(MetaType::F32, std::move(v.scores)));
  m.set("tokenizer.ggml.token_type", array(MetaType::I32, std::move(v.types)));
  m.set("tokenizer.ggml.model", str("llama"));
}

// llama.cpp's converter's key order (tokenizer keys interleaved with general.*), then the llama.* keys.
Metadata llama2c_keys(const Config& c, Vocab vocab, const std::string& name) {
  Metadata m;
  set_vocab(m, std::move(vocab));
  m.set("general.architecture", str("llama"));
  m.set("general.name", str(name));
  m.set("tokenizer.ggml.unknown_token_id", u32(0));
  m.set("tokenizer.ggml.bos_token_id", u32(1));
  m.set("tokenizer.ggml.eos_token_id", u32(2));
  m.set("tokenizer.ggml.seperator_token_id", u32(0xFFFFFFFF));  // llama.cpp's spelling; "none"
  m.set("tokenizer.ggml.padding_token_id", u32(0xFFFFFFFF));
  m.set("llama.context_length", u32(c.seq_len));  // the checkpoint's own (llama.cpp's converter writes 128)
  m.set("llama.embedding_length", u32(c.dim));
  m.set("llama.feed_forward_length", u32(c.hidden_dim));
  m.set("llama.attention.head_count", u32(c.n_heads));
  m.set("llama.attention.head_count_kv", u32(c.n_kv_heads));
  m.set("llama.block_count", u32(c.n_layers));
  m.set("llama.rope.dimension_count", u32(c.head_size()));
  m.set("llama.attention.layer_norm_rms_epsilon", f32(c.norm_eps));
  return m;
}

struct Plan {
  DType requested;
  bool pure = false;
  std::map<std::string, std::vector<std::string>> fallbacks;  // "row length N" -> tensor names
};

// The stored type of one tensor. Vectors (norm weights) stay F32. With a 4-bit request the
// classifier gets Q8_0, as llama-quantize's output rule does where Q6_K cannot hold its rows (glassbox
// writes no k-quants, so it is Q8_0 always). A row length that is not a multiple of the block
// falls back to F16, as llama-quantize's incompatible-tensor rule ends.
DType type_for(const std::string& name, const Tensor& t, Plan& plan) {
  if (t.n_dims < 2) return DType::F32;
  DType want = plan.requested;
  if (!plan.pure && want == DType::Q4_0 && name == "output.weight") want = DType::Q8_0;
  const auto& info = dtype_info(want);
  if (static_cast<std::size_t>(t.cols()) % info.block_values != 0) {
    plan.fallbacks["rows of " + std::to_string(t.cols()) + " values are not a multiple of " + std::string(info.name) +
                   "'s " + std::to_string(info.block_values) + "-value block"]
        .push_back(name);
    want = DType::F16;
  }
  return want;
}

// Converts row by row through f32: every source type dequantizes exactly, and quantize_row
// repeats llama-quantize's reference quantizers. A tensor already of the wanted type is copied.
std::vector<std::byte> convert_tensor(const Tensor& t, DType to) {
  if (t.dtype == to) return {t.data, t.data + t.bytes};  // re-quantizing could move values by a rounding step
  const std::int64_t cols = t.cols(), rows = t.numel() / cols;  // every outer dimension counts as rows
  const std::size_t out_row = row_bytes(to, static_cast<std::size_t>(cols));
  std::vector<std::byte> out(out_row * static_cast<std::size_t>(rows));
  std::vector<float> buf(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    quant::dequantize_row(t.dtype, t.data + row_bytes(t.dtype, buf.size()) * static_cast<std::size_t>(r), buf.data(), buf.size());
    quant::quantize_row(to, buf.data(), out.data() + out_row * static_cast<std::size_t>(r), buf.size());
  }
  return out;
}

std::vector<std::int64_t> shape_of(const Tensor& t) { return {t.shape.begin(), t.shape.begin() + t.n_dims}; }

}  // namespace

void add_convert_command(CLI::App& app) {
  struct Opts {
    std::string model, tokenizer, type = "F32", output, name = "llama";
    bool pure = false, tie_output = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("convert", "write a llama2.c checkpoint (or a GGUF file) as a self-contained GGUF file");
  cmd->add_option("--model,-m", o->model, "llama2.c checkpoint (.bin) or GGUF file to convert")->required();
  cmd->add_option("--tokenizer,-t", o->tokenizer,
                  "llama2.c tokenizer.bin to embed (required for a llama2.c checkpoint; replaces a GGUF input's vocabulary)");
  cmd->add_option("--type", o->type, "type of the 2-D weight matrices: F32, F16, BF16, Q8_0 or Q4_0 (default: F32)");
  cmd->add_option("--output,-o", o->output, "the GGUF file to write (replaced atomically)")->required();
  cmd->add_option("--name", o->name, "general.name to record (default: llama, as llama.cpp's converter writes)");
  cmd->add_flag("--pure", o->pure, "every matrix in --type, including the classifier (Q4_0 otherwise keeps output.weight Q8_0)");
  cmd->add_flag("--tie-output", o->tie_output,
                "omit output.weight when the classifier is the token embedding (llama.cpp's converter writes a copy)");
  cmd->callback([o] {
    const Target& target = parse_target(o->type);
    const auto src = ModelSource::open(o->model);
    const Config& c = src->config();
    Plan plan{target.type, o->pure, {}};

    // The tensors to write, in the converter's order (llama2.c) or the file's own (GGUF).
    std::vector<std::pair<std::string, Tensor>> tensors;
    Metadata meta;
    if (const GgufFile* g = src->gguf()) {
      for (const auto& [key, v] : g->metadata().entries()) {
        if (!o->tokenizer.empty() && key.rfind("tokenizer.", 0) == 0) continue;
        if (key == "general.alignment") continue;  // the writer records its own
        if (key == "general.quantization_version" && target.type == DType::F32) continue;
        meta.set(key, v);
      }
      if (!o->tokenizer.empty()) set_vocab(meta, read_llama2c_vocab(o->tokenizer, c.vocab_size));
      for (const auto& info : g->tensors()) {
        if (o->tie_output && info.name == "output.weight") continue;
        tensors.emplace_back(info.name, g->tensor(info));
      }
      // Dequantizing is exact, so only a lossy target rounds an already quantized tensor a second time.
      std::string twice;
      for (const auto& [name, t] : tensors)
        if (target.type != DType::F32 && t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16 &&
            t.dtype != target.type && t.n_dims >= 2)
          twice += (twice.empty() ? "" : ", ") + name + " (" + std::string(dtype_name(t.dtype)) + ")";
      if (!twice.empty())
        warn("convert: these tensors are already quantized and are rounded a second time to " + std::string(target.name) +
             ": " + twice);
    } else {
      if (o->tokenizer.empty())
        throw ConfigError("convert: --tokenizer is required for a llama2.c checkpoint (its vocabulary is a separate tokenizer.bin)");
      meta = llama2c_keys(c, read_llama2c_vocab(o->tokenizer, c.vocab_size), o->name);
      const Weights& w = src->weights();
      tensors.emplace_back("token_embd.weight", w.token_embedding);
      tensors.emplace_back("output_norm.weight", w.rms_final);
      if (!(o->tie_output && c.shared_classifier)) tensors.emplace_back("output.weight", w.wcls);
      for (std::size_t l = 0; l < w.layers.size(); ++l) {
        const auto& lw = w.layers[l];
        const std::string b = "blk." + std::to_string(l) + ".";
        using Named = std::pair<const char*, const Tensor*>;
        for (auto [n, t] : std::initializer_list<Named>{{"attn_q", &lw.wq}, {"attn_k", &lw.wk}, {"attn_v", &lw.wv}, {"attn_output", &lw.wo},
                            {"attn_norm", &lw.rms_att}, {"ffn_gate", &lw.w1}, {"ffn_down", &lw.w2}, {"ffn_up", &lw.w3},
                            {"ffn_norm", &lw.rms_ffn}})
          tensors.emplace_back(b + n + ".weight", *t);
      }
    }
    meta.set("general.file_type", u32(target.file_type));
    if (target.type != DType::F32) meta.set("general.quantization_version", u32(2));  // as llama-quantize writes

    GgufWriter out;
    for (const auto& [key, v] : meta.entries()) out.set(key, v);
    std::map<std::string_view, int> counts;
    for (const auto& [name, t] : tensors) {
      const DType to = type_for(name, t, plan);
      ++counts[dtype_name(to)];
      out.add_tensor(name, to, shape_of(t), convert_tensor(t, to));
    }
    out.write(o->output);

    for (const auto& [why, names] : plan.fallbacks) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      std::cerr << "glassbox: note: convert: " << names.size() << " tensor(s) written as F16 because their " << why << ": "
                << list << "\n";
    }
    std::string summary;
    for (const auto& [name, n] : counts) summary += (summary.empty() ? "" : ", ") + std::string(name) + ":" + std::to_string(n);  // as the trace header spells it
    std::cout << "wrote " << o->output << ": GGUF v3, " << tensors.size() << " tensors (" << summary << "), "
              << std::filesystem::file_size(o->output) << " bytes\n";
  });
}

}  // namespace glassbox::cli
