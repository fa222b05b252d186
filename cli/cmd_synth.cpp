// `glassbox synth`: writes a llama2.c checkpoint of any shape filled with seeded random weights, so
// benchmarks of the stories15M/42M/110M shapes need no download.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "seed_option.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/rng.hpp"

namespace glassbox::cli {

namespace {

struct Shape {
  int dim = 288, hidden_dim = 768, n_layers = 6, n_heads = 6, n_kv_heads = 6, vocab_size = 32000, seq_len = 256;
};

// The shapes of Karpathy's TinyStories checkpoints (llama2.c's README), and TinyLlama 1.1B's
// (its config.json: 22 layers, 32 heads of 64, 4 kv heads, 2,048 positions) for the issue #32 runs.
const std::map<std::string, Shape>& presets() {
  static const std::map<std::string, Shape> p = {
      {"stories15M", {288, 768, 6, 6, 6, 32000, 256}},
      {"stories42M", {512, 1376, 8, 8, 8, 32000, 1024}},
      {"stories110M", {768, 2048, 12, 12, 12, 32000, 1024}},
      {"tinyllama", {2048, 5632, 22, 32, 4, 32000, 2048}},
  };
  return p;
}

// Weights are drawn from PCG32 (rng.hpp) as w = σ·√3·(u1+u2+u3+u4 − 2), u = 24-bit uniforms: an
// Irwin–Hall approximation of N(0, σ²) with tails bounded at ±2√3·σ. It is exact integer
// arithmetic followed by one float multiply, so a seed gives the same bytes on every machine (a
// Box–Muller transform would depend on the libm's log and cos). σ = 1/√(columns) keeps each
// projection's output at the scale of its input; norm weights are 1, as in a freshly
// initialised model. One stream per seed, consumed in file order.
class WeightWriter {
 public:
  WeightWriter(OutputFile& out, std::uint64_t seed) : out_(out), rng_(seed) { buf_.reserve(kChunk); }
  void random(std::int64_t count, std::int64_t cols) {
    const float scale = static_cast<float>(std::sqrt(3.0 / static_cast<double>(cols))) * (1.0f / 16777216.0f);
    for (std::int64_t i = 0; i < count; ++i) {
      std::int32_t s = 0;
      for (int j = 0; j < 4; ++j) s += static_cast<std::int32_t>(rng_.next_u32() >> 8);
      put(static_cast<float>(s - 2 * 16777216) * scale);
    }
  }
  void constant(std::int64_t count, float v) {
    for (std::int64_t i = 0; i < count; ++i) put(v);
  }
  void flush() {
    out_.write({reinterpret_cast<const char*>(buf_.data()), buf_.size() * sizeof(float)});
    buf_.clear();
  }

