// The GGUF format, architecture `llama`: hyper-parameters from the `llama.*` keys and typed views of
// the `token_embd` / `blk.N.*` / `output*` tensors, each checked for the shape the config implies.
#include <cmath>
#include <string>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/model/model_source.hpp"

namespace glassbox {

namespace {

constexpr const char* kSupportedArchitectures = "llama";

}  // namespace

void ModelSource::open_gguf() {
  const std::string where = path_.string() + ": ";
  gguf_ = std::make_unique<GgufFile>(path_.string(), file_->data(), file_->size());
  metadata_ = gguf_->metadata();
  const Metadata& m = metadata_;

  const auto arch = m.get_string("general.architecture");
  if (!arch) throw ModelError(where + "metadata has no 'general.architecture' (expected one of: " + kSupportedArchitectures + ")");
  if (*arch != "llama")
    throw ModelError(where + "architecture '" + *arch + "' is not supported (supported: " + kSupportedArchitectures + ")");
  const std::string a = *arch + ".";

  auto required = [&](const std::string& key, std::int64_t lo, std::int64_t hi) {
    const auto v = m.get_int(a + key);
    if (!v) throw ModelError(where + "metadata has no '" + a + key + "' (required for architecture " + *arch + ")");
    if (*v < lo || *v > hi)
      throw ModelError(where + "metadata '" + a + key + "' = " + std::to_string(*v) + " (expected " +
                       std::to_string(lo) + ".." + std::to_string(hi) + ")");
    return static_cast<int>(*v);
  };
  Config& c = config_;
  c.architecture = *arch;
  c.format = "gguf";
  c.format_version = static_cast<int>(gguf_->version());
  c.dim = required("embedding_length", 1, 1 << 16);
  c.hidden_dim = required("feed_forward_length", 1, 1 << 18);
  c.n_layers = required("block_count", 1, 1024);
  c.n_heads = required("attention.head_count", 1, c.dim);
  c.n_kv_heads = m.has(a + "attention.head_count_kv") ? required("attention.head_count_kv", 1, c.n_heads) : c.n_heads;
  c.seq_len = required("context_length", 1, 1 << 24);
  if (c.dim % c.n_heads != 0)
    throw ModelError(where + "head_count " + std::to_string(c.n_heads) + " does not divide embedding_length " + std::to_string(c.dim));
  if (c.n_heads % c.n_kv_heads != 0)
    throw ModelError(where + "head_count_kv " + std::to_string(c.n_kv_heads) + " does not divide head_count " + std::to_string(c.n_heads));
  if (c.head_size() % 2 != 0)
    throw ModelError(where + "head size " + std::to_string(c.head_size()) + " is odd (RoPE rotates pairs)");
  // Only full-width rotary embeddings with key/value heads of dim / n_heads are implemented.
  for (const char* key : {"rope.dimension_count", "attention.key_length", "attention.value_length"})
    if (m.has(a + key) && required(key, 1, 1 << 16) != c.head_size())
      throw ModelError(where + "metadata '" + a + key + "' = " + std::to_string(*m.get_int(a + key)) +
                       " but the head size is " + std::to_string(c.head_size()) + " (only equal sizes are supported)");
  if (auto theta = m.get_float(a + "rope.freq_base")) {
    if (!(*theta > 0) || !std::isfinite(*theta)) throw ModelError(where + "metadata '" + a + "rope.freq_base' must be a positive number");
    c.rope_theta = static_cast<float>(*theta);
  }
  if (auto eps = m.get_float(a + "attention.layer_norm_rms_epsilon")) {
    if (!(*eps > 0) || *eps > 1) throw ModelError(where + "metadata '" + a + "attention.layer_norm_rms_epsilon' must be in (0, 1]");
    c.norm_eps = static_cast<float>(*eps);
  }
  if (auto type = m.get_string(a + "rope.scaling.type"); type && *type != "none") {
    if (*type != "linear")
      throw ModelError(where + "rope scaling type '" + *type + "' is not supported (supported: none, linear; Llama 3 "
                       "scaling comes as the rope_freqs.weight tensor)");
    const auto factor = m.get_float(a + "rope.scaling.factor");
    if (!factor || !(*factor > 0)) throw ModelError(where + "linear rope scaling needs a positive '" + a + "rope.scaling.factor'");
    c.rope_scaling = {"linear", static_cast<float>(*factor)};
  }

  // Tensors: looked up by name (llama-quantize reorders them), shapes checked against the config.
  auto tensor = [&](const std::string& name, std::initializer_list<std::int64_t> shape, bool f32_only) {
    const GgufTensorInfo* info = gguf_->find(name);
    if (!info) throw ModelError(where + "tensor '" + name + "' is missing (required for architecture " + *arch + ")");
    Tensor t = gguf_->tensor(*info);
    bool ok = t.n_dims == static_cast<int>(shape.size());
    int i = 0;
    for (auto d : shape) ok = ok && t.shape[i++] == d;
    if (!ok) {
      std::string want, got;
      for (auto d : shape) want += (want.empty() ? "" : "×") + std::to_string(d);
      for (int j = 0; j < t.n_dims; ++j) got += (got.empty() ? "" : "×") + std::to_string(t.shape[j]);
      throw ModelError(where + "tensor '" + name + "' has shape " + got + " (expected " + want + ", rows × cols)");
    }
    if (f32_only && t.dtype != DType::F32)
      throw ModelError(where + "tensor '" + name + "' is " + std::string(dtype_name(t.dtype)) + " (expected F32 for a norm weight)");
    if (t.dtype == DType::F32) {
      const auto n = static_cast<std::size_t>(t.numel());
      if (const std::size_t j = kernels::first_nonfinite(t.f32(), n); j < n)
        throw ModelError(where + "tensor '" + name + "' value #" + std::to_string(j) + " is not a finite number");
    }
    return t;
  };
  const GgufTensorInfo* emb = gguf_->find("token_embd.weight");
  if (!emb) throw ModelError(where + "tensor 'token_embd.weight' is missing (required for architecture " + *arch + ")");
  if (emb->n_dims != 2 || emb->ne[1] < 1 || emb->ne[1] > (1 << 22))
    throw ModelError(where + "tensor 'token_embd.weight' must be a matrix of vocab_size (1..4194304) rows");
  c.vocab_size = static_cast<int>(emb->ne[1]);

  const std::int64_t dim = c.dim, hid = c.hidden_dim, qd = dim, kvd = c.kv_dim(), V = c.vocab_size;
  Weights& w = weights_;
  w.token_embedding = tensor("token_embd.weight", {V, dim}, false);
  w.rms_final = tensor("output_norm.weight", {dim}, true);
  c.shared_classifier = gguf_->find("output.weight") == nullptr;  // tied output: the embedding predicts
  w.wcls = c.shared_classifier ? w.token_embedding : tensor("output.weight", {V, dim}, false);
  if (gguf_->find("rope_freqs.weight")) w.rope_freqs = tensor("rope_freqs.weight", {c.head_size() / 2}, true);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    LayerWeights lw;
    lw.rms_att = tensor(b + "attn_norm.weight", {dim}, true);
    lw.wq = tensor(b + "attn_q.weight", {qd, dim}, false);
    lw.wk = tensor(b + "attn_k.weight", {kvd, dim}, false);
    lw.wv = tensor(b + "attn_v.weight", {kvd, dim}, false);
    lw.wo = tensor(b + "attn_output.weight", {dim, qd}, false);
    lw.rms_ffn = tensor(b + "ffn_norm.weight", {dim}, true);
    lw.w1 = tensor(b + "ffn_gate.weight", {hid, dim}, false);
    lw.w2 = tensor(b + "ffn_down.weight", {dim, hid}, false);
    lw.w3 = tensor(b + "ffn_up.weight", {hid, dim}, false);
    w.layers.push_back(std::move(lw));
  }
}

}  // namespace glassbox
