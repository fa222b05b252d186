// The weight element types glassbox reads: names and ggml's block sizes.
#include "glassbox/model/dtype.hpp"

#include "glassbox/error.hpp"

namespace glassbox {

namespace {
// ggml's type traits (ggml.c type_traits): values per block, bytes per block.
constexpr DTypeInfo kTypes[] = {
    {DType::F32, "F32", 1, 4},        {DType::F16, "F16", 1, 2},          {DType::BF16, "BF16", 1, 2},
    {DType::Q8_0, "Q8_0", 32, 34},    {DType::Q4_0, "Q4_0", 32, 18},      {DType::Q4_K, "Q4_K", 256, 144},
    {DType::Q5_K, "Q5_K", 256, 176},  {DType::Q6_K, "Q6_K", 256, 210},    {DType::Q8_K, "Q8_K", 256, 292},
};
}  // namespace

const DTypeInfo* dtype_info(std::uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<std::uint32_t>(t.type) == id && t.type != DType::Q8_K) return &t;  // Q8_K: activations only
  return nullptr;
}

const DTypeInfo& dtype_info(DType t) {
  for (const auto& i : kTypes)
    if (i.type == t) return i;
  throw ModelError("unknown weight type id " + std::to_string(static_cast<std::uint32_t>(t)));
}

std::string_view dtype_name(DType t) { return dtype_info(t).name; }

std::string supported_dtypes() { return "F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K"; }

std::size_t row_bytes(DType t, std::size_t n) {
  const auto& i = dtype_info(t);
  return n / i.block_values * i.block_bytes;
}

}  // namespace glassbox
