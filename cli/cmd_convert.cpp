// `glassbox convert`: a llama2.c checkpoint and its tokenizer.bin (or a GGUF file) → a self-contained
// GGUF v3 file laid out as llama.cpp's convert-llama2c-to-ggml writes it, with the matrices in F32, F16, BF16,
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL or one of llama-quantize's k-quant mixes (Q2_K, Q3_K_M, Q4_K_S/M, Q5_K_S/M, Q6_K),
// each tensor's type chosen by llama-quantize's rules (src/llama-quant.cpp, llama_tensor_get_type).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
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

// The targets (llama-quantize's ftype names), their base type (what a matrix gets unless a rule below
// says otherwise) and their general.file_type (llama.h's llama_ftype: MOSTLY_F16 = 1, MOSTLY_Q4_0 = 2, ...).
struct Target {
  std::string_view name;
  DType type;
  std::uint32_t file_type;
};
constexpr Target kTargets[] = {{"F32", DType::F32, 0},       {"F16", DType::F16, 1},       {"BF16", DType::BF16, 32},
                               {"Q8_0", DType::Q8_0, 7},     {"Q4_0", DType::Q4_0, 2},     {"Q4_1", DType::Q4_1, 3},
                               {"Q5_0", DType::Q5_0, 8},     {"Q5_1", DType::Q5_1, 9},     {"IQ4_NL", DType::IQ4_NL, 25},
                               {"Q2_K", DType::Q2_K, 10},
                               {"Q3_K_M", DType::Q3_K, 12},  {"Q4_K_S", DType::Q4_K, 14},  {"Q4_K_M", DType::Q4_K, 15},
                               {"Q5_K_S", DType::Q5_K, 16},  {"Q5_K_M", DType::Q5_K, 17},  {"Q6_K", DType::Q6_K, 18}};
constexpr const char* kTargetList = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K_M, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M or Q6_K";

const Target& parse_target(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const auto& t : kTargets)
    if (t.name == s) return t;
  throw ConfigError("--type '" + s + "' is not supported (expected " + kTargetList + ")");
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

// A llama2.c tokenizer's special ids (llama2.c's convention: 0 <unk>, 1 <s>, 2 </s>), as llama.cpp's converter
// writes them. A llama vocabulary adds BOS by default, so without bos_token_id glassbox (and llama.cpp) refuse it.
void set_llama2c_specials(Metadata& m) {
  m.set("tokenizer.ggml.unknown_token_id", u32(0));
  m.set("tokenizer.ggml.bos_token_id", u32(1));
  m.set("tokenizer.ggml.eos_token_id", u32(2));
  m.set("tokenizer.ggml.seperator_token_id", u32(0xFFFFFFFF));  // llama.cpp's spelling; "none"
  m.set("tokenizer.ggml.padding_token_id", u32(0xFFFFFFFF));
}

// llama.cpp's converter's key order (tokenizer keys interleaved with general.*), then the llama.* keys.
Metadata llama2c_keys(const Config& c, Vocab vocab, const std::string& name) {
  Metadata m;
  set_vocab(m, std::move(vocab));
  m.set("general.architecture", str("llama"));
  m.set("general.name", str(name));
  set_llama2c_specials(m);
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
  const Target* target;
  bool pure = false;
  bool has_output = true;  // an output.weight is written (else token_embd is the classifier)
  int n_layers = 0, n_gqa = 1;
  std::map<std::string, std::vector<std::string>> fallbacks;  // "TYPE because …" -> tensor names
};

bool is_quantized(DType t) { return t != DType::F32 && t != DType::F16 && t != DType::BF16; }

// llama-quantize's use_more_bits: the first and last eighth of the layers, and every third one between.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// The layer number N of "blk.N.…" (0 for other names).
int layer_of(const std::string& name) {
  int i = 0;
  return std::sscanf(name.c_str(), "blk.%d.", &i) == 1 ? i : 0;
}

