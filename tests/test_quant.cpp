// ggml weight types: fp16/bf16 conversion, quantizers against llama-quantize's files, dequantization
// against the F32 files and hand-built blocks, and each SIMD dot product against its scalar twin.
#define BOOST_TEST_MODULE quant
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "glassbox/error.hpp"
#include "glassbox/model/gguf.hpp"
#include "glassbox/model/model_source.hpp"
#include "glassbox/quant.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace q = glassbox::quant;
using glassbox::DType;

namespace {

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The value of an fp16 bit pattern, from the IEEE definition (independent of the code under test).
double fp16_value(std::uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? INFINITY : std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

// ---- the reference GGUF files, located through TENSORS.txt (gguf-py's listing) ----
struct TensorRec {
  std::string type;
  std::vector<std::size_t> ne;  // ne[0] = row length
  std::size_t file_byte = 0, nbytes = 0;
  std::size_t row_len() const { return ne[0]; }
  std::size_t rows() const {
    std::size_t r = 1;
    for (std::size_t i = 1; i < ne.size(); ++i) r *= ne[i];
    return r;
  }
};

std::map<std::string, TensorRec> tensors_of(const std::string& file) {
  std::ifstream in(gbtest::shared("gguf/TENSORS.txt"));
  static const std::regex re(R"(^\s*tensor\s+(\S+)\s+(\S+)\s+ne=\[([^\]]*)\]\s+offset=\s*\d+\s+\(file byte (\d+)\)\s+nbytes=(\d+))");
  std::map<std::string, TensorRec> out;
  std::string line;
  bool in_file = false;
  while (std::getline(in, line)) {
    if (line.rfind("== ", 0) == 0) {
      in_file = line.rfind("== " + file + " ", 0) == 0;
      continue;
    }
    std::smatch m;
    if (!in_file || !std::regex_search(line, m, re)) continue;
    TensorRec t;
    t.type = m[2];
    std::stringstream ss(m[3].str());
    for (std::string x; std::getline(ss, x, ',');) t.ne.push_back(std::stoull(x));
    t.file_byte = std::stoull(m[4]);
    t.nbytes = std::stoull(m[5]);
    out[m[1]] = t;
  }
  if (out.empty()) {
    // The files added later (the fallback and low-bit types) are not in TENSORS.txt: their tensors
    // are located with glassbox's own GGUF reader (names, types, shapes and offsets only).
    const auto src = glassbox::ModelSource::open(gbtest::shared("gguf/" + file));
    const std::byte* base = src->file().data();
    for (const auto& info : src->gguf()->tensors()) {
      TensorRec t;
      t.type = std::string(glassbox::dtype_name(info.dtype));
      for (int d = 0; d < info.n_dims; ++d) t.ne.push_back(static_cast<std::size_t>(info.ne[d]));
      t.file_byte = static_cast<std::size_t>(src->gguf()->tensor(info).data - base);
      t.nbytes = info.bytes;
      out[info.name] = t;
    }
  }
  BOOST_TEST_REQUIRE(!out.empty(), "no tensors listed for " << file);
  return out;
}

struct GgufFile {
  std::map<std::string, TensorRec> tensors;
  std::string bytes;
  explicit GgufFile(const std::string& name) : tensors(tensors_of(name)), bytes(gbtest::read_file(gbtest::shared("gguf/" + name))) {}
  const char* data(const TensorRec& t) const {
    BOOST_TEST_REQUIRE(t.file_byte + t.nbytes <= bytes.size());
    return bytes.data() + t.file_byte;
  }
  std::vector<float> f32(const std::string& name) const {
    const auto& t = tensors.at(name);
    BOOST_TEST_REQUIRE(t.type == "F32");
    std::vector<float> v(t.nbytes / 4);
    std::memcpy(v.data(), data(t), t.nbytes);
    return v;
  }
};

DType dtype_of(const std::string& s) {
  static const std::map<std::string, DType> m = {{"F32", DType::F32},   {"F16", DType::F16},   {"BF16", DType::BF16},
                                                 {"Q8_0", DType::Q8_0}, {"Q4_0", DType::Q4_0}, {"Q4_K", DType::Q4_K},
                                                 {"Q5_K", DType::Q5_K}, {"Q6_K", DType::Q6_K}, {"Q4_1", DType::Q4_1},
                                                 {"Q5_0", DType::Q5_0}, {"Q5_1", DType::Q5_1}, {"IQ4_NL", DType::IQ4_NL},
                                                 {"Q2_K", DType::Q2_K}, {"Q3_K", DType::Q3_K}};
  return m.at(s);
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) std::uint16_t hw_fp32_to_fp16(float f) { return _cvtss_sh(f, 0); }
#endif

}  // namespace

// ================================ fp16 / bf16 ================================

BOOST_AUTO_TEST_CASE(fp16_widening_is_exact_and_round_trips_for_all_65536_values) {
  int nan = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = q::fp16_to_fp32(static_cast<std::uint16_t>(h));
    if (((h >> 10) & 31) == 31 && (h & 1023)) {  // NaN: stays NaN, sign kept
      ++nan;
      BOOST_TEST(std::isnan(f));
      BOOST_TEST((q::fp32_to_fp16(f) & 0x7E00) == 0x7E00);
      BOOST_TEST((q::fp32_to_fp16(f) & 0x8000) == (h & 0x8000));
      continue;
    }
    if (static_cast<double>(f) != fp16_value(static_cast<std::uint16_t>(h)) || std::signbit(f) != bool(h & 0x8000))
      BOOST_ERROR("fp16 " << std::hex << h << " widened to " << f);
    if (q::fp32_to_fp16(f) != h) BOOST_ERROR("fp16 " << std::hex << h << " round-trips to " << q::fp32_to_fp16(f));
  }
  BOOST_TEST(nan == 2 * 1023);
}

