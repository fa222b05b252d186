// The one way glassbox parses JSON and YAML it did not write itself (tokenizer.json, encoder.json,
// compare experiments and shards, trace imports, --config, traces): a size limit and a nesting limit
// checked on the text before any parser runs (nlohmann's and yaml-cpp's parsers, copies and
// destructors recurse once per level, so 100,000 nested brackets overflow the stack), and typed
// access that names the key path when a value has the wrong type. docs/reliability.md says why.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace glassbox {

// Deeper than any file glassbox reads legitimately needs (a tokenizer.json is ~6 levels deep).
inline constexpr int kMaxInputNesting = 64;
// Larger than any real tokenizer.json (Llama 3's is 9 MB) or shard; a bigger text is refused before
// it is read whole.
inline constexpr std::uint64_t kMaxStructuredInputBytes = std::uint64_t{256} << 20;

enum class Syntax { Json, Yaml };

// Why `text` may not be parsed (nested deeper than kMaxInputNesting, or larger than
// kMaxStructuredInputBytes), or nullopt. The scan skips quoted strings (and YAML comments) and counts
// JSON's [ { and YAML's flow [ { and block indentation levels.
std::optional<std::string> structured_text_problem(std::string_view text, Syntax syntax);

// The whole file `path` as text for one of the parsers: a regular file (not_a_regular_file), at most
// kMaxStructuredInputBytes, read into memory; nullopt and `why` set when it cannot be.
std::optional<std::string> read_structured_file(const std::string& path, std::string& why);

namespace detail {
inline std::string json_error_tail(const std::exception& e) {
  std::string msg = e.what();  // "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
  if (auto p = msg.find("] "); p != std::string::npos) msg = msg.substr(p + 2);
  return msg;
}
}  // namespace detail

// Parses JSON text from `what` (a file name, "FILE line 3", ...) after the checks above; every problem is
// an E (TokenizerError, ConfigError, TraceError, ...) whose message starts with `what`.
template <class E>
nlohmann::json parse_json_input(std::string_view text, const std::string& what) {
  if (auto why = structured_text_problem(text, Syntax::Json)) throw E(what + ": " + *why);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw E(what + ": not valid JSON (" + detail::json_error_tail(e) + ")");
  }
}

// The same for a file: its regular-file and size checks first.
template <class E>
nlohmann::json read_json_input(const std::string& path, const std::string& expected) {
  std::string why;
  auto text = read_structured_file(path, why);
  if (!text) throw E(path + ": " + why + " (expected " + expected + ")");
  return parse_json_input<E>(*text, path);
}

// Typed access naming the key path: JsonIn<ConfigError>(j, "shard.json").at("shard").at("index").get<int>()
// fails with "shard.json: shard.index: expected an integer in -2147483648..2147483647, got string".
template <class E>
class JsonIn {
 public:
  JsonIn(const nlohmann::json& j, std::string what, std::string path = {}) : j_(&j), what_(std::move(what)), path_(std::move(path)) {}

  const nlohmann::json& raw() const { return *j_; }
  const std::string& path() const { return path_; }
  bool has(const char* key) const { return j_->is_object() && j_->contains(key); }

  JsonIn at(const char* key) const {
    if (!j_->is_object()) fail("expected an object, got " + std::string(j_->type_name()));
    auto it = j_->find(key);
    if (it == j_->end()) fail_at(join(key), "missing");
    return JsonIn(*it, what_, join(key));
  }
  JsonIn operator[](std::size_t i) const { return JsonIn(j_->at(i), what_, path_ + "[" + std::to_string(i) + "]"); }
  // The elements of an array, each with its path.
  template <class F>
  void each(F&& f) const {
    if (!j_->is_array()) fail("expected an array, got " + std::string(j_->type_name()));
    for (std::size_t i = 0; i < j_->size(); ++i) f((*this)[i]);
  }
  std::size_t array_size() const {
    if (!j_->is_array()) fail("expected an array, got " + std::string(j_->type_name()));
    return j_->size();
  }

  // Integers within [lo, hi] (default: T's range); floating point finite; strings; booleans.
  template <class T>
  T get(std::optional<long double> lo = std::nullopt, std::optional<long double> hi = std::nullopt) const {
    if constexpr (std::is_same_v<T, bool>) {
      if (!j_->is_boolean()) fail("expected true or false, got " + std::string(j_->type_name()));
      return j_->get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      const long double min = lo.value_or(static_cast<long double>(std::numeric_limits<T>::min()));
      const long double max = hi.value_or(static_cast<long double>(std::numeric_limits<T>::max()));
      const std::string range = "an integer in " + num(min) + ".." + num(max);
      if (!j_->is_number_integer()) fail("expected " + range + ", got " + shown());
      const long double v = j_->is_number_unsigned() ? static_cast<long double>(j_->get<std::uint64_t>())
                                                     : static_cast<long double>(j_->get<std::int64_t>());
      if (v < min || v > max) fail("expected " + range + ", got " + j_->dump());
      return j_->is_number_unsigned() ? static_cast<T>(j_->get<std::uint64_t>()) : static_cast<T>(j_->get<std::int64_t>());
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!j_->is_number()) fail("expected a number, got " + std::string(j_->type_name()));
      const double v = j_->get<double>();
      if ((lo && v < *lo) || (hi && v > *hi) ||
          !(std::abs(v) <= static_cast<double>(std::numeric_limits<T>::max())))
        fail("expected a finite number" + (lo || hi ? " in " + num(lo.value_or(-INFINITY)) + ".." + num(hi.value_or(INFINITY)) : std::string()) +
             ", got " + j_->dump());
      return static_cast<T>(v);
    } else {
      static_assert(std::is_same_v<T, std::string>, "JsonIn::get: bool, integers, floating point or std::string");
      if (!j_->is_string()) fail("expected a string, got " + std::string(j_->type_name()));
      return j_->get<std::string>();
    }
  }

  [[noreturn]] void fail(const std::string& why) const { fail_at(path_, why); }

 private:
  // A wrong value as shown in a message: numbers as written, other types by name.
  std::string shown() const { return j_->is_number() ? j_->dump() : std::string(j_->type_name()); }

  static std::string num(long double x) {
    if (!std::isfinite(x)) return x < 0 ? "-inf" : "inf";
    if (std::fabs(x) < 9.2e18L && x == static_cast<long double>(static_cast<long long>(x))) return std::to_string(static_cast<long long>(x));
    if (x >= 1.8e19L) return std::to_string(static_cast<unsigned long long>(x));
    return std::to_string(static_cast<double>(x));
  }
  std::string join(const char* key) const { return path_.empty() ? std::string(key) : path_ + "." + key; }
  [[noreturn]] void fail_at(const std::string& path, const std::string& why) const {
    throw E(what_ + ": " + (path.empty() ? std::string("(top level)") : path) + ": " + why);
  }
  const nlohmann::json* j_;
  std::string what_, path_;
};

}  // namespace glassbox
