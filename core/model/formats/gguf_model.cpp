// The GGUF format for every supported architecture: hyper-parameters from the `{arch}.*` keys and typed
// views of the tensors the architecture's table names (core/forward/arch.cpp), each checked for the shape
// the config implies. A tensor the table does not name is refused rather than silently ignored.
#include <cmath>
#include <set>
#include <string>

#include "glassbox/error.hpp"
#include "glassbox/forward/arch.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/model/printable.hpp"
#include "glassbox/model/model_source.hpp"

namespace glassbox {

namespace {

// A float key read as f64 by Metadata: finite, in (lo, hi], and representable as a float.
float float_key(const Metadata& m, const std::string& key, float fallback, double lo, double hi, const std::string& where) {
  const auto v = m.get_float(key);
  if (!v) return fallback;
  if (!std::isfinite(*v) || !(*v > lo) || *v > hi)
    throw ModelError(where + "metadata '" + key + "' = " + std::to_string(*v) + " (expected a number in (" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "])");
  return static_cast<float>(*v);
}

// The run-independent config from the GGUF keys of `arch_name` (with llama.cpp's defaults where it has
// them): sizes, heads, RoPE, norms, and the family facts that are keys. The vocabulary size comes from the tensors.
Config read_config(const Metadata& m, const ArchTable& arch, const std::string& arch_name, int version, const std::string& where) {
  const std::string a = arch_name + ".";
  Config c;
  c.architecture = arch_name;
  c.arch = arch.desc;
  c.format = "gguf";
  c.format_version = version;
  auto required = [&](const std::string& key, std::int64_t lo, std::int64_t hi) {
    const auto v = m.get_int(a + key);
    if (!v) throw ModelError(where + "metadata has no '" + a + key + "' (required for architecture " + arch_name + ")");
    if (*v < lo || *v > hi)
      throw ModelError(where + "metadata '" + a + key + "' = " + std::to_string(*v) + " (expected " +
                       std::to_string(lo) + ".." + std::to_string(hi) + ")");
    return static_cast<int>(*v);
  };
  auto optional = [&](const std::string& key, std::int64_t lo, std::int64_t hi, int fallback) {
    return m.has(a + key) ? required(key, lo, hi) : fallback;
  };
  c.dim = required("embedding_length", 1, 1 << 16);
  c.hidden_dim = required("feed_forward_length", 1, 1 << 18);
  c.n_layers = required("block_count", 1, 1024);
  c.n_heads = required("attention.head_count", 1, 1 << 12);
  c.n_kv_heads = optional("attention.head_count_kv", 1, c.n_heads, c.n_heads);
  c.seq_len = c.train_ctx = required("context_length", 1, 1 << 24);
  if (c.n_heads % c.n_kv_heads != 0)
    throw ModelError(where + "head_count_kv " + std::to_string(c.n_kv_heads) + " does not divide head_count " + std::to_string(c.n_heads));
  // A head's width: attention.key_length when given (Gemma, Qwen3: n_heads·head_dim may differ from dim).
  const int key_length = optional("attention.key_length", 1, 1 << 12, 0);
  const int value_length = optional("attention.value_length", 1, 1 << 12, key_length);
  if (key_length == 0 && c.dim % c.n_heads != 0)
    throw ModelError(where + "head_count " + std::to_string(c.n_heads) + " does not divide embedding_length " + std::to_string(c.dim) +
                     " and there is no '" + a + "attention.key_length'");
  if (value_length != key_length)
    throw ModelError(where + "metadata '" + a + "attention.value_length' = " + std::to_string(value_length) + " but key_length is " +
                     std::to_string(key_length) + " (only equal key and value widths are supported)");
  c.head_dim = key_length > 0 ? key_length : c.dim / c.n_heads;
  if (c.arch.position != PositionKind::Learned) {
    c.n_rot = optional("rope.dimension_count", 2, c.head_dim, c.head_dim);
    if (c.n_rot % 2 != 0)
      throw ModelError(where + "metadata '" + a + "rope.dimension_count' = " + std::to_string(c.n_rot) + " is odd (RoPE rotates pairs)");
  }
  c.rope_theta = float_key(m, a + "rope.freq_base", 10000.0f, 0, 1e12, where);
  // LayerNorm families write layer_norm_epsilon, RMSNorm ones layer_norm_rms_epsilon.
  const std::string eps_key = c.arch.norm == NormKind::LayerNorm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
  // llama.cpp requires LayerNorm's epsilon (it has no default for it): a gpt2 file without it is refused, not run with a guess.
  if (c.arch.norm == NormKind::LayerNorm && !m.has(a + eps_key))
    throw ModelError(where + "metadata has no '" + a + eps_key + "' (required for architecture " + arch_name + ", as llama.cpp requires it)");
  c.norm_eps = float_key(m, a + eps_key, 1e-5f, 0, 1, where);
  // A mixture of experts (expert_count > 0) routes each token through a few of many FFNs: not implemented here,
  // and never run as if it were a dense model.
  if (m.has(a + "expert_count")) {
    const auto experts = m.get_int(a + "expert_count");
    if (experts && *experts > 0)
      throw ModelError(where + "metadata '" + a + "expert_count' = " + std::to_string(*experts) +
                       ": a mixture of experts, which glassbox does not implement (dense models only)");
  }
  if (auto type = m.get_string(a + "rope.scaling.type"); type && *type != "none") {
    if (*type != "linear")
      throw ModelError(where + "rope scaling type '" + printable_text(*type) + "' is not supported (supported: none, linear; Llama 3 "
                       "scaling comes as the rope_freqs.weight tensor)");
    c.rope_scaling = {"linear", float_key(m, a + "rope.scaling.factor", 0, 0, 1e6, where)};
    if (!(c.rope_scaling.factor > 0)) throw ModelError(where + "linear rope scaling needs a positive '" + a + "rope.scaling.factor'");
  }

  // Family facts that are keys (with llama.cpp's defaults where it has them).
  if (c.arch.window != WindowPattern::None) {
    // Gemma 2's default window is 4096 (llama.cpp); Phi-3 and Gemma 3 must say theirs. 0 turns it off (Phi-4).
    const bool must = c.architecture != "gemma2";
    if (must && !m.has(a + "attention.sliding_window"))
      throw ModelError(where + "metadata has no '" + a + "attention.sliding_window' (required for architecture " + arch_name + ")");
    c.sliding_window = optional("attention.sliding_window", 0, 1 << 24, 4096);
    if (c.sliding_window == 0) c.arch.window = WindowPattern::None;
  }
  if (c.architecture == "gemma2") {
    c.attn_softcap = float_key(m, a + "attn_logit_softcapping", 50.0f, 0, 1e6, where);
    c.final_softcap = float_key(m, a + "final_logit_softcapping", 30.0f, 0, 1e6, where);
  } else {
    c.attn_softcap = float_key(m, a + "attn_logit_softcapping", 0.0f, 0, 1e6, where);
    c.final_softcap = float_key(m, a + "final_logit_softcapping", 0.0f, 0, 1e6, where);
  }
  if (c.architecture == "gemma3") c.local_rope_theta = 10000.0f;  // llama.cpp hard-codes the local layers' base (no key)
  if (c.architecture == "gemma2" || c.architecture == "gemma3") {
    // query_pre_attn_scalar is no GGUF key: llama.cpp scales by 1/√head_dim, except for the 27B models
    // (46 and 62 layers), which use 1/√(dim/n_heads).
    const bool is27b = (c.architecture == "gemma2" && c.n_layers == 46) || (c.architecture == "gemma3" && c.n_layers == 62);
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(is27b ? c.dim / c.n_heads : c.head_dim));
  }

