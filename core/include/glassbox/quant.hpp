// Weight element types in ggml's layouts: fp16/bf16 conversion, block structs, (de)quantization of
// rows, and the dot product of a weight row with an activation row quantized the way llama.cpp does.
#pragma once
#include <cstddef>
#include <cstdint>

#include "glassbox/model/dtype.hpp"

namespace glassbox::quant {

// ---- Half-precision floats -------------------------------------------------------------------
// fp16 is IEEE binary16 (1 sign, 5 exponent, 10 mantissa bits); bf16 is the top half of an f32
// (1 sign, 8 exponent, 7 mantissa bits). Widening is exact. Narrowing rounds to nearest, ties to
// even, like ggml's GGML_FP32_TO_FP16 (F16C or its software twin) and ggml_compute_fp32_to_bf16.
float fp16_to_fp32(std::uint16_t h);
std::uint16_t fp32_to_fp16(float f);  // NaN → sign | 0x7E00 (ggml's software path)
float bf16_to_fp32(std::uint16_t h);
std::uint16_t fp32_to_bf16(float f);  // NaN → top half with the quiet bit set; no flush of subnormals

// ---- Block layouts (byte-for-byte those of ggml-common.h) ------------------------------------
// Every quantized type stores a row as consecutive blocks; each block holds its own scale(s), so a
// block can be decoded without looking at its neighbours. `d` is the scale ("delta").
constexpr std::size_t QK8_0 = 32;  // values per Q8_0 / Q4_0 block
constexpr std::size_t QK_K = 256;  // values per k-quant super-block

#pragma pack(push, 1)
// Q8_0: 32 values = d · q, q a signed byte.
struct block_q8_0 {
  std::uint16_t d;  // fp16
  std::int8_t qs[QK8_0];
};
// Q4_0: 32 values = d · (q − 8), q a 4-bit nibble. Byte j holds value j in its low nibble and
// value j+16 in its high nibble (not j and j+1).
struct block_q4_0 {
  std::uint16_t d;  // fp16
  std::uint8_t qs[QK8_0 / 2];
};
// Q4_K: 256 values in 8 sub-blocks of 32. Sub-block s has a 6-bit scale sc[s] and a 6-bit min m[s],
// packed into 12 bytes (see get_scale_min_k4 in quant.cpp), and value = d·sc[s]·q − dmin·m[s] with
// q a 4-bit nibble. The 128 qs bytes come in 4 groups of 32: group g holds sub-block 2g in its low
// nibbles and sub-block 2g+1 in its high nibbles.
struct block_q4_K {
  std::uint16_t d;     // fp16, scale of the sub-block scales
  std::uint16_t dmin;  // fp16, scale of the sub-block mins
  std::uint8_t scales[12];
  std::uint8_t qs[QK_K / 2];
};
// Q5_K: as Q4_K, plus a fifth bit per value: bit s of qh[l] adds 16 to value l (0..31) of
// sub-block s, so q runs 0..31.
struct block_q5_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[QK_K / 8];
  std::uint8_t qs[QK_K / 2];
};
// Q6_K: 256 values in 16 sub-blocks of 16, value = d·scales[s]·(q − 32) with q a 6-bit number:
// its low 4 bits in ql, its high 2 bits in qh. Each half (128 values) uses 64 ql bytes and 32 qh
// bytes; within a half, value l (0..31) + 32k takes ql[l + 32·(k&1)]'s low (k<2) or high (k≥2)
// nibble and bits 2k..2k+1 of qh[l].
struct block_q6_K {
  std::uint8_t ql[QK_K / 2];
  std::uint8_t qh[QK_K / 4];
  std::int8_t scales[QK_K / 16];  // 8-bit signed sub-block scales
  std::uint16_t d;                // fp16
};
// Q8_K: the activation side of the k-quant dot products. 256 values = d · q, d kept as f32;
// bsums[i] = Σ of q over values 16i..16i+15, used to apply the weights' per-sub-block mins.
struct block_q8_K {
  float d;
  std::int8_t qs[QK_K];
  std::int16_t bsums[QK_K / 16];
};
// Q4_1: 32 values = d · q + m, q a 4-bit nibble (unsigned, 0..15) and m the block's minimum, so a
// block that is all positive loses no level to the sign. Nibble order as Q4_0.
struct block_q4_1 {
  std::uint16_t d;  // fp16
  std::uint16_t m;  // fp16
  std::uint8_t qs[QK8_0 / 2];
};
// Q5_0: 32 values = d · (q − 16), q a 5-bit number: its low 4 bits as Q4_0's nibbles, its fifth bit
// bit j of the little-endian 32-bit qh (value j, 0..31).
struct block_q5_0 {
  std::uint16_t d;  // fp16
  std::uint8_t qh[4];
  std::uint8_t qs[QK8_0 / 2];
};
// Q5_1: 32 values = d · q + m with the 5-bit q of Q5_0 (unsigned, 0..31).
struct block_q5_1 {
  std::uint16_t d;  // fp16
  std::uint16_t m;  // fp16
  std::uint8_t qh[4];
  std::uint8_t qs[QK8_0 / 2];
};
// Q8_1: the activation side of Q4_1/Q5_1: Q8_0 plus s = d · Σq (fp16), which carries the weights'
// per-block minimum m through the product: Σ (d_w·q_w + m)·d_x·q_x = d_w·d_x·Σ q_w·q_x + m·s.
struct block_q8_1 {
  std::uint16_t d;  // fp16
  std::uint16_t s;  // fp16, d · Σ qs
  std::int8_t qs[QK8_0];
};
// IQ4_NL: 32 values = d · kvalues_iq4nl[q], q a 4-bit index (nibble order as Q4_0) into a fixed
// non-uniform table of 16 levels, denser near zero where most weights lie.
struct block_iq4_nl {
  std::uint16_t d;  // fp16
  std::uint8_t qs[QK8_0 / 2];
};
// Q2_K: 256 values in 16 sub-blocks of 16. scales[s]: low nibble the 4-bit scale, high nibble the
// 4-bit min of sub-block s; value = d·sc·q − dmin·m with q a 2-bit number. Each 128-value half uses
// 32 qs bytes: value l + 32k (l 0..31, k 0..3) is bits 2k..2k+1 of qs[l].
struct block_q2_K {
  std::uint8_t scales[QK_K / 16];
  std::uint8_t qs[QK_K / 4];
  std::uint16_t d;     // fp16, scale of the scales
  std::uint16_t dmin;  // fp16, scale of the mins
};
// Q3_K: 256 values in 16 sub-blocks of 16, value = d·(sc − 32)·(q − 4·(1 − h)): q 2 bits in qs as
// for Q2_K, h one bit in hmask (value l + 32j, j 0..7, takes bit j of hmask[l]); the 16 6-bit
// scales packed in 12 bytes (low 4 bits in bytes 0..7, high 2 bits in bytes 8..11).
struct block_q3_K {
  std::uint8_t hmask[QK_K / 8];
  std::uint8_t qs[QK_K / 4];
  std::uint8_t scales[12];
  std::uint16_t d;  // fp16
};
#pragma pack(pop)
static_assert(sizeof(block_q4_1) == 20 && sizeof(block_q5_0) == 22 && sizeof(block_q5_1) == 24);
static_assert(sizeof(block_q8_1) == 36 && sizeof(block_iq4_nl) == 18);
static_assert(sizeof(block_q2_K) == 84 && sizeof(block_q3_K) == 110);
static_assert(sizeof(block_q8_0) == 34 && sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_K) == 144 && sizeof(block_q5_K) == 176);
static_assert(sizeof(block_q6_K) == 210 && sizeof(block_q8_K) == 292);