// llama_tensor_get_type (src/llama-quant.cpp at llama.cpp c392e50) for the targets above, without an
// imatrix and for the llama architecture. The base type applies unless:
//   * the classifier (output.weight, or token_embd when there is no output.weight): Q6_K, or Q8_0 where
//     its rows are not a multiple of 256 (an F16/BF16/F32 target keeps its type; Q8_0 stays Q8_0);
//   * attn_v: Q2_K → Q3_K (Q4_K with ≥ 4 query heads per kv head); Q3_K_M → Q5_K in layers 0 and 1,
//     else Q4_K; IQ4_NL → Q5_K with ≥ 4 query heads per kv head; Q4_K_M/Q5_K_M → Q6_K in the
//     use_more_bits layers; Q4_K_S → Q5_K in layers 0..3;
//   * ffn_down: Q2_K → Q3_K; Q3_K_M → Q5_K in the first 1/16 of the layers, else Q4_K; Q4_K_M/Q5_K_M →
//     Q6_K in the use_more_bits layers; IQ4_NL and Q4_K_S → Q5_K in the first 1/8;
//   * attn_output: Q2_K → Q3_K; Q3_K_M → Q4_K.
DType rule_type(const std::string& name, const Plan& plan, std::int64_t cols) {
  const DType base = plan.target->type;
  const std::string_view ftype = plan.target->name;
  const int il = layer_of(name), n = plan.n_layers;
  if (name == "output.weight" || (!plan.has_output && name == "token_embd.weight"))
    return cols % static_cast<std::int64_t>(quant::QK_K) != 0 ? DType::Q8_0 : base == DType::Q8_0 ? base : DType::Q6_K;
  if (name.find("attn_v.weight") != std::string::npos) {
    if (ftype == "Q2_K") return plan.n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
    if (ftype == "Q3_K_M") return il < 2 ? DType::Q5_K : DType::Q4_K;
    if (ftype == "IQ4_NL" && plan.n_gqa >= 4) return DType::Q5_K;
    if ((ftype == "Q4_K_M" || ftype == "Q5_K_M") && use_more_bits(il, n)) return DType::Q6_K;
    if (ftype == "Q4_K_S" && il < 4) return DType::Q5_K;
  } else if (name.find("ffn_down") != std::string::npos) {
    if (ftype == "Q2_K") return DType::Q3_K;
    if (ftype == "Q3_K_M") return il < n / 16 ? DType::Q5_K : DType::Q4_K;
    if (ftype == "Q4_K_M" && use_more_bits(il, n)) return DType::Q6_K;
    if (ftype == "IQ4_NL" && il < n / 8) return DType::Q5_K;
    if (ftype == "Q5_K_M" && use_more_bits(il, n)) return DType::Q6_K;
    if (ftype == "Q4_K_S" && il < n / 8) return DType::Q5_K;
  } else if (name.find("attn_output.weight") != std::string::npos) {
    if (ftype == "Q2_K") return DType::Q3_K;
    if (ftype == "Q3_K_M") return DType::Q4_K;
  }
  return base;
}