  return c;
}

// A tensor by name, its shape checked against the config (rows × cols; cols 0: a vector) and, for F32 ones,
// every value finite (RoPE factors also > 0).
Tensor checked_tensor(const GgufFile& gguf, const std::string& name, std::int64_t rows, std::int64_t cols, bool f32_only,
                      const std::string& arch_name, const std::string& where) {
  const GgufTensorInfo* info = gguf.find(name);
  Tensor t = gguf.tensor(*info);
  const bool matrix = cols > 0;
  bool ok = matrix ? (t.n_dims == 2 && t.shape[0] == rows && t.shape[1] == cols) : (t.n_dims == 1 && t.shape[0] == rows);
  if (!ok) {
    std::string got;
    for (int j = 0; j < t.n_dims; ++j) got += (got.empty() ? "" : "×") + std::to_string(t.shape[j]);
    const std::string want = matrix ? std::to_string(rows) + "×" + std::to_string(cols) : std::to_string(rows);
    throw ModelError(where + "tensor '" + name + "' has shape " + got + " (expected " + want + ", rows × cols, for architecture " +
                     arch_name + ")");
  }
  if (f32_only && t.dtype != DType::F32)
    throw ModelError(where + "tensor '" + name + "' is " + std::string(dtype_name(t.dtype)) + " (expected F32 for a norm weight, bias or factor)");
  if (t.dtype == DType::F32) {
    const auto n = static_cast<std::size_t>(t.numel());
    if (const std::size_t j = kernels::first_nonfinite(t.f32(), n); j < n)
      throw ModelError(where + "tensor '" + name + "' value #" + std::to_string(j) + " is not a finite number");
    // RoPE frequency factors divide each pair's frequency: a zero or negative one gives an infinite or
    // reversed angle (NaN logits at the first step). Named here, as the tensor it is.
    if (name == "rope_freqs.weight")
      for (std::size_t k = 0; k < n; ++k)
        if (!(t.f32()[k] > 0))
          throw ModelError(where + "tensor 'rope_freqs.weight' value #" + std::to_string(k) + " is " + std::to_string(t.f32()[k]) +
                           " (RoPE frequency factors divide a frequency: expected > 0)");
  }
  return t;
}

}  // namespace

