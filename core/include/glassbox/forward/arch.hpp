// Architectures as recipes, not forks: a plain description of how a model family's forward pass differs
// from llama's, and one table per family of its GGUF keys and tensor names. The GGUF loader, the forward
// pass, `inspect` and the trace header all read these tables (docs/architectures.md).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace glassbox {

struct Weights;
struct LayerWeights;
struct Tensor;
struct Config;
class Metadata;

enum class NormKind : std::uint8_t { RMSNorm, LayerNorm };
// Where a token's position enters: RoPE on adjacent pairs (x[2i], x[2i+1]) — llama's "NORM" —, RoPE on
// the two halves (x[i], x[i + n_rot/2]) — GPT-NeoX's, used by Qwen, Gemma, Phi-3 —, or a learned table of
// position vectors added to the embedding (GPT-2).
enum class PositionKind : std::uint8_t { RopeAdjacent, RopeNeox, Learned };
// SwiGLU: down(SiLU(gate)·up); GeGLU: down(GELU(gate)·up); GeluMlp: down(GELU(up)) (GPT-2).
enum class FfnKind : std::uint8_t { SwiGLU, GeGLU, GeluMlp };
// Which layers attend through a sliding window (the window's width is Config::sliding_window).
enum class WindowPattern : std::uint8_t { None, Every, EvenLayers, FiveOfSix };
// How GELU is computed: the tanh approximation (what GPT-2 and Gemma were trained with), the exact erf
// form, or llama.cpp's CPU table (x rounded to fp16, gelu looked up as fp16) for comparing with its goldens.
enum class GeluKind : std::uint8_t { Tanh, Erf, Fp16Table };

// What the forward pass switches on. Every field is a fact of the family; sizes and values that vary
// between models of one family (eps, soft-cap values, window width, RoPE bases) live in Config.
struct ArchDescription {
  NormKind norm = NormKind::RMSNorm;
  bool norm_bias = false;        // LayerNorm's β on every norm (GPT-2)
  PositionKind position = PositionKind::RopeAdjacent;
  FfnKind ffn = FfnKind::SwiGLU;
  bool qkv_bias = false;         // biases on Q, K and V (Qwen2, GPT-2)
  bool out_bias = false;         // bias on the attention output projection (GPT-2)
  bool ffn_bias = false;         // biases on the up and down projections (GPT-2)
  bool fused_qkv = false;        // one attn_qkv matrix whose rows are Q | K | V (GPT-2, Phi-3)
  bool fused_gate_up = false;    // one ffn_up matrix whose rows are gate | up (Phi-3)
  bool qk_norm = false;          // RMSNorm over each head of Q and of K before RoPE (Qwen3, Gemma3)
  bool post_norms = false;       // RMSNorm on each branch's output before the residual add (Gemma2/3)
  bool embed_scale = false;      // x = E[token]·√dim (Gemma)
  WindowPattern window = WindowPattern::None;
};

// The sizes a tensor's dimensions are named by.
enum class Dim : std::uint8_t { None, Embd, QDim, KvDim, Hidden, Vocab, TrainCtx, HeadDim, RotHalf, QkvDim, GateUp };

// One tensor of an architecture: its GGUF name ("blk.N." is prefixed for per-layer ones), shape
// {rows, cols} (cols None: a vector), where it goes in Weights, and whether a file must have it.
struct TensorSlot {
  const char* name;
  Dim rows, cols;
  bool required;
  bool f32_only;                         // norm gains, biases, rope factors: read as floats
  Tensor Weights::*global = nullptr;      // exactly one of these two is set
  Tensor LayerWeights::*layer = nullptr;
};

// One architecture: its `general.architecture` name, what learners know it as, its description, and
// its tensors. Keys are read as `{name}.key` (llama.cpp's converter writes them so).
struct ArchTable {
  const char* name;
  const char* models;   // examples, for messages and docs ("GPT-2", "Qwen2, Qwen2.5", ...)
  ArchDescription desc;
  std::vector<TensorSlot> tensors;
};

// Every supported architecture, llama first.
const std::vector<ArchTable>& architectures();
// The table for `name`, nullptr when unsupported.
const ArchTable* find_architecture(std::string_view name);
// "llama, gpt2, qwen2, ..." for messages.
std::string supported_architectures();

// Names for the trace header, `inspect` and docs ("rmsnorm", "rope-neox", "swiglu", "every", ...).
std::string_view to_string(NormKind k);
std::string_view to_string(PositionKind k);
std::string_view to_string(FfnKind k);
std::string_view to_string(WindowPattern k);
std::string_view to_string(GeluKind k);
// "tanh" | "erf" | "fp16-table"; ConfigError otherwise.
GeluKind parse_gelu(std::string_view text);
// The description as "name=value" pairs in a fixed order (header, inspect): only what differs from llama's
// defaults is left out by `only_differences`.
std::vector<std::pair<std::string, std::string>> describe(const ArchDescription& d, bool only_differences = false);

// The description and the config's resolved facts (head_dim, n_rot, attn_scale, soft-caps, windows per
// layer, RoPE bases, gelu) as name → text pairs: the trace header's model.arch and `inspect`.
std::vector<std::pair<std::string, std::string>> describe_config(const Config& c);

// The per-layer facts Config holds, from the architecture's pattern (one entry per layer).
struct LayerRule {
  int window = 0;           // a query at p sees keys j with p − j < window; 0: every earlier position
  float rope_theta = 0;     // this layer's RoPE base
};

}  // namespace glassbox