// The stored type of one tensor. Vectors (norm weights) stay F32. Matrices get rule_type's type (the
// base type with --pure or a float target). Where a k-quant's 256-value super-block does not divide
// the rows, llama-quantize falls back per tensor: Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, Q2_K/Q3_K →
// IQ4_NL. Any other type whose block does not divide the rows (or a fallback's 32-value block) becomes
// F16, as llama-quantize's incompatible-tensor rule ends.
DType type_for(const std::string& name, const Tensor& t, Plan& plan) {
  if (t.n_dims < 2) return DType::F32;
  const DType base = plan.target->type;
  DType want = plan.pure || !is_quantized(base) ? base : rule_type(name, plan, t.cols());
  const auto& info = dtype_info(want);
  if (static_cast<std::size_t>(t.cols()) % info.block_values != 0) {
    const std::string why = "rows of " + std::to_string(t.cols()) + " values are not a multiple of " + std::string(info.name) +
                            "'s " + std::to_string(info.block_values) + "-value block";
    DType to = DType::F16;
    switch (want) {
      case DType::Q4_K: to = DType::Q5_0; break;
      case DType::Q5_K: to = DType::Q5_1; break;
      case DType::Q6_K: to = DType::Q8_0; break;
      case DType::Q2_K:
      case DType::Q3_K: to = DType::IQ4_NL; break;
      default: break;
    }
    if (static_cast<std::size_t>(t.cols()) % dtype_info(to).block_values != 0) to = DType::F16;
    plan.fallbacks[std::string(dtype_name(to)) + " because their " + why].push_back(name);
    want = to;
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
  cmd->add_option("--type", o->type,
                  "type of the 2-D weight matrices, as llama-quantize names its types and mixes: F32, F16, BF16, Q8_0, Q4_0, "
                  "Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K_M, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M or Q6_K (default: F32)");
  cmd->add_option("--output,-o", o->output, "the GGUF file to write (replaced atomically)")->required();
  cmd->add_option("--name", o->name, "general.name to record (default: llama, as llama.cpp's converter writes)");
  cmd->add_flag("--pure", o->pure,
                "every matrix in --type's base type, including the classifier (otherwise llama-quantize's rules raise "
                "output.weight to Q6_K or Q8_0, and some attn_v/ffn_down/attn_output of the k-quant mixes)");
  cmd->add_flag("--tie-output", o->tie_output,
                "omit output.weight when the classifier is the token embedding (llama.cpp's converter writes a copy)");
  cmd->callback([o] {
    const Target& target = parse_target(o->type);
    const auto src = ModelSource::open(o->model);
    const Config& c = src->config();
    Plan plan{&target, o->pure, true, c.n_layers, c.n_kv_heads > 0 ? c.n_heads / c.n_kv_heads : 1, {}};

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
      if (!o->tokenizer.empty()) {
        // The GGUF's own tokenizer keys are all replaced (its special ids belong to its vocabulary).
        set_vocab(meta, read_llama2c_vocab(o->tokenizer, c.vocab_size));
        set_llama2c_specials(meta);
      }
      for (const auto& info : g->tensors()) {
        if (o->tie_output && info.name == "output.weight") continue;
        tensors.emplace_back(info.name, g->tensor(info));
      }
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
    plan.has_output = std::any_of(tensors.begin(), tensors.end(), [](const auto& nt) { return nt.first == "output.weight"; });
    std::vector<DType> types;
    for (const auto& [name, t] : tensors) types.push_back(type_for(name, t, plan));
    // Dequantizing is exact, so only a lossy target rounds an already quantized tensor a second time.
    std::string twice;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i].second;
      if (types[i] != DType::F32 && is_quantized(t.dtype) && t.dtype != types[i] && t.n_dims >= 2)
        twice += (twice.empty() ? "" : ", ") + tensors[i].first + " (" + std::string(dtype_name(t.dtype)) + " to " +
                 std::string(dtype_name(types[i])) + ")";
    }
    if (!twice.empty()) warn("convert: these tensors are already quantized and are rounded a second time: " + twice);
    meta.set("general.file_type", u32(target.file_type));
    if (target.type != DType::F32) meta.set("general.quantization_version", u32(2));  // as llama-quantize writes

    GgufWriter out;
    for (const auto& [key, v] : meta.entries()) out.set(key, v);
    std::map<std::string_view, int> counts;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const auto& [name, t] = tensors[i];
      ++counts[dtype_name(types[i])];
      out.add_tensor(name, types[i], shape_of(t), convert_tensor(t, types[i]));
    }
    out.write(o->output);

    for (const auto& [why, names] : plan.fallbacks) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      std::cerr << "glassbox: note: convert: " << names.size() << " tensor(s) written as " << why << ": "
                << list << "\n";
    }
    std::string summary;
    for (const auto& [name, n] : counts) summary += (summary.empty() ? "" : ", ") + std::string(name) + ":" + std::to_string(n);  // as the trace header spells it
    std::cout << "wrote " << o->output << ": GGUF v3, " << tensors.size() << " tensors (" << summary << "), "
              << std::filesystem::file_size(o->output) << " bytes\n";
  });
}

}  // namespace glassbox::cli
