// A model file's key/value metadata: GGUF's typed values (scalars, strings, nested arrays), or the
// few keys a llama2.c header implies. Tokenizers and the architecture read what they need from it.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace glassbox {

// GGUF's value type ids (gguf_metadata_value_type), kept so `inspect` can show the stored type.
enum class MetaType : std::uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9,
  U64 = 10, I64 = 11, F64 = 12
};
std::string_view meta_type_name(MetaType t);  // "u32", "string", "array", ...

struct MetaValue {
  MetaType type = MetaType::U8;
  MetaType elem = MetaType::U8;  // arrays: the element type
  // Integers of every width as int64 (signed types) or uint64 (unsigned); F32/F64 as double.
  std::variant<std::int64_t, std::uint64_t, double, bool, std::string, std::vector<MetaValue>> value;

  bool is_int() const { return std::holds_alternative<std::int64_t>(value) || std::holds_alternative<std::uint64_t>(value); }
  bool is_number() const { return is_int() || std::holds_alternative<double>(value); }
  const std::vector<MetaValue>* array() const { return std::get_if<std::vector<MetaValue>>(&value); }
  // A one-line rendering for listings (`inspect`): arrays show their type, length and first items.
  std::string to_string(std::size_t max_items = 8) const;
};

// Ordered key -> value map. Getters return nullopt when the key is absent and throw FormatError
// naming the file and key when it is present with another type.
class Metadata {
 public:
  std::string source;  // the file it came from, for error messages

  void set(std::string key, MetaValue v);
  const MetaValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const std::vector<std::pair<std::string, MetaValue>>& entries() const { return entries_; }

  std::optional<std::int64_t> get_int(std::string_view key) const;    // any integer type (u64 > 2^63 fails)
  // Floats and integers, within float's range (finite, 0 or normal: the model computes in float); a
  // value outside it is a ModelError naming the key and the value.
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<std::vector<std::string>> get_strings(std::string_view key) const;   // array of strings
  std::optional<std::vector<double>> get_floats(std::string_view key) const;         // array of numbers
  std::optional<std::vector<std::int64_t>> get_ints(std::string_view key) const;     // array of integers

 private:
  std::vector<std::pair<std::string, MetaValue>> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace glassbox