BOOST_AUTO_TEST_CASE(fp16_narrowing_rounds_to_nearest_even_at_every_midpoint) {
  // Between consecutive fp16 values a < b (both signs, subnormals included): the exact midpoint
  // goes to the one with an even bit pattern, and one f32 ulp either side goes to the nearer one.
  for (std::uint32_t h = 0; h < 0x7BFF; ++h)
    for (std::uint32_t sign : {0u, 0x8000u}) {
      const std::uint16_t a = static_cast<std::uint16_t>(h | sign), b = static_cast<std::uint16_t>((h + 1) | sign);
      const float mid = static_cast<float>((fp16_value(a) + fp16_value(b)) / 2);  // 12 significant bits: exact
      const std::uint16_t even = (h & 1) ? b : a;
      if (q::fp32_to_fp16(mid) != even) BOOST_ERROR("midpoint above " << std::hex << a << " gave " << q::fp32_to_fp16(mid));
      if (q::fp32_to_fp16(std::nextafter(mid, 0.0f)) != a) BOOST_ERROR("just below midpoint above " << std::hex << a);
      if (q::fp32_to_fp16(std::nextafter(mid, sign ? -1e9f : 1e9f)) != b) BOOST_ERROR("just above midpoint above " << std::hex << a);
    }
  BOOST_TEST(q::fp32_to_fp16(65504.0f) == 0x7BFF);
  BOOST_TEST(q::fp32_to_fp16(std::nextafter(65520.0f, 0.0f)) == 0x7BFF);
  BOOST_TEST(q::fp32_to_fp16(65520.0f) == 0x7C00);  // the tie above the largest finite goes to inf (even)
  BOOST_TEST(q::fp32_to_fp16(-1e10f) == 0xFC00);
  BOOST_TEST(q::fp32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);  // half the smallest subnormal: tie → 0
  BOOST_TEST(q::fp32_to_fp16(std::ldexp(1.5f, -25)) == 0x0001);
  BOOST_TEST(q::fp32_to_fp16(std::ldexp(1.0f, -30)) == 0x0000);
  BOOST_TEST(q::fp32_to_fp16(1.0f) == 0x3C00);
  BOOST_TEST(q::fp32_to_fp16(-2.0f) == 0xC000);
  BOOST_TEST(q::fp32_to_fp16(0.1f) == 0x2E66);
  BOOST_TEST(q::fp32_to_fp16(-0.0f) == 0x8000);
  BOOST_TEST(q::fp32_to_fp16(INFINITY) == 0x7C00);
}

BOOST_AUTO_TEST_CASE(fp16_narrowing_matches_the_f16c_instruction) {
#if defined(__x86_64__)
  // cpuid rather than __builtin_cpu_supports("f16c"), which clang 14 (the sanitizer build) does not know.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_F16C)) {
    BOOST_TEST_MESSAGE("no F16C on this CPU; skipped");
    return;
  }
  // Every 97th f32 bit pattern (44M values, all exponents), NaNs excluded (payloads differ).
  std::size_t checked = 0;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += 97) {
    const float f = from_bits(static_cast<std::uint32_t>(u));
    if (std::isnan(f)) continue;
    ++checked;
    if (q::fp32_to_fp16(f) != hw_fp32_to_fp16(f)) {
      BOOST_ERROR("f32 " << std::hex << u << ": " << q::fp32_to_fp16(f) << " vs F16C " << hw_fp32_to_fp16(f));
      break;
    }
  }
  BOOST_TEST(checked > 40000000u);
#else
  BOOST_TEST_MESSAGE("not x86-64; skipped");
#endif
}

BOOST_AUTO_TEST_CASE(bf16_conversions) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = q::bf16_to_fp32(static_cast<std::uint16_t>(h));
    BOOST_TEST_REQUIRE(bits(f) == h << 16);
    if (!std::isnan(f)) BOOST_TEST_REQUIRE(q::fp32_to_bf16(f) == h);
  }
  const float ulp_half = std::ldexp(1.0f, -8);  // bf16 has 7 mantissa bits: ulp(1) = 2^-7
  BOOST_TEST(q::fp32_to_bf16(1.0f + ulp_half) == 0x3F80);      // tie → even (down)
  BOOST_TEST(q::fp32_to_bf16(1.0f + 3 * ulp_half) == 0x3F82);  // tie → even (up)
  BOOST_TEST(q::fp32_to_bf16(std::nextafter(1.0f + ulp_half, 2.0f)) == 0x3F81);
  BOOST_TEST(q::fp32_to_bf16(from_bits(0x7F800001u)) == 0x7FC0);  // signalling NaN comes back quiet
  BOOST_TEST(q::fp32_to_bf16(from_bits(0x00000001u)) == 0x0000);  // subnormals round, not flushed...
  BOOST_TEST(q::fp32_to_bf16(from_bits(0x00018000u)) == 0x0002);  // ...0x1.8 units → tie → 2 (even)
  BOOST_TEST(q::fp32_to_bf16(from_bits(0x7F7FFFFFu)) == 0x7F80);  // FLT_MAX rounds up to inf
}

// ============================ activation quantizers ============================

BOOST_AUTO_TEST_CASE(q8_0_activation_rounds_half_to_even_weight_file_rounds_away) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // amax = 127: d = 1, id = 1, so q = round(x)
  x[1] = 2.5f, x[2] = 3.5f, x[3] = -2.5f, x[4] = 0.5f, x[5] = -127.0f, x[6] = 1.49f;
  q::block_q8_0 act{}, ref{};
  q::quantize_activation(DType::Q8_0, x.data(), &act, 32);
  q::quantize_row(DType::Q8_0, x.data(), &ref, 32);
  BOOST_TEST(act.d == 0x3C00);
  BOOST_TEST(ref.d == 0x3C00);
  const int want_act[7] = {127, 2, 4, -2, 0, -127, 1};
  const int want_ref[7] = {127, 3, 4, -3, 1, -127, 1};
  for (int j = 0; j < 7; ++j) {
    BOOST_TEST(act.qs[j] == want_act[j], "activation q[" << j << "]");
    BOOST_TEST(ref.qs[j] == want_ref[j], "weight-file q[" << j << "]");
  }
  // ggml's SIMD path multiplies by 127/amax, not by 1/d = 1/(amax/127); for amax = 0.3f the two
  // differ in the last bit, which moves these values across rounding boundaries: x·127/amax is
  // exactly 0.5, 1.49999988 and 2.5 (→ 0, 1, 2), where x·(1/d) would give 1, 2, 3.
  std::vector<float> y(32, 0.0f);
  y[0] = 0x1.333334p-2f, y[1] = 0x1.359e72p-10f, y[2] = 0x1.d06da8p-9f, y[3] = 0x1.83060ep-8f;
  q::block_q8_0 act3{};
  q::quantize_activation(DType::Q8_0, y.data(), &act3, 32);
  BOOST_TEST(act3.qs[0] == 127);
  BOOST_TEST(act3.qs[1] == 0);
  BOOST_TEST(act3.qs[2] == 1);
  BOOST_TEST(act3.qs[3] == 2);
  std::vector<float> zero(64, 0.0f);
  q::block_q8_0 z[2];
  std::memset(z, 0x55, sizeof z);
  q::quantize_activation(DType::Q8_0, zero.data(), z, 64);
  for (const auto& b : z) {
    BOOST_TEST(b.d == 0);
    for (auto v : b.qs) BOOST_TEST(v == 0);
  }
}

