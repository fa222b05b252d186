// The llama2.c checkpoint format: header validation (legacy and "ak42" v1) and typed views of its
// float32 weights, which every layer stores contiguously, kind by kind.
#include "glassbox/model/model_source.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"

namespace glassbox {

namespace {

constexpr std::uint32_t kMagicV1 = 0x616b3432;  // "ak42"
constexpr std::size_t kLegacyHeader = 7 * sizeof(std::int32_t);
constexpr std::size_t kV1Header = 256;

std::int32_t read_i32(const std::byte* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Number of floats each tensor holds, in file order for either format.
struct Sizes {
  std::int64_t emb, rms, wq, wkv, wo, w13, w2, rms_final, freq, wcls;
};

Sizes sizes_of(const Config& c) {
  const std::int64_t L = c.n_layers, dim = c.dim, hid = c.hidden_dim, hs = c.head_size();
  const std::int64_t qd = static_cast<std::int64_t>(c.n_heads) * hs, kvd = static_cast<std::int64_t>(c.n_kv_heads) * hs;
  return {static_cast<std::int64_t>(c.vocab_size) * dim, L * dim, L * qd * dim, L * kvd * dim, L * dim * qd,
          L * hid * dim, L * dim * hid, dim,
          c.format_version == 0 ? static_cast<std::int64_t>(c.seq_len) * hs / 2 : 0,
          c.shared_classifier ? 0 : static_cast<std::int64_t>(c.vocab_size) * dim};
}

std::int64_t total_floats(const Sizes& s) {
  return s.emb + 2 * s.rms + s.wq + 2 * s.wkv + s.wo + 2 * s.w13 + s.w2 + s.rms_final + 2 * s.freq + s.wcls;
}

}  // namespace

Config read_config(const std::filesystem::path& path, const std::byte* data, std::size_t size) {
  const std::string where = path.string() + ": ";
  if (size < kLegacyHeader)
    throw ModelError(where + "file is " + std::to_string(size) +
                     " bytes; a llama2.c checkpoint starts with a header of at least 28 bytes");
  Config c;
  std::size_t header = kLegacyHeader;
  const std::byte* h = data;
  std::uint32_t magic;
  std::memcpy(&magic, data, sizeof magic);
  if (magic == kMagicV1) {
    if (size < kV1Header) throw ModelError(where + "\"ak42\" checkpoint is shorter than its 256-byte header");
    const std::int32_t version = read_i32(data + 4);
    if (version != 1)
      throw ModelError(where + "\"ak42\" checkpoint version " + std::to_string(version) +
                       " is not supported (expected 1: float32 weights)");
    c.format_version = 1;
    header = kV1Header;
    h = data + 8;
  }
  c.dim = read_i32(h + 0);
  c.hidden_dim = read_i32(h + 4);
  c.n_layers = read_i32(h + 8);
  c.n_heads = read_i32(h + 12);
  c.n_kv_heads = read_i32(h + 16);
  c.vocab_size = read_i32(h + 20);
  c.seq_len = read_i32(h + 24);
  if (c.format_version == 0) {
    // Legacy: a negative vocab_size means the classifier has its own weights.
    c.shared_classifier = c.vocab_size > 0;
    if (c.vocab_size < 0 && c.vocab_size != INT32_MIN) c.vocab_size = -c.vocab_size;
  } else {
    const auto flag = static_cast<std::uint8_t>(h[28]);
    if (flag > 1) throw ModelError(where + "header field shared_classifier = " + std::to_string(flag) + " (expected 0 or 1)");
    c.shared_classifier = flag == 1;
  }

  auto check = [&](const char* field, std::int64_t v, std::int64_t max) {
    if (v <= 0 || v > max)
      throw ModelError(where + "header field " + field + " = " + std::to_string(v) + " (expected 1.." +
                       std::to_string(max) + "); not a llama2.c checkpoint or corrupt");
  };
  check("dim", c.dim, 1 << 16);
  check("hidden_dim", c.hidden_dim, 1 << 18);
  check("n_layers", c.n_layers, 1024);
  check("n_heads", c.n_heads, c.dim);
  check("n_kv_heads", c.n_kv_heads, c.n_heads);
  check("vocab_size", c.vocab_size, 1 << 22);
  check("seq_len", c.seq_len, 1 << 20);
  c.train_ctx = c.seq_len;
  if (c.dim % c.n_heads != 0)
    throw ModelError(where + "n_heads = " + std::to_string(c.n_heads) + " does not divide dim = " + std::to_string(c.dim));
  if (c.n_heads % c.n_kv_heads != 0)
    throw ModelError(where + "n_kv_heads = " + std::to_string(c.n_kv_heads) + " does not divide n_heads = " +
                     std::to_string(c.n_heads));
  if (c.head_size() % 2 != 0)
    throw ModelError(where + "head_size = dim / n_heads = " + std::to_string(c.head_size()) + " is odd (RoPE rotates pairs)");

  const std::int64_t expected = static_cast<std::int64_t>(header) + 4 * total_floats(sizes_of(c));
  if (static_cast<std::int64_t>(size) != expected)
    throw ModelError(where + "file is " + std::to_string(size) + " bytes but its header (dim " + std::to_string(c.dim) +
                     ", hidden_dim " + std::to_string(c.hidden_dim) + ", n_layers " + std::to_string(c.n_layers) +
                     ", n_heads " + std::to_string(c.n_heads) + ", n_kv_heads " + std::to_string(c.n_kv_heads) +
                     ", vocab_size " + std::to_string(c.vocab_size) + ", seq_len " + std::to_string(c.seq_len) +
                     (c.shared_classifier ? ", shared classifier" : ", separate classifier") + ") implies " +
                     std::to_string(expected) + (static_cast<std::int64_t>(size) < expected ? " (truncated?)" : ""));
  return c;
}

namespace {

// A float32 tensor view at `p` with the given row-major shape.
Tensor f32_tensor(std::string name, const float* p, std::initializer_list<std::int64_t> shape) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = DType::F32;
  t.n_dims = static_cast<int>(shape.size());
  int i = 0;
  for (auto d : shape) t.shape[i++] = d;
  t.data = reinterpret_cast<const std::byte*>(p);
  t.bytes = static_cast<std::size_t>(t.numel()) * sizeof(float);
  return t;
}

}  // namespace

Metadata llama2c_metadata(const Config& c, const std::filesystem::path& path) {
  Metadata m;
  m.source = path.string();
  auto u32 = [](std::int64_t v) { return MetaValue{MetaType::U32, MetaType::U8, static_cast<std::uint64_t>(v)}; };
  auto str = [](std::string v) { return MetaValue{MetaType::String, MetaType::U8, std::move(v)}; };
  m.set("general.architecture", str("llama"));
  m.set("glassbox.source_format", str(c.format_version == 0 ? "llama2c legacy" : "llama2c ak42 v1"));
  m.set("llama.context_length", u32(c.seq_len));
  m.set("llama.embedding_length", u32(c.dim));
  m.set("llama.feed_forward_length", u32(c.hidden_dim));
  m.set("llama.block_count", u32(c.n_layers));
  m.set("llama.attention.head_count", u32(c.n_heads));
  m.set("llama.attention.head_count_kv", u32(c.n_kv_heads));
  m.set("llama.rope.dimension_count", u32(c.head_size()));
  m.set("llama.vocab_size", u32(c.vocab_size));
  m.set("llama.attention.layer_norm_rms_epsilon", MetaValue{MetaType::F32, MetaType::U8, static_cast<double>(c.norm_eps)});
  m.set("llama.rope.freq_base", MetaValue{MetaType::F32, MetaType::U8, static_cast<double>(c.rope_theta)});
  return m;
}

void ModelSource::open_llama2c() {
  const auto& path = path_;
  config_ = read_config(path, file_->data(), file_->size());
  const Config& c = config_;
  const Sizes s = sizes_of(c);
  const auto* base = reinterpret_cast<const float*>(file_->data() + (c.format_version == 0 ? kLegacyHeader : kV1Header));

  // Every weight must be a finite number: a NaN here would silently poison every logit.
  const std::int64_t n = total_floats(s);
  if (const std::size_t i = kernels::first_nonfinite(base, static_cast<std::size_t>(n)); i < static_cast<std::size_t>(n))
    throw ModelError(path.string() + ": weight #" + std::to_string(i) + " is not a finite number (corrupt file)");

  // Where each tensor starts, walking the file in its format's order.
  const float* p = base;
  auto take = [&p](std::int64_t count) { const float* at = p; p += count; return at; };
  const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final;
  if (c.format_version == 0) {
    // legacy: embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis (unused), [wcls]
    emb = take(s.emb); rms_att = take(s.rms);
    wq = take(s.wq); wk = take(s.wkv); wv = take(s.wkv); wo = take(s.wo);
    rms_ffn = take(s.rms); w1 = take(s.w13); w2 = take(s.w2); w3 = take(s.w13);
    rms_final = take(s.rms_final);
    take(2 * s.freq);  // precomputed RoPE tables: we compute our own
  } else {
    // v1: norms first, then the embedding, then the matrices kind by kind, [wcls]
    rms_att = take(s.rms); rms_ffn = take(s.rms); rms_final = take(s.rms_final);
    emb = take(s.emb);
    wq = take(s.wq); wk = take(s.wkv); wv = take(s.wkv); wo = take(s.wo);
    w1 = take(s.w13); w2 = take(s.w2); w3 = take(s.w13);
  }
  const float* wcls = c.shared_classifier ? emb : take(s.wcls);

  // Each layer's tensor is a slice of the array that holds that kind for all layers.
  const std::int64_t dim = c.dim, hid = c.hidden_dim, qd = static_cast<std::int64_t>(c.n_heads) * c.head_size(),
                     kvd = c.kv_dim(), V = c.vocab_size;
  Weights& w = weights_;
  w.token_embedding = f32_tensor("token_embedding", emb, {V, dim});
  w.rms_final = f32_tensor("rms_final", rms_final, {dim});
  w.wcls = f32_tensor(c.shared_classifier ? "token_embedding" : "wcls", wcls, {V, dim});
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const std::string at = "layers." + std::to_string(l) + ".";
    LayerWeights lw;
    lw.rms_att = f32_tensor(at + "rms_att", rms_att + l * dim, {dim});
    lw.wq = f32_tensor(at + "wq", wq + l * qd * dim, {qd, dim});
    lw.wk = f32_tensor(at + "wk", wk + l * kvd * dim, {kvd, dim});
    lw.wv = f32_tensor(at + "wv", wv + l * kvd * dim, {kvd, dim});
    lw.wo = f32_tensor(at + "wo", wo + l * dim * qd, {dim, qd});
    lw.rms_ffn = f32_tensor(at + "rms_ffn", rms_ffn + l * dim, {dim});
    lw.w1 = f32_tensor(at + "w1", w1 + l * hid * dim, {hid, dim});
    lw.w2 = f32_tensor(at + "w2", w2 + l * dim * hid, {dim, hid});
    lw.w3 = f32_tensor(at + "w3", w3 + l * hid * dim, {hid, dim});
    w.layers.push_back(std::move(lw));
  }
  metadata_ = llama2c_metadata(c, path);
}

}  // namespace glassbox
