// Model metadata: typed getters that name the file and key when a value has another type.
#include "glassbox/model/metadata.hpp"
#include "glassbox/model/printable.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "glassbox/error.hpp"

namespace glassbox {

std::string_view meta_type_name(MetaType t) {
  switch (t) {
    case MetaType::U8: return "u8";
    case MetaType::I8: return "i8";
    case MetaType::U16: return "u16";
    case MetaType::I16: return "i16";
    case MetaType::U32: return "u32";
    case MetaType::I32: return "i32";
    case MetaType::F32: return "f32";
    case MetaType::Bool: return "bool";
    case MetaType::String: return "string";
    case MetaType::Array: return "array";
    case MetaType::U64: return "u64";
    case MetaType::I64: return "i64";
    case MetaType::F64: return "f64";
  }
  return "?";
}

std::size_t meta_scalar_bytes(MetaType t) {
  switch (t) {
    case MetaType::U8: case MetaType::I8: case MetaType::Bool: return 1;
    case MetaType::U16: case MetaType::I16: return 2;
    case MetaType::U32: case MetaType::I32: case MetaType::F32: return 4;
    case MetaType::U64: case MetaType::I64: case MetaType::F64: return 8;
    default: return 0;
  }
}

namespace {
template <class T>
T load(const unsigned char* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

std::string quoted(const std::string& s, std::size_t max_len = 60) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size() && i < max_len; ++i) {
    const char c = s[i];
    if (c == '\n') out += "\\n";
    else if (c == '"' || c == '\\') { out += '\\'; out += c; }
    else if (static_cast<unsigned char>(c) < 0x20) out += "\\x" + std::to_string(static_cast<int>(c));
    else out += c;
  }
  if (s.size() > max_len) out += "…";
  return out + "\"";
}
}  // namespace

std::size_t MetaValue::size() const {
  if (const auto* a = array()) return a->size();
  if (const auto* p = std::get_if<PackedArray>(&value)) {
    if (elem == MetaType::String) return p->ends.size();
    const std::size_t w = meta_scalar_bytes(elem);
    return w ? p->bytes.size() / w : 0;
  }
  return 0;
}

MetaValue MetaValue::item(std::size_t i) const {
  if (const auto* a = array()) return a->at(i);
  const auto* p = std::get_if<PackedArray>(&value);
  if (!p || i >= size()) throw std::out_of_range("MetaValue::item: index " + std::to_string(i) + " outside the array");
  MetaValue v;
  v.type = elem;
  if (elem == MetaType::String) {
    const std::uint64_t begin = i ? p->ends[i - 1] : 0;
    v.value = std::string(reinterpret_cast<const char*>(p->bytes.data() + begin), static_cast<std::size_t>(p->ends[i] - begin));
    return v;
  }
  const unsigned char* b = p->bytes.data() + i * meta_scalar_bytes(elem);
  switch (elem) {
    case MetaType::U8: v.value = std::uint64_t{load<std::uint8_t>(b)}; break;
    case MetaType::I8: v.value = std::int64_t{load<std::int8_t>(b)}; break;
    case MetaType::U16: v.value = std::uint64_t{load<std::uint16_t>(b)}; break;
    case MetaType::I16: v.value = std::int64_t{load<std::int16_t>(b)}; break;
    case MetaType::U32: v.value = std::uint64_t{load<std::uint32_t>(b)}; break;
    case MetaType::I32: v.value = std::int64_t{load<std::int32_t>(b)}; break;
    case MetaType::U64: v.value = load<std::uint64_t>(b); break;
    case MetaType::I64: v.value = load<std::int64_t>(b); break;
    case MetaType::F32: v.value = double{load<float>(b)}; break;
    case MetaType::F64: v.value = load<double>(b); break;
    case MetaType::Bool: v.value = *b != 0; break;
    default: break;
  }
  return v;
}

std::string MetaValue::to_string(std::size_t max_items) const {
  std::ostringstream o;
  if (auto* v = std::get_if<std::int64_t>(&value)) o << *v;
  else if (auto* u = std::get_if<std::uint64_t>(&value)) o << *u;
  else if (auto* d = std::get_if<double>(&value)) o << *d;
  else if (auto* b = std::get_if<bool>(&value)) o << (*b ? "true" : "false");
  else if (auto* s = std::get_if<std::string>(&value)) o << quoted(*s);
  else if (is_array()) {
    const std::size_t n = size();
    o << "[" << meta_type_name(elem) << " × " << n << "]";
    if (n) {
      o << " ";
      for (std::size_t i = 0; i < n && i < max_items; ++i) o << (i ? ", " : "") << item(i).to_string(max_items);
      if (n > max_items) o << ", …";
    }
  }
  return o.str();
}