BOOST_AUTO_TEST_CASE(q8_k_activation_hand_checked) {
  // Negative extreme: m = −127 → iscale = 1, d = 1; ties go to even.
  std::vector<float> x(512, 0.0f);
  x[0] = 2.5f, x[1] = 3.5f, x[2] = -2.5f, x[3] = 0.5f, x[4] = 1.5f, x[5] = -127.0f, x[6] = 126.6f;
  x[16] = 10.0f, x[17] = 20.0f;
  // Second block: positive extreme +4 at index 3 and a tie |−4| later: the first one wins, so
  // iscale = −127/4 and the −4 maps to +127 (not clipped further).
  float* b = x.data() + 256;
  b[0] = 1.0f, b[3] = 4.0f, b[9] = -4.0f, b[10] = 2.0f;
  std::vector<q::block_q8_K> y(2);
  q::quantize_activation(DType::Q8_K, x.data(), y.data(), 512);
  BOOST_TEST(y[0].d == 1.0f);
  const int want[7] = {2, 4, -2, 0, 2, -127, 127};
  for (int j = 0; j < 7; ++j) BOOST_TEST(y[0].qs[j] == want[j], "q[" << j << "]");
  BOOST_TEST(y[0].bsums[0] == 2 + 4 - 2 + 0 + 2 - 127 + 127);
  BOOST_TEST(y[0].bsums[1] == 30);
  for (int j = 2; j < 16; ++j) BOOST_TEST(y[0].bsums[j] == 0);
  BOOST_TEST(y[1].d == 1.0f / (-127.0f / 4.0f));
  BOOST_TEST(y[1].qs[3] == -127);
  BOOST_TEST(y[1].qs[9] == 127);
  BOOST_TEST(y[1].qs[0] == -32);  // 1·(−127/4) = −31.75
  BOOST_TEST(y[1].qs[10] == -64);  // −63.5: tie → even −64
  // All-zero block: d = 0 and every q and bsum 0.
  std::vector<float> zero(256, 0.0f);
  q::block_q8_K z;
  std::memset(&z, 0x55, sizeof z);
  q::quantize_activation(DType::Q8_K, zero.data(), &z, 256);
  BOOST_TEST(z.d == 0.0f);
  for (auto v : z.qs) BOOST_TEST_REQUIRE(v == 0);
  for (auto v : z.bsums) BOOST_TEST_REQUIRE(v == 0);
}

BOOST_AUTO_TEST_CASE(vec_dot_types) {
  BOOST_TEST((q::vec_dot_type(DType::F32) == DType::F32));
  BOOST_TEST((q::vec_dot_type(DType::F16) == DType::F16));
  BOOST_TEST((q::vec_dot_type(DType::BF16) == DType::BF16));
  BOOST_TEST((q::vec_dot_type(DType::Q8_0) == DType::Q8_0));
  BOOST_TEST((q::vec_dot_type(DType::Q4_0) == DType::Q8_0));
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) BOOST_TEST((q::vec_dot_type(t) == DType::Q8_K));
}

BOOST_AUTO_TEST_CASE(bad_lengths_and_types_throw) {
  std::vector<float> x(64, 1.0f);
  std::vector<char> buf(1024);
  BOOST_CHECK_THROW(q::quantize_row(DType::Q8_0, x.data(), buf.data(), 33), glassbox::ModelError);
  BOOST_CHECK_THROW(q::dequantize_row(DType::Q4_K, buf.data(), x.data(), 32), glassbox::ModelError);
  BOOST_CHECK_THROW(q::vec_dot(DType::Q4_0, 48, buf.data(), buf.data()), glassbox::ModelError);
  BOOST_CHECK_THROW(q::quantize_row(DType::Q6_K, x.data(), buf.data(), 64), glassbox::ModelError);     // not a multiple of 256
  BOOST_CHECK_THROW(q::quantize_activation(DType::Q4_0, x.data(), buf.data(), 32), glassbox::ConfigError);
  BOOST_CHECK_THROW(q::vec_dot_type(DType::Q8_K), glassbox::ConfigError);
}

// ========================== weight-file quantizers vs llama-quantize ==========================

BOOST_AUTO_TEST_SUITE(reference_files, *boost::unit_test::precondition(gbtest::NeedsShared()))

// Every tensor of <model>-<type>.gguf (made by llama-quantize) is re-made from <model>-f32.gguf with
// quantize_row in the type the file holds (Q4_0's output.weight is Q8_0, the k-quant mixes' attn_v and
// ffn_down Q6_K, synth128's Q4_K_M/Q5_K_M fall back to Q5_0/Q5_1 and Q8_0; the norms are F32) and
// compared byte for byte. This covers every weight-file quantizer glassbox has.
BOOST_DATA_TEST_CASE(quantize_row_reproduces_llama_quantize,
                     bdata::make({"synth128-f16", "synth128-q8_0", "synth128-q4_0", "synth128-q4_1", "synth128-q4_k_m",
                                  "synth128-q5_k_m", "synth256-q8_0", "synth256-q6_k", "synth256-q5_k_m", "synth256-q4_k_m",
                                  "synth256-q3_k_m", "synth256-q2_k", "synth256-iq4_nl"}),
                     kind) {
  const std::string ref(kind);
  const GgufFile f32(ref.substr(0, ref.find('-')) + "-f32.gguf"), qf(ref + ".gguf");
  BOOST_TEST(qf.tensors.size() == f32.tensors.size());
  std::size_t checked_bytes = 0;
  for (const auto& [name, t] : qf.tensors) {
    const DType type = dtype_of(t.type);
    const auto src = f32.f32(name);
    std::string out(t.nbytes, '\0');
    const std::size_t rb = glassbox::row_bytes(type, t.row_len());
    BOOST_TEST_REQUIRE(rb * t.rows() == t.nbytes);
    for (std::size_t r = 0; r < t.rows(); ++r) q::quantize_row(type, src.data() + r * t.row_len(), out.data() + r * rb, t.row_len());
    const char* want = qf.data(t);
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < t.nbytes; ++i)
      if (out[i] != want[i] && bad++ == 0) first = i;
    BOOST_TEST(bad == 0u, name << " (" << t.type << "): " << bad << " bytes differ, first at " << first);
    checked_bytes += t.nbytes;
  }
  BOOST_TEST_MESSAGE(kind << ": " << checked_bytes << " bytes identical");
}

// ================================ dequantization ================================