// ---- Rows ------------------------------------------------------------------------------------
// All functions taking n require n to be a multiple of the type's block size and throw ModelError
// otherwise; types they do not handle throw ConfigError.

// src (n values of type t) → dst (n floats), bit-identical to ggml's dequantize_row_* and
// ggml_fp16_to_fp32_row / ggml_bf16_to_fp32_row (same order of operations). All types incl. Q8_K.
void dequantize_row(DType t, const void* src, float* dst, std::size_t n);

// Weight-file quantization, what llama-quantize writes without an imatrix (used by `glassbox convert`);
// each type is a port of ggml's quantize_row_<type>_ref with the same order of float operations, so
// the bytes equal llama-quantize's:
//   F32  copy;  F16, BF16  round to nearest even;
//   Q8_0 ggml's quantize_row_q8_0_ref: d = amax/127, q = roundf(x·(1/d))   (ties away from zero);
//   Q4_0 ggml's quantize_row_q4_0_ref: d = m/−8 with m the signed value of largest |x|,
//        q = min(15, (int8)(x·(1/d) + 8.5))   (truncation, so ties go up);
//   Q5_0 the same with d = m/−16 and 5 bits;  Q4_1, Q5_1: d = (max − min)/15 (/31), m = min;
//   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K  ggml's quantize_row_q{2..6}_K_ref: per sub-block a searched
//        least-squares scale (and min), the sub-block scales quantized against the super-block's d
//        (and dmin), then every value re-rounded with the stored scales;
//   Q8_K the same as quantize_activation(Q8_K, ...).
//   IQ4_NL ggml's quantize_row_iq4_nl_ref: per block of 32 the best of 16 trial scales (x²-weighted
//        least squares), each value mapped to the nearest of the 16 table levels;
// Q8_1 is quantize_activation(Q8_1, ...).
void quantize_row(DType t, const float* src, void* dst, std::size_t n);