 private:
  static constexpr std::size_t kChunk = 1 << 16;
  void put(float v) {
    buf_.push_back(v);
    if (buf_.size() == kChunk) flush();
  }
  OutputFile& out_;
  Rng rng_;
  std::vector<float> buf_;
};

// The largest checkpoint synth writes (stories110M is 0.4 GiB, a 7B model in float32 27 GiB).
constexpr unsigned long long kMaxSynthBytes = 32ull << 30;

void write_checkpoint(const std::string& path, const Shape& s, std::uint64_t seed) {
  auto need = [](const char* what, long long v, long long lo, long long hi) {
    if (v < lo || v > hi)
      throw ConfigError("synth: " + std::string(what) + " = " + std::to_string(v) + " (expected " + std::to_string(lo) + ".." +
                        std::to_string(hi) + ")");
  };
  need("--dim", s.dim, 2, 1 << 16);
  need("--hidden-dim", s.hidden_dim, 1, 1 << 18);
  need("--layers", s.n_layers, 1, 1024);
  need("--heads", s.n_heads, 1, s.dim);
  need("--kv-heads", s.n_kv_heads, 1, s.n_heads);
  need("--vocab", s.vocab_size, 1, 1 << 22);
  need("--seq-len", s.seq_len, 1, 1 << 20);
  if (s.dim % s.n_heads != 0 || (s.dim / s.n_heads) % 2 != 0)
    throw ConfigError("synth: --heads " + std::to_string(s.n_heads) + " must divide --dim " + std::to_string(s.dim) +
                      " into heads of even size");
  if (s.n_heads % s.n_kv_heads != 0)
    throw ConfigError("synth: --kv-heads " + std::to_string(s.n_kv_heads) + " must divide --heads " + std::to_string(s.n_heads));
  const std::int64_t hs0 = s.dim / s.n_heads, kvd0 = hs0 * s.n_kv_heads;
  // The file's size, bounded before anything is written (each factor is bounded above, so no overflow).
  const long double floats = static_cast<long double>(s.vocab_size) * s.dim +
                             static_cast<long double>(s.n_layers) * (2.0L * s.dim + 2.0L * s.dim * s.dim + 2.0L * kvd0 * s.dim +
                                                                     3.0L * s.hidden_dim * s.dim) +
                             s.dim + static_cast<long double>(s.seq_len) * hs0;
  const long double bytes = 28 + 4 * floats;
  if (bytes > static_cast<long double>(kMaxSynthBytes))
    throw ConfigError("synth: this shape makes a file of " + std::to_string(static_cast<unsigned long long>(bytes / (1ull << 20))) +
                      " MiB, more than the " + std::to_string(kMaxSynthBytes >> 30) + " GiB synth writes at most");
  // The rule for every output (file_io.hpp): a temporary file renamed into place only when complete,
  // so a full disk or a signal never leaves half a checkpoint, and never over an input, FIFO or device.
  OutputFile out(path);
  // Legacy llama2.c header (7 int32; a positive vocab_size means the classifier shares the
  // embedding), the format llama2.c's run.c and export.py --version 0 use.
  const std::int32_t header[7] = {s.dim, s.hidden_dim, s.n_layers, s.n_heads, s.n_kv_heads, s.vocab_size, s.seq_len};
  out.write({reinterpret_cast<const char*>(header), sizeof header});
  const std::int64_t L = s.n_layers, dim = s.dim, hid = s.hidden_dim, hs = dim / s.n_heads, kvd = hs * s.n_kv_heads;
  WeightWriter w(out, seed);
  w.random(static_cast<std::int64_t>(s.vocab_size) * dim, dim);  // token embedding (= classifier)
  w.constant(L * dim, 1.0f);                                      // rms_att
  w.random(L * dim * dim, dim);                                   // wq
  w.random(L * kvd * dim, dim);                                   // wk
  w.random(L * kvd * dim, dim);                                   // wv
  w.random(L * dim * dim, dim);                                   // wo
  w.constant(L * dim, 1.0f);                                      // rms_ffn
  w.random(L * hid * dim, dim);                                   // w1
  w.random(L * dim * hid, hid);                                   // w2
  w.random(L * hid * dim, dim);                                   // w3
  w.constant(dim, 1.0f);                                          // rms_final
  // freq_cis_real / imag: precomputed RoPE tables every reader recomputes; zeros here.
  w.constant(static_cast<std::int64_t>(s.seq_len) * hs, 0.0f);
  w.flush();
  out.commit();
}

}  // namespace

void add_synth_command(CLI::App& app) {
  struct Opts {
    std::string preset, out;
    Shape shape;
    std::uint64_t seed = 1;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("synth", "write a llama2.c checkpoint of a given shape with seeded random weights");
  std::string names;
  for (const auto& [k, v] : presets()) names += (names.empty() ? "" : ", ") + k;
  cmd->add_option("--preset", o->preset, "a known shape: " + names + " (other options override its fields)");
  cmd->add_option("-o,--out", o->out, "the checkpoint file to write")->required();
  cmd->add_option("--seed", o->seed, "seed of the weights' PCG32 stream (default 1)")->check(seed_range());
  cmd->add_option("--dim", o->shape.dim, "model width (without --preset, every field defaults to stories15M's)");
  cmd->add_option("--hidden-dim", o->shape.hidden_dim, "feed-forward width");
  cmd->add_option("--layers", o->shape.n_layers, "transformer layers");
  cmd->add_option("--heads", o->shape.n_heads, "attention heads");
  cmd->add_option("--kv-heads", o->shape.n_kv_heads, "key/value heads (divides --heads)");
  cmd->add_option("--vocab", o->shape.vocab_size, "vocabulary size (32000 matches llama2.c's tokenizer.bin)");
  cmd->add_option("--seq-len", o->shape.seq_len, "context length");
  cmd->callback([o, cmd] {
    Shape s = o->shape;
    if (o->preset.empty() && cmd->get_option("--preset")->count())
      throw ConfigError("synth: --preset '' names no shape (expected one of " + [] {
        std::string n;
        for (const auto& [k, v] : presets()) n += (n.empty() ? "" : ", ") + k;
        return n;
      }() + ")");
    if (!o->preset.empty()) {
      auto it = presets().find(o->preset);
      if (it == presets().end()) throw ConfigError("synth: unknown --preset " + o->preset);
      // Start from the preset, then apply the fields given explicitly.
      Shape p = it->second;
      auto given = [cmd](const char* opt) { return cmd->get_option(opt)->count() > 0; };
      if (given("--dim")) p.dim = s.dim;
      if (given("--hidden-dim")) p.hidden_dim = s.hidden_dim;
      if (given("--layers")) p.n_layers = s.n_layers;
      if (given("--heads")) p.n_heads = s.n_heads;
      if (given("--kv-heads")) p.n_kv_heads = s.n_kv_heads;
      if (given("--vocab")) p.vocab_size = s.vocab_size;
      if (given("--seq-len")) p.seq_len = s.seq_len;
      s = p;
    }
    write_checkpoint(o->out, s, o->seed);
    std::printf("wrote %s: dim %d, hidden %d, %d layers, %d heads (%d kv), vocab %d, context %d, seed %llu\n", o->out.c_str(),
                s.dim, s.hidden_dim, s.n_layers, s.n_heads, s.n_kv_heads, s.vocab_size, s.seq_len,
                static_cast<unsigned long long>(o->seed));
  });
}

}  // namespace glassbox::cli
