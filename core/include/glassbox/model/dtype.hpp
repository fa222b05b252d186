// Weight element types (ggml's numbering) and typed tensor views over a mapped model file.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace glassbox {

// The values are ggml's type ids, as stored in GGUF tensor infos.
enum class DType : std::uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10, Q3_K = 11, Q4_K = 12,
  Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ4_NL = 20, BF16 = 30
};

struct DTypeInfo {
  DType type;
  std::string_view name;     // "F32", "Q4_K", ...
  std::size_t block_values;  // values per block (1 for float types)
  std::size_t block_bytes;   // bytes per block
};

// nullptr for ids glassbox does not support.
const DTypeInfo* dtype_info(std::uint32_t ggml_type_id);
const DTypeInfo& dtype_info(DType t);
std::string_view dtype_name(DType t);
std::string supported_dtypes();  // "F32, F16, BF16, Q8_0, Q4_0, ..." (the weight types) for error messages
// Bytes of one row of n values; n must be a multiple of the block size (checked by callers).
std::size_t row_bytes(DType t, std::size_t n);

// A read-only view of one weight tensor, in its stored type. Shapes are row-major, outermost
// first: a matrix (rows = outputs, cols = inputs) is {rows, cols}; a vector is {n}.
struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  int n_dims = 0;
  std::array<std::int64_t, 4> shape{};  // only the first n_dims are meaningful
  const std::byte* data = nullptr;
  std::size_t bytes = 0;

  std::int64_t rows() const { return n_dims >= 2 ? shape[0] : 1; }
  std::int64_t cols() const { return shape[n_dims - 1]; }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < n_dims; ++i) n *= shape[i];
    return n;
  }
  const std::byte* row(std::int64_t r) const { return data + static_cast<std::size_t>(r) * row_bytes(dtype, cols()); }
  const float* f32() const { return reinterpret_cast<const float*>(data); }  // dtype == F32 only
};

}  // namespace glassbox