// Each quantized tensor, dequantized, against the F32 original: per block, the error must stay
// within what the type's step allows. Bounds (per block, relative to the block's max |w|):
//   Q8_0 ½·d (+fp16 rounding of d: 127·2^−11·d) ≤ 0.6·d;  Q4_0 clipping of +amax costs up to |d|;
//   k-quants: llama-quantize's fitted scales/mins are not nearest-step, so the bounds are loose:
//   about 1.4× the worst measured here (Q6_K 0.016, Q5_K 0.052, Q4_K 0.084 of max|w|); a wrong
//   scale, min or bit layout gives errors of the order of max|w| itself.
BOOST_DATA_TEST_CASE(dequantize_row_is_within_the_quantization_step,
                     bdata::make({"synth256-q8_0", "synth256-q6_k", "synth256-q5_k_m", "synth256-q4_k_m", "synth128-q4_0",
                                  "synth128-q8_0", "synth128-f16", "synth128-q4_1", "synth128-q4_k_m", "synth128-q5_k_m",
                                  "synth256-q2_k", "synth256-q3_k_m", "synth256-iq4_nl"}),
                     kind) {
  const std::string file = kind;
  const GgufFile f32(file.substr(0, file.find('-')) + "-f32.gguf"), qf(file + ".gguf");
  // The fallback and low-bit types: Q4_1/Q5_1 round to the nearest of 15/31 steps between min and
  // max, so ½ step ≤ 2·max|w|/30 (0.067) and 2·max|w|/62 (0.033), measured 0.067 and 0.033; Q5_0
  // clips like Q4_0, up to one step d = max|w|/16 (measured 0.0625). IQ4_NL, Q3_K, Q2_K have
  // fitted scales, so as for the k-quants about 1.4× the worst measured (0.12, 0.21, 0.36).
  const std::map<std::string, double> bound = {{"F16", 1.0 / 2048}, {"Q6_K", 0.025}, {"Q5_K", 0.075}, {"Q4_K", 0.12},
                                               {"Q4_1", 0.07},  {"Q5_0", 1.01 / 16}, {"Q5_1", 0.035},
                                               {"IQ4_NL", 0.17}, {"Q3_K", 0.30},     {"Q2_K", 0.51}};
  for (const auto& [name, t] : qf.tensors) {
    if (t.type == "F32") continue;
    const DType type = dtype_of(t.type);
    const auto want = f32.f32(name);
    std::vector<float> got(want.size());
    const std::size_t rb = glassbox::row_bytes(type, t.row_len());
    for (std::size_t r = 0; r < t.rows(); ++r)
      q::dequantize_row(type, qf.data(t) + r * rb, got.data() + r * t.row_len(), t.row_len());
    const std::size_t bv = glassbox::dtype_info(type).block_values == 1 ? 32 : glassbox::dtype_info(type).block_values;
    double worst = 0;  // worst error / allowed, over blocks
    for (std::size_t b0 = 0; b0 < want.size(); b0 += bv) {
      double amax = 0, err = 0;
      for (std::size_t j = b0; j < b0 + bv; ++j) {
        amax = std::max(amax, std::fabs(double(want[j])));
        err = std::max(err, std::fabs(double(got[j]) - want[j]));
      }
      double allowed;
      if (t.type == "Q8_0") allowed = 0.6 * amax / 127;
      else if (t.type == "Q4_0") allowed = 1.01 * amax / 8;
      else allowed = bound.at(t.type) * amax;
      worst = std::max(worst, err / std::max(allowed, 1e-30));
    }
    BOOST_TEST(worst <= 1.0, name << " (" << t.type << "): worst block error is " << worst << " of its bound");
    BOOST_TEST_MESSAGE(file << " " << name << " " << t.type << ": worst block error " << worst << " of bound");
  }
}

BOOST_AUTO_TEST_SUITE_END()

namespace {
// Packs 8 six-bit scales and mins the way block_q4_K/q5_K store them (ggml-common.h's layout):
// bytes 0-3 low 6 bits = sc[0..3], bytes 4-7 = m[0..3]; bytes 8-11 = sc[4..7] & 15 | (m[4..7] & 15) << 4;
// and the top 2 bits of sc[4..7] / m[4..7] in the top 2 bits of bytes 0-3 / 4-7.
void pack_scales(const int sc[8], const int m[8], std::uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<std::uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<std::uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}
}  // namespace

BOOST_AUTO_TEST_CASE(planted_blocks_dequantize_to_known_values) {
  std::vector<float> y(256);
  // Q8_0 and Q4_0: d = 0.5.
  q::block_q8_0 b8{};
  b8.d = 0x3800;
  for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<std::int8_t>(j * 8 - 128);
  q::dequantize_row(DType::Q8_0, &b8, y.data(), 32);
  for (int j = 0; j < 32; ++j) BOOST_TEST(y[j] == 0.5f * (j * 8 - 128));
  q::block_q4_0 b4{};
  b4.d = 0x3800;
  for (int j = 0; j < 16; ++j) b4.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));  // value j: j, value j+16: 15−j
  q::dequantize_row(DType::Q4_0, &b4, y.data(), 32);
  for (int j = 0; j < 16; ++j) {
    BOOST_TEST(y[j] == 0.5f * (j - 8));
    BOOST_TEST(y[j + 16] == 0.5f * (7 - j));
  }

  // Q4_K / Q5_K: d = 0.5, dmin = 0.25; value v of sub-block s = 0.5·sc[s]·q − 0.25·m[s].
  const int sc[8] = {1, 2, 3, 63, 5, 33, 7, 60}, mn[8] = {0, 1, 62, 3, 40, 5, 6, 63};
  auto quant = [](int v) { return (v * 7 + v / 16) % 32; };  // 0..31, varied within every sub-block
  q::block_q4_K k4{};
  q::block_q5_K k5{};
  k4.d = k5.d = 0x3800;
  k4.dmin = k5.dmin = 0x3400;
  pack_scales(sc, mn, k4.scales);
  pack_scales(sc, mn, k5.scales);
  for (int v = 0; v < 256; ++v) {
    const int s = v / 32, l = v % 32, qv = quant(v);
    const int byte = 32 * (s / 2) + l;  // sub-blocks 2g and 2g+1 share bytes 32g..32g+31
    k4.qs[byte] |= static_cast<std::uint8_t>((qv & 15) << (s % 2 ? 4 : 0));
    k5.qs[byte] |= static_cast<std::uint8_t>((qv & 15) << (s % 2 ? 4 : 0));
    k5.qh[l] |= static_cast<std::uint8_t>((qv >> 4) << s);  // bit s of qh[l]: the fifth bit
  }
  q::dequantize_row(DType::Q4_K, &k4, y.data(), 256);
  for (int v = 0; v < 256; ++v) BOOST_TEST(y[v] == 0.5f * sc[v / 32] * (quant(v) & 15) - 0.25f * mn[v / 32], "Q4_K value " << v);
  q::dequantize_row(DType::Q5_K, &k5, y.data(), 256);
  for (int v = 0; v < 256; ++v) BOOST_TEST(y[v] == 0.5f * sc[v / 32] * quant(v) - 0.25f * mn[v / 32], "Q5_K value " << v);

  // Q6_K: d = 0.125, 16 signed scales, value = 0.125·scale[v/16]·(q − 32), q 6 bits.
  q::block_q6_K k6{};
  k6.d = 0x3000;
  for (int s = 0; s < 16; ++s) k6.scales[s] = static_cast<std::int8_t>(s * 17 - 128);
  auto q6 = [](int v) { return (v * 13 + v / 64) % 64; };
  for (int v = 0; v < 256; ++v) {
    const int half = v / 128, r = v % 128, k = r / 32, l = r % 32, qv = q6(v);
    // Row k of a half: low nibble of ql[l] (k=0), of ql[l+32] (k=1), high nibbles for k=2,3; bits 2k..2k+1 of qh[l].
    k6.ql[64 * half + l + 32 * (k & 1)] |= static_cast<std::uint8_t>((qv & 15) << (k >= 2 ? 4 : 0));
    k6.qh[32 * half + l] |= static_cast<std::uint8_t>((qv >> 4) << (2 * k));
  }
  q::dequantize_row(DType::Q6_K, &k6, y.data(), 256);
  for (int v = 0; v < 256; ++v) BOOST_TEST(y[v] == 0.125f * k6.scales[v / 16] * (q6(v) - 32), "Q6_K value " << v);
}

