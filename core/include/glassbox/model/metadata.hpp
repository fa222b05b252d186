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
std::size_t meta_scalar_bytes(MetaType t);    // a scalar's size in a file (u8: 1 ... f64: 8); 0 for string, array

// An array of scalars or strings as a file stores it: the items' bytes back to back, not a MetaValue
// each. A 4 MB array of u8 items took ~300 MB as MetaValues (48 bytes and a heap block per item); packed,
// it takes what the file does. MetaValue::item() decodes one item.
struct PackedArray {
  std::vector<unsigned char> bytes;  // scalars: count × the element's size, little-endian; strings: their bytes
  std::vector<std::uint64_t> ends;   // strings only: item i is bytes [ends[i-1] (0 for i = 0), ends[i])
};

struct MetaValue {
  MetaType type = MetaType::U8;
  MetaType elem = MetaType::U8;  // arrays: the element type
  // Integers of every width as int64 (signed types) or uint64 (unsigned); F32/F64 as double. An array
  // is a vector of items (built in memory, or nested arrays read from a file) or, read from a file, packed.
  std::variant<std::int64_t, std::uint64_t, double, bool, std::string, std::vector<MetaValue>, PackedArray> value;

  bool is_int() const { return std::holds_alternative<std::int64_t>(value) || std::holds_alternative<std::uint64_t>(value); }
  bool is_number() const { return is_int() || std::holds_alternative<double>(value); }
  bool is_array() const { return type == MetaType::Array; }
  // The items of an array held as a vector; nullptr for a packed array or a scalar (use size()/item()).
  const std::vector<MetaValue>* array() const { return std::get_if<std::vector<MetaValue>>(&value); }
  // Arrays of either form: the number of items, and item i as a MetaValue of type `elem` (a copy).
  std::size_t size() const;
  MetaValue item(std::size_t i) const;
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