void Metadata::set(std::string key, MetaValue v) {
  if (auto it = index_.find(key); it != index_.end()) {
    entries_[it->second].second = std::move(v);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(v));
}

const MetaValue* Metadata::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

std::string printable_text(std::string_view s, std::size_t max_len) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max_len; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max_len) out += "...";
  return out;
}

namespace {
[[noreturn]] void mismatch(const Metadata& m, std::string_view key, const MetaValue& v, const char* expected) {
  std::string got(meta_type_name(v.type));
  if (v.type == MetaType::Array) got += " of " + std::string(meta_type_name(v.elem));
  throw ModelError((m.source.empty() ? std::string("model") : m.source) + ": metadata '" + printable_text(key) +
                   "' is " + got + ", expected " + expected);
}

std::optional<std::int64_t> as_int(const MetaValue& v) {
  if (auto* i = std::get_if<std::int64_t>(&v.value)) return *i;
  if (auto* u = std::get_if<std::uint64_t>(&v.value); u && *u <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(*u);
  return std::nullopt;
}
std::optional<double> as_float(const MetaValue& v) {
  if (auto* d = std::get_if<double>(&v.value)) return *d;
  if (auto* i = std::get_if<std::int64_t>(&v.value)) return static_cast<double>(*i);
  if (auto* u = std::get_if<std::uint64_t>(&v.value)) return static_cast<double>(*u);
  return std::nullopt;
}
}  // namespace

std::optional<std::int64_t> Metadata::get_int(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto i = as_int(*v)) return i;
  mismatch(*this, key, *v, "an integer below 2^63");
}

std::optional<double> Metadata::get_float(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto d = as_float(*v)) {
    // The model computes in float: an F64 value beyond float's range (1e300 becomes inf) or below its
    // normal range (1e-50 becomes 0) would run, silently wrong, and write traces that do not validate.
    const double a = std::fabs(*d);
    if (!std::isfinite(*d) || a > static_cast<double>(std::numeric_limits<float>::max()) ||
        (a != 0 && a < static_cast<double>(std::numeric_limits<float>::min()))) {
      std::ostringstream o;
      o << *d;
      throw ModelError((source.empty() ? std::string("model") : source) + ": metadata '" + printable_text(key) + "' = " + o.str() +
                       " is outside float's range (expected 0 or a finite magnitude in 1.2e-38..3.4e38)");
    }
    return d;
  }
  mismatch(*this, key, *v, "a number");
}

std::optional<bool> Metadata::get_bool(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto* b = std::get_if<bool>(&v->value)) return *b;
  mismatch(*this, key, *v, "a bool");
}

std::optional<std::string> Metadata::get_string(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto* s = std::get_if<std::string>(&v->value)) return *s;
  mismatch(*this, key, *v, "a string");
}

std::optional<std::vector<std::string>> Metadata::get_strings(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array() || (v->size() && v->elem != MetaType::String)) mismatch(*this, key, *v, "an array of strings");
  std::vector<std::string> out;
  out.reserve(v->size());
  if (const auto* a = v->array())
    for (const auto& e : *a) {
      const auto* s = std::get_if<std::string>(&e.value);
      if (!s) mismatch(*this, key, *v, "an array of strings");
      out.push_back(*s);
    }
  else
    for (std::size_t i = 0; i < v->size(); ++i) out.push_back(std::get<std::string>(v->item(i).value));
  return out;
}

std::optional<std::vector<double>> Metadata::get_floats(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) mismatch(*this, key, *v, "an array of numbers");
  std::vector<double> out;
  out.reserve(v->size());
  for (std::size_t i = 0; i < v->size(); ++i) {
    auto d = as_float(v->item(i));
    if (!d) mismatch(*this, key, *v, "an array of numbers");
    out.push_back(*d);
  }
  return out;
}

std::optional<std::vector<std::int64_t>> Metadata::get_ints(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) mismatch(*this, key, *v, "an array of integers");
  std::vector<std::int64_t> out;
  out.reserve(v->size());
  for (std::size_t k = 0; k < v->size(); ++k) {
    auto i = as_int(v->item(k));
    if (!i) mismatch(*this, key, *v, "an array of integers");
    out.push_back(*i);
  }
  return out;
}

}  // namespace glassbox