// The fallback and low-bit types, planted from the layouts of ggml-common.h (written out here, not
// taken from the code under test).
BOOST_AUTO_TEST_CASE(planted_fallback_and_low_bit_blocks_dequantize_to_known_values) {
  std::vector<float> y(256);
  auto q5 = [](int j) { return (j * 7 + 3) % 32; };
  // Q4_1: d = 0.5, m = −1: value = 0.5·q − 1.
  q::block_q4_1 b41{};
  b41.d = 0x3800;
  b41.m = 0xBC00;
  for (int j = 0; j < 16; ++j) b41.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  q::dequantize_row(DType::Q4_1, &b41, y.data(), 32);
  for (int j = 0; j < 16; ++j) {
    BOOST_TEST(y[j] == 0.5f * j - 1.0f);
    BOOST_TEST(y[j + 16] == 0.5f * (15 - j) - 1.0f);
  }
  // Q5_0 / Q5_1: the fifth bit of value j is bit j of the little-endian qh word.
  q::block_q5_0 b50{};
  q::block_q5_1 b51{};
  b50.d = b51.d = 0x3800;
  b51.m = 0x3400;  // 0.25
  std::uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) {
    const int nib = q5(j) & 15;
    b50.qs[j % 16] |= static_cast<std::uint8_t>(nib << (j < 16 ? 0 : 4));
    qh |= static_cast<std::uint32_t>(q5(j) >> 4) << j;
  }
  std::memcpy(b50.qh, &qh, 4);
  std::memcpy(b51.qh, &qh, 4);
  std::memcpy(b51.qs, b50.qs, 16);
  q::dequantize_row(DType::Q5_0, &b50, y.data(), 32);
  for (int j = 0; j < 32; ++j) BOOST_TEST(y[j] == 0.5f * (q5(j) - 16), "Q5_0 value " << j);
  q::dequantize_row(DType::Q5_1, &b51, y.data(), 32);
  for (int j = 0; j < 32; ++j) BOOST_TEST(y[j] == 0.5f * q5(j) + 0.25f, "Q5_1 value " << j);
  // IQ4_NL: an index into ggml's 16-level table.
  const int table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  q::block_iq4_nl bnl{};
  bnl.d = 0x3800;
  for (int j = 0; j < 16; ++j) bnl.qs[j] = static_cast<std::uint8_t>(((j * 5) % 16) | (((j * 3 + 1) % 16) << 4));
  q::dequantize_row(DType::IQ4_NL, &bnl, y.data(), 32);
  for (int j = 0; j < 16; ++j) {
    BOOST_TEST(y[j] == 0.5f * table[(j * 5) % 16]);
    BOOST_TEST(y[j + 16] == 0.5f * table[(j * 3 + 1) % 16]);
  }

  // Q2_K: d = 0.5, dmin = 0.25, scales[s] = sc | m << 4; value v (l + 32k of half h) is bits 2k..2k+1 of qs[32h + l].
  auto sc2 = [](int s) { return (s * 3) % 16; };
  auto mn2 = [](int s) { return (s * 5 + 1) % 16; };
  auto q2 = [](int v) { return (v * 7 + v / 32) % 4; };
  q::block_q2_K k2{};
  k2.d = 0x3800;
  k2.dmin = 0x3400;
  for (int s = 0; s < 16; ++s) k2.scales[s] = static_cast<std::uint8_t>(sc2(s) | (mn2(s) << 4));
  for (int v = 0; v < 256; ++v) k2.qs[32 * (v / 128) + v % 32] |= static_cast<std::uint8_t>(q2(v) << (2 * (v % 128 / 32)));
  q::dequantize_row(DType::Q2_K, &k2, y.data(), 256);
  for (int v = 0; v < 256; ++v) BOOST_TEST(y[v] == 0.5f * sc2(v / 16) * q2(v) - 0.25f * mn2(v / 16), "Q2_K value " << v);

  // Q3_K: d = 0.125, 6-bit scales biased by 32: low 4 bits in byte s mod 8 (low nibble for s < 8),
  // high 2 bits at bits 2·(s/4) of byte 8 + s mod 4. q = low 2 bits (as Q2_K) − 4 unless bit v/32 of hmask[v mod 32].
  auto sc3 = [](int s) { return (s * 11 + 5) % 64; };
  auto q3 = [](int v) { return (v * 5 + v / 64) % 8 - 4; };  // −4..3
  q::block_q3_K k3{};
  k3.d = 0x3000;
  for (int s = 0; s < 16; ++s) {
    k3.scales[s % 8] |= static_cast<std::uint8_t>((sc3(s) & 15) << (s < 8 ? 0 : 4));
    k3.scales[8 + s % 4] |= static_cast<std::uint8_t>((sc3(s) >> 4) << (2 * (s / 4)));
  }
  for (int v = 0; v < 256; ++v) {
    const int qv = q3(v), low = qv >= 0 ? qv : qv + 4;
    k3.qs[32 * (v / 128) + v % 32] |= static_cast<std::uint8_t>(low << (2 * (v % 128 / 32)));
    if (qv >= 0) k3.hmask[v % 32] |= static_cast<std::uint8_t>(1 << (v / 32));
  }
  q::dequantize_row(DType::Q3_K, &k3, y.data(), 256);
  for (int v = 0; v < 256; ++v) BOOST_TEST(y[v] == 0.125f * (sc3(v / 16) - 32) * q3(v), "Q3_K value " << v);
}