void ModelSource::open_gguf() {
  const std::string where = path_.string() + ": ";
  gguf_ = std::make_unique<GgufFile>(path_.string(), file_->data(), file_->size());
  metadata_ = gguf_->metadata();
  const Metadata& m = metadata_;

  const auto arch_name = m.get_string("general.architecture");
  if (!arch_name)
    throw ModelError(where + "metadata has no 'general.architecture' (expected one of: " + supported_architectures() + ")");
  const ArchTable* arch = find_architecture(*arch_name);
  if (!arch)
    throw ModelError(where + "architecture '" + printable_text(*arch_name) + "' is not supported (supported: " + supported_architectures() + ")");
  const std::string a = *arch_name + ".";

  Config& c = config_;
  c = read_config(m, *arch, *arch_name, static_cast<int>(gguf_->version()), where);

  // Tensors: looked up by name (llama-quantize reorders them), shapes checked against the config.
  std::set<std::string> used;
  auto tensor = [&](const std::string& name, std::int64_t rows, std::int64_t cols, bool f32_only) {
    used.insert(name);
    return checked_tensor(*gguf_, name, rows, cols, f32_only, *arch_name, where);
  };
  const GgufTensorInfo* emb = gguf_->find("token_embd.weight");
  if (!emb) throw ModelError(where + "tensor 'token_embd.weight' is missing (required for architecture " + *arch_name + ")");
  if (emb->n_dims != 2 || emb->ne[1] < 1 || emb->ne[1] > (1 << 22))
    throw ModelError(where + "tensor 'token_embd.weight' must be a matrix of vocab_size (1..4194304) rows");
  c.vocab_size = static_cast<int>(emb->ne[1]);

  auto size = [&](Dim d) -> std::int64_t {
    switch (d) {
      case Dim::None: return 0;
      case Dim::Embd: return c.dim;
      case Dim::QDim: return c.q_dim();
      case Dim::KvDim: return c.kv_dim();
      case Dim::Hidden: return c.hidden_dim;
      case Dim::Vocab: return c.vocab_size;
      case Dim::TrainCtx: return c.train_ctx;
      case Dim::HeadDim: return c.head_size();
      case Dim::RotHalf: return c.rot_dims() / 2;
      case Dim::QkvDim: return c.q_dim() + 2 * c.kv_dim();
      case Dim::GateUp: return 2 * static_cast<std::int64_t>(c.hidden_dim);
    }
    return 0;
  };
  Weights& w = weights_;
  w.layers.resize(static_cast<std::size_t>(c.n_layers));
  for (const TensorSlot& slot : arch->tensors) {
    const int copies = slot.layer ? c.n_layers : 1;
    for (int l = 0; l < copies; ++l) {
      const std::string name = slot.layer ? "blk." + std::to_string(l) + "." + slot.name : std::string(slot.name);
      if (!gguf_->find(name)) {
        if (slot.required)
          throw ModelError(where + "tensor '" + name + "' is missing (required for architecture " + *arch_name + ")");
        continue;
      }
      Tensor t = tensor(name, size(slot.rows), size(slot.cols), slot.f32_only);
      if (slot.layer) w.layers[static_cast<std::size_t>(l)].*slot.layer = t;
      else w.*slot.global = t;
    }
  }
  // No output.weight: the embedding predicts (tied output, as llama.cpp does).
  c.shared_classifier = w.wcls.data == nullptr;
  if (c.shared_classifier) w.wcls = w.token_embedding;
  // What the table does not name would be ignored, and the run silently wrong: refuse it.
  for (const auto& info : gguf_->tensors())
    if (!used.count(info.name))
      throw ModelError(where + "tensor '" + printable_text(info.name) + "' is not used by architecture " + *arch_name +
                       " (a file of another architecture, or a variant glassbox does not implement)");
}

}  // namespace glassbox
