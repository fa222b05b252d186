// llama2.c checkpoints: memory-mapping, header validation (legacy and "ak42" v1) and weight views.
#include "glassbox/model.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "glassbox/error.hpp"

namespace glassbox {

MappedFile::MappedFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw ModelError(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ModelError(path.string() + ": not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw ModelError(path.string() + ": cannot map: " + std::strerror(errno));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

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

template <std::size_t N>
ConstTensor<N> view(const float* p, std::array<std::size_t, N> shape) {
  std::size_t count = 1;
  for (auto d : shape) count *= d;
  return xt::adapt(static_cast<const float*>(p), count, xt::no_ownership(), shape);  // by value: the view must not refer to `p`
}

}  // namespace

Checkpoint::Checkpoint(const std::filesystem::path& path)
    : path_(path), file_(std::make_unique<MappedFile>(path)) {
  config_ = read_config(path, file_->data(), file_->size());
  const Config& c = config_;
  const Sizes s = sizes_of(c);
  const auto* base = reinterpret_cast<const float*>(file_->data() + (c.format_version == 0 ? kLegacyHeader : kV1Header));

  // Every weight must be a finite number: a NaN here would silently poison every logit.
  const std::int64_t n = total_floats(s);
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(base[i]))
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

  const std::size_t L = c.n_layers, dim = c.dim, hid = c.hidden_dim, qd = c.n_heads * c.head_size(),
                    kvd = c.kv_dim(), V = c.vocab_size;
  weights_ = std::make_unique<Weights>(Weights{
      view<2>(emb, {V, dim}), view<2>(rms_att, {L, dim}),
      view<3>(wq, {L, qd, dim}), view<3>(wk, {L, kvd, dim}), view<3>(wv, {L, kvd, dim}), view<3>(wo, {L, dim, qd}),
      view<2>(rms_ffn, {L, dim}),
      view<3>(w1, {L, hid, dim}), view<3>(w2, {L, dim, hid}), view<3>(w3, {L, hid, dim}),
      view<1>(rms_final, {dim}), view<2>(wcls, {V, dim})});
}

}  // namespace glassbox
