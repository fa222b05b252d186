// The weight element types glassbox reads: names and ggml's block sizes.
#include "glassbox/model/dtype.hpp"

#include "glassbox/error.hpp"

namespace glassbox {

namespace {
// ggml's type traits (ggml.c type_traits): values per block, bytes per block. One row per type, the weight
// types in the order error messages list them (supported_dtypes is generated from these rows); its
// conversions and dots are the row of the same type in core/src/quant.cpp's kTraits.
constexpr DTypeInfo kTypes[] = {
    {DType::F32, "F32", 1, 4},        {DType::F16, "F16", 1, 2},          {DType::BF16, "BF16", 1, 2},
    {DType::Q8_0, "Q8_0", 32, 34},    {DType::Q4_0, "Q4_0", 32, 18},      {DType::Q4_1, "Q4_1", 32, 20},
    {DType::Q5_0, "Q5_0", 32, 22},    {DType::Q5_1, "Q5_1", 32, 24},      {DType::IQ4_NL, "IQ4_NL", 32, 18},
    {DType::Q2_K, "Q2_K", 256, 84},   {DType::Q3_K, "Q3_K", 256, 110},    {DType::Q4_K, "Q4_K", 256, 144},
    {DType::Q5_K, "Q5_K", 256, 176},  {DType::Q6_K, "Q6_K", 256, 210},
    // activation-only
    {DType::Q8_1, "Q8_1", 32, 36},    {DType::Q8_K, "Q8_K", 256, 292},
};
// Activation-only types (the vec_dot_type of some weight types): never accepted as a file's weights.
constexpr bool activation_only(DType t) { return t == DType::Q8_K || t == DType::Q8_1; }
}  // namespace

const DTypeInfo* dtype_info(std::uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<std::uint32_t>(t.type) == id && !activation_only(t.type)) return &t;
  return nullptr;
}

const DTypeInfo& dtype_info(DType t) {
  for (const auto& i : kTypes)
    if (i.type == t) return i;
  throw ModelError("unknown weight type id " + std::to_string(static_cast<std::uint32_t>(t)));
}

std::string_view dtype_name(DType t) { return dtype_info(t).name; }

std::string supported_dtypes() {
  std::string out;
  for (const auto& t : kTypes)
    if (!activation_only(t.type)) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

std::size_t row_bytes(DType t, std::size_t n) {
  const auto& i = dtype_info(t);
  return n / i.block_values * i.block_bytes;
}

}  // namespace glassbox