// Q8_1 is Q8_0's rounding plus s = fp16(d·Σq), the sum of the rounded bytes.
BOOST_AUTO_TEST_CASE(q8_1_activation_is_q8_0_plus_the_block_sum) {
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> x(128);
  for (auto& v : x) v = nd(g);
  std::vector<q::block_q8_0> a(4);
  std::vector<q::block_q8_1> b(4);
  q::quantize_activation(DType::Q8_0, x.data(), a.data(), 128);
  q::quantize_activation(DType::Q8_1, x.data(), b.data(), 128);
  for (int i = 0; i < 4; ++i) {
    BOOST_TEST(a[i].d == b[i].d);
    BOOST_TEST(std::memcmp(a[i].qs, b[i].qs, 32) == 0);
    int sum = 0;
    float amax = 0;
    for (int j = 0; j < 32; ++j) {
      sum += b[i].qs[j];
      amax = std::max(amax, std::fabs(x[32 * i + j]));
    }
    BOOST_TEST(b[i].s == q::fp32_to_fp16(amax / 127.0f * static_cast<float>(sum)), "block " << i);
  }
}

// ============================ weight-file quantizers on their own ============================

// Each quantizer that writes a weight type (besides Q8_0/Q4_0, covered above), on rows made here:
// (a) random rows (normal, a heavy-tailed mix, an offset one) dequantize back to within a fraction of
//     each block's max |x|. Worst seen over these rows: Q2_K 0.356, Q3_K 0.165, Q4_K 0.071, Q5_K 0.039,
//     Q6_K 0.016, Q4_1 0.066, Q5_1 0.033, IQ4_NL 0.103; the bounds are about 1.3–1.5× that, far below the ~1 a wrong
//     scale or bit layout gives. Q5_0 is bounded by its design instead: the signed extreme maps to −16,
//     so a value of the opposite sign as large can only reach +15 and loses one step, amax/16 = 0.0625
//     (0.0619 seen; ±1 alternating hits it exactly), plus the fp16 rounding of d;
// (b) degenerate rows give finite values: all zero (exactly zero back), constants, values near fp16's
//     largest (±60000) and far below its smallest (1e-30), one spike among zeros, alternating signs.
double writer_bound(DType t) {
  switch (t) {
    case DType::Q2_K: return 0.45;
    case DType::Q3_K: return 0.25;
    case DType::Q4_K: return 0.1;
    case DType::Q5_K: return 0.055;
    case DType::Q6_K: return 0.022;
    case DType::Q4_1: return 0.09;
    case DType::Q5_0: return 0.0625 * (1 + 1.0 / 1024) + 1e-6;
    case DType::IQ4_NL: return 0.15;
    default: return 0.045;  // Q5_1
  }
}

// Worst |dequant − x| per block, relative to the block's max |x| (0 for an all-zero block).
double worst_relative_error(DType t, const std::vector<float>& x) {
  const std::size_t n = x.size(), bv = glassbox::dtype_info(t).block_values;
  std::vector<char> w(glassbox::row_bytes(t, n));
  std::vector<float> y(n);
  q::quantize_row(t, x.data(), w.data(), n);
  q::dequantize_row(t, w.data(), y.data(), n);
  double worst = 0;
  for (std::size_t b = 0; b < n; b += bv) {
    double amax = 0, err = 0;
    for (std::size_t j = b; j < b + bv; ++j) {
      BOOST_TEST_REQUIRE(std::isfinite(y[j]), glassbox::dtype_name(t) << ": value " << j << " is " << y[j] << " (x = " << x[j] << ")");
      amax = std::max(amax, std::abs(double(x[j])));
      err = std::max(err, std::abs(double(y[j]) - x[j]));
    }
    worst = std::max(worst, amax > 0 ? err / amax : err);
  }
  return worst;
}