// The type llama.cpp converts the activation row to before a dot product with weights of type w:
// F32→F32, F16→F16, BF16→BF16, Q8_0/Q4_0/Q5_0/IQ4_NL→Q8_0, Q4_1/Q5_1→Q8_1,
// Q2_K/Q3_K/Q4_K/Q5_K/Q6_K→Q8_K (ggml-cpu's type_traits[].vec_dot_type).
DType vec_dot_type(DType w);

// Activation quantization exactly as ggml's CPU matmul does it (its from_float of the vec_dot_type):
//   F32 copy;  F16, BF16  round to nearest even;
//   Q8_0 ggml-cpu's quantize_row_q8_0 (x86 SIMD path): d = amax/127 (stored fp16 of the f32 d),
//        q = round-half-even(x · (127/amax))   — note: 127/amax, not 1/d, and not roundf;
//   Q8_1 ggml-cpu's quantize_row_q8_1 (x86 SIMD path): Q8_0's d and q, plus s = fp16(d · Σq);
//   Q8_K ggml's quantize_row_q8_K_ref: m = signed value of largest |x| (first on ties),
//        iscale = −127/m, q = min(127, round-half-even(iscale·x)), d = 1/iscale (f32), bsums.
// `t` is the vec_dot_type (F32, F16, BF16, Q8_0, Q8_1 or Q8_K).
void quantize_activation(DType t, const float* src, void* dst, std::size_t n);

// Dot product of one weight row (type w, n values) with one activation row already converted to
// vec_dot_type(w) by quantize_activation. Quantized types follow ggml's ggml_vec_dot_<w>_<x>
// grouping: an exact integer dot per block (k-quants: per super-block, with the sub-block scales
// and mins applied in integers), then one float multiply by d_w·d_x per block, summed in f32.
// The float summation order is not ggml's, so results agree with it to rounding, not bit for bit.
float vec_dot(DType w, std::size_t n, const void* w_row, const void* x_row);         // SIMD
float vec_dot_scalar(DType w, std::size_t n, const void* w_row, const void* x_row);  // plain reference

// ---- Load-time check ------------------------------------------------------------------------------
// A NaN or infinite block scale would turn its whole block into NaN (or, once the integer dot is
// scaled, finite garbage in later layers), so a model load refuses it. Checks, for `count` blocks of
// type t (values for F16/BF16), the fp16 fields that scale a block — d, and dmin or m where the type
// has one — or, for F16/BF16, every value. Returns the index of the first bad block (value) and sets
// *field to its name ("d", "dmin", "m", "value"), or returns `count` if all are finite. F32 and the
// activation types are not handled (F32 weights go through kernels::first_nonfinite) and throw ConfigError.
std::size_t first_nonfinite_scale(DType t, const void* data, std::size_t count, const char** field);

}  // namespace glassbox::quant