BOOST_DATA_TEST_CASE(weight_quantizers_round_trip_and_stay_finite,
                     bdata::make({"Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}), name) {
  const DType type = dtype_of(name);
  const std::size_t n = 1024;  // four k-quant super-blocks, 32 small blocks
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  double worst = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> x(n);
    for (auto& v : x) v = trial % 2 ? nd(g) : nd(g) * (u(g) < 0.05f ? 8.0f : 1.0f) + (trial % 4 == 2 ? 0.5f : 0.0f);
    worst = std::max(worst, worst_relative_error(type, x));
  }
  BOOST_TEST_MESSAGE(glassbox::dtype_name(type) << ": worst error " << worst << " of the block's max |x|");
  BOOST_TEST(worst <= writer_bound(type), glassbox::dtype_name(type) << ": " << worst);

  const std::vector<float> zeros(n, 0.0f);
  BOOST_TEST(worst_relative_error(type, zeros) == 0.0);
  for (float c : {1.0f, -3.5f, 0.05f, 60000.0f, -60000.0f})
    BOOST_TEST(worst_relative_error(type, std::vector<float>(n, c)) <= writer_bound(type), glassbox::dtype_name(type) << " constant " << c);
  // Finite only: tiny scales fall into fp16's subnormals (Q6_K's d ≈ amax/4096 does below amax ≈ 0.25, and
  // 0.001 comes back as 0.00098) or below them (1e-30 comes back as 0), as they do in ggml.
  for (float c : {0.001f, 1e-30f}) worst_relative_error(type, std::vector<float>(n, c));
  std::vector<float> spike(n, 0.0f), alternating(n), huge(n);
  spike[300] = 1000.0f;
  for (std::size_t i = 0; i < n; ++i) {
    alternating[i] = i % 2 ? 1.0f : -1.0f;
    huge[i] = (i % 3 ? 60000.0f : -60000.0f) * (0.5f + 0.5f * u(g));
  }
  for (const auto* x : {&spike, &alternating, &huge})
    BOOST_TEST(worst_relative_error(type, *x) <= writer_bound(type), glassbox::dtype_name(type));
}

// ================================ dot products ================================

namespace {
// A random weight row of type t: quantized from random floats for Q8_0/Q4_0, random blocks (bytes +
// sane fp16 scales) for the other types, so the dots see every bit pattern, not only what a quantizer writes.
std::vector<char> random_weights(DType t, std::size_t n, std::mt19937& g) {
  std::vector<char> w(glassbox::row_bytes(t, n));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), small(0.001f, 0.02f);
  std::uniform_int_distribution<int> byte(0, 255);
  // Where each of these types keeps its fp16 scale d and its min/dmin (−1: none).
  static const std::map<DType, std::pair<int, int>> scale_at = {
      {DType::Q4_K, {0, 2}},   {DType::Q5_K, {0, 2}},  {DType::Q6_K, {208, -1}}, {DType::Q4_1, {0, 2}},
      {DType::Q5_0, {0, -1}},  {DType::Q5_1, {0, 2}},  {DType::IQ4_NL, {0, -1}}, {DType::Q2_K, {80, 82}},
      {DType::Q3_K, {108, -1}}};
  if (const auto it = scale_at.find(t); it != scale_at.end()) {
    for (auto& c : w) c = static_cast<char>(byte(g));
    const auto& info = glassbox::dtype_info(t);
    for (std::size_t b = 0; b < n / info.block_values; ++b) {
      char* blk = w.data() + b * info.block_bytes;
      const std::uint16_t d = q::fp32_to_fp16(small(g)), dmin = q::fp32_to_fp16(small(g));
      std::memcpy(blk + it->second.first, &d, 2);
      if (it->second.second >= 0) std::memcpy(blk + it->second.second, &dmin, 2);
    }
    return w;
  }
  std::vector<float> x(n);
  for (auto& v : x) v = u(g);
  q::quantize_row(t, x.data(), w.data(), n);
  return w;
}

std::vector<char> random_activation(DType w, std::size_t n, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(g);
  const DType t = q::vec_dot_type(w);
  std::vector<char> out(glassbox::row_bytes(t, n));
  q::quantize_activation(t, x.data(), out.data(), n);
  return out;
}

struct Case {
  DType type;
  std::size_t n;
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << glassbox::dtype_name(c.type) << " n=" << c.n; }

std::vector<Case> dot_cases() {
  std::vector<Case> c;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (std::size_t n : {1, 7, 32, 100, 256, 1000, 4099}) c.push_back({t, n});
  for (DType t : {DType::Q8_0, DType::Q4_0})
    for (std::size_t n : {32, 64, 96, 160, 256, 4096, 4128}) c.push_back({t, n});
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q2_K, DType::Q3_K})
    for (std::size_t n : {256, 512, 768, 4096}) c.push_back({t, n});
  for (DType t : {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL})
    for (std::size_t n : {32, 64, 96, 160, 256, 4096, 4128}) c.push_back({t, n});
  return c;
}
}  // namespace

// Both dot products, and a double-precision dot of the dequantized rows, agree to float rounding:
// tolerance relative to Σ|w·x| (the result itself may cancel to near 0).
BOOST_DATA_TEST_CASE(vec_dot_matches_scalar_and_dequantized_dot, bdata::make(dot_cases()), c) {
  std::mt19937 g(static_cast<unsigned>(c.n * 31 + static_cast<unsigned>(c.type)));
  for (int trial = 0; trial < 5; ++trial) {
    const auto w = random_weights(c.type, c.n, g);
    const auto x = random_activation(c.type, c.n, g);
    std::vector<float> wf(c.n), xf(c.n);
    q::dequantize_row(c.type, w.data(), wf.data(), c.n);
    q::dequantize_row(q::vec_dot_type(c.type), x.data(), xf.data(), c.n);
    double ref = 0, mag = 0;
    for (std::size_t i = 0; i < c.n; ++i) {
      ref += double(wf[i]) * xf[i];
      mag += std::fabs(double(wf[i]) * xf[i]);
    }
    if (q::vec_dot_type(c.type) == DType::Q8_1) {
      // The min m meets the activations through Q8_1's s = fp16(d·Σq), not the exact Σ of the
      // dequantized block: the reference takes that term as llama.cpp's product does, m·s.
      const auto* xb = reinterpret_cast<const q::block_q8_1*>(x.data());
      const std::size_t wbb = glassbox::dtype_info(c.type).block_bytes;
      for (std::size_t b = 0; b < c.n / 32; ++b) {
        std::uint16_t m;
        std::memcpy(&m, w.data() + b * wbb + 2, 2);  // Q4_1/Q5_1: d, then m
        double sx = 0;
        for (std::size_t j = 0; j < 32; ++j) sx += xf[32 * b + j];
        ref += fp16_value(m) * (fp16_value(xb[b].s) - sx);
      }
    }
    BOOST_TEST_REQUIRE(mag > 0.0);
    const float fast = q::vec_dot(c.type, c.n, w.data(), x.data());
    const float slow = q::vec_dot_scalar(c.type, c.n, w.data(), x.data());
    BOOST_TEST(std::fabs(fast - slow) <= 1e-5 * mag, "vec_dot " << fast << " vs scalar " << slow << " (Σ|wx| " << mag << ")");
    BOOST_TEST(std::fabs(slow - ref) <= 1e-5 * mag, "scalar " << slow << " vs dequantized " << ref << " (Σ|wx| " << mag << ")");
  }
}

// The SIMD dot widens halves with its own (vectorized) conversion: a one-hot activation picks out
// single weights, so every finite fp16 / bf16 bit pattern must come back exactly.
BOOST_AUTO_TEST_CASE(half_dot_products_widen_every_finite_value_exactly) {
  const std::size_t n = 64;
  std::vector<std::uint16_t> w(n), x(n);
  for (DType t : {DType::F16, DType::BF16}) {
    const std::uint16_t one = t == DType::F16 ? 0x3C00 : 0x3F80;
    std::size_t bad = 0;
    for (std::uint32_t base = 0; base < 65536; base += n) {
      for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<std::uint16_t>(base + i);
      for (std::size_t j = 0; j < n; ++j) {
        const double want = t == DType::F16 ? fp16_value(w[j]) : double(from_bits(std::uint32_t(w[j]) << 16));
        if (!std::isfinite(want)) continue;
        std::fill(x.begin(), x.end(), 0);
        x[j] = one;
        const float got = q::vec_dot(t, n, w.data(), x.data()), got_s = q::vec_dot_scalar(t, n, w.data(), x.data());
        if (double(got) != want || double(got_s) != want) ++bad;
      }
    }
    BOOST_TEST(bad == 0u, glassbox::dtype_name(t) << ": " << bad << " patterns widened wrongly");
  }
}

// A 128-weight Q8_0 byte pattern SIMD shortcuts get wrong (ggml's maddubs saturates on −128):
// the integer dots must be exact for any bytes.
BOOST_AUTO_TEST_CASE(q8_0_dot_is_exact_for_extreme_bytes) {
  std::vector<q::block_q8_0> w(4), x(4);
  for (std::size_t b = 0; b < 4; ++b) {
    w[b].d = x[b].d = 0x3C00;
    for (int j = 0; j < 32; ++j) {
      w[b].qs[j] = -128;
      x[b].qs[j] = (j + b) % 2 ? -128 : 127;
    }
  }
  const float want = 4 * (16 * 128.0f * 128.0f - 16 * 128.0f * 127.0f);
  BOOST_TEST(q::vec_dot(DType::Q8_0, 128, w.data(), x.data()) == want);
  BOOST_TEST(q::vec_dot_scalar(DType::Q8_0, 128, w.data(), x.data()) == want);
}

// The k-quant dots take maddubs (unsigned × signed bytes, pairs summed into int16) for Q4_K's nibbles
// (0..15) and Q6_K's unsigned 6-bit values (0..63, 32·Σy taken off after): no pair may saturate.
// Extreme blocks — every quant and scale at its largest, activations at −128 — against the exact sum
// (kept under 2^24, so the float result is exact too).
BOOST_AUTO_TEST_CASE(k_quant_dots_are_exact_for_extreme_bytes) {
  q::block_q8_K y{};
  y.d = 1.0f;
  // The sums of 16 activations the k-quant dots take their minimums (and Q6_K its −32) from, as
  // quantize_activation writes them: kept consistent with qs whenever qs change.
  auto block_sums = [&y] {
    for (int b = 0; b < 16; ++b) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += y.qs[16 * b + j];
      y.bsums[b] = static_cast<std::int16_t>(s);
    }
  };
  for (int j = 0; j < 64; ++j) y.qs[j] = -128;
  block_sums();
  q::block_q4_K w4{};
  w4.d = w4.dmin = 0x3C00;                                          // 1.0
  std::memset(w4.scales, 0xFF, sizeof w4.scales);                   // every scale and min 63
  std::memset(w4.qs, 0xFF, sizeof w4.qs);                           // every nibble 15
  const float want4 = 63.0f * 15 * -128 * 64 - 63.0f * -128 * 64;  // Σ sc·q·y − Σ m·Σy
  BOOST_TEST(q::vec_dot(DType::Q4_K, 256, &w4, &y) == want4);
  BOOST_TEST(q::vec_dot_scalar(DType::Q4_K, 256, &w4, &y) == want4);
  q::block_q6_K w6{};
  w6.d = 0x3C00;
  std::memset(w6.ql, 0xFF, sizeof w6.ql);
  std::memset(w6.qh, 0xFF, sizeof w6.qh);                   // every value 63 − 32 = 31
  for (auto& sc : w6.scales) sc = -128;
  for (int j = 32; j < 64; ++j) y.qs[j] = 0;                // 32 values: 31·128·128·32 < 2^24
  block_sums();
  const float want6 = 31.0f * -128 * -128 * 32;
  BOOST_TEST(q::vec_dot(DType::Q6_K, 256, &w6, &y) == want6);
  BOOST_TEST(q::vec_dot_scalar(DType::Q6_K, 256, &w6, &y) == want6);
}

// The load-time check looks at the scale fields only, at each type's own offsets: an all-ones
// exponent planted anywhere else in a block (quant bytes) is data, not a scale, and passes.
BOOST_DATA_TEST_CASE(first_nonfinite_scale_reads_only_the_scale_fields,
                     bdata::make({"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}),
                     type_name) {
  const DType t = dtype_of(type_name);
  // Each type's fp16 scale fields (ggml-common.h), and whether the first is called d.
  static const std::map<DType, std::vector<std::pair<std::size_t, std::string>>> fields = {
      {DType::Q8_0, {{0, "d"}}},   {DType::Q4_0, {{0, "d"}}},  {DType::Q4_1, {{0, "d"}, {2, "m"}}},
      {DType::Q5_0, {{0, "d"}}},   {DType::Q5_1, {{0, "d"}, {2, "m"}}},  {DType::IQ4_NL, {{0, "d"}}},
      {DType::Q2_K, {{80, "d"}, {82, "dmin"}}},  {DType::Q3_K, {{108, "d"}}},  {DType::Q4_K, {{0, "d"}, {2, "dmin"}}},
      {DType::Q5_K, {{0, "d"}, {2, "dmin"}}},    {DType::Q6_K, {{208, "d"}}}};
  const auto& info = glassbox::dtype_info(t);
  const std::size_t blocks = 3000;  // more than one of the check's runs of 1024
  std::vector<unsigned char> data(blocks * info.block_bytes);
  // Every byte 0xFF except the scale fields (1.0): ±NaN patterns everywhere in the quants.
  std::fill(data.begin(), data.end(), 0xFF);
  for (std::size_t b = 0; b < blocks; ++b)
    for (const auto& [at, name] : fields.at(t)) {
      const std::uint16_t one = 0x3C00;
      std::memcpy(&data[b * info.block_bytes + at], &one, 2);
    }
  const char* field = "";
  BOOST_TEST(q::first_nonfinite_scale(t, data.data(), blocks, &field) == blocks);
  for (const auto& [at, name] : fields.at(t)) {
    auto bad = data;
    const std::uint16_t inf = 0xFC00;
    std::memcpy(&bad[2500 * info.block_bytes + at], &inf, 2);
    std::memcpy(&bad[2900 * info.block_bytes + at], &inf, 2);
    BOOST_TEST(q::first_nonfinite_scale(t, bad.data(), blocks, &field) == 2500u);
    BOOST_TEST(std::string(field) == name);
  }
}

BOOST_AUTO_TEST_CASE(first_nonfinite_scale_checks_every_half_value) {
  std::vector<std::uint16_t> h(100, 0x3C00);
  const char* field = "";
  BOOST_TEST(q::first_nonfinite_scale(DType::F16, h.data(), h.size(), &field) == 100u);
  h[77] = 0x7E00;  // NaN
  BOOST_TEST(q::first_nonfinite_scale(DType::F16, h.data(), h.size(), &field) == 77u);
  BOOST_TEST(std::string(field) == "value");
  std::vector<std::uint16_t> b(100, 0x3F80);  // bf16 1.0
  b[5] = 0x7C00;                               // a finite bf16 (2^121): not fp16's exponent test
  BOOST_TEST(q::first_nonfinite_scale(DType::BF16, b.data(), b.size(), &field) == 100u);
  b[9] = 0xFF80;  // bf16 −inf
  BOOST_TEST(q::first_nonfinite_scale(DType::BF16, b.data(), b.size(), &field) == 9u);
  BOOST_CHECK_THROW(q::first_nonfinite_scale(DType::F32, h.data(), 1, &field), glassbox::ConfigError);
}
