// GGUF reader and writer. Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 kv
// count, the kvs (string key, u32 type, value), the tensor infos (string name, u32 n_dims,
// u64 ne[n_dims], u32 ggml type, u64 offset), padding to the alignment, then the tensor data.
#include "glassbox/model/gguf.hpp"
#include "glassbox/model/printable.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <set>
#include <stdexcept>

#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"

namespace glassbox {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr std::uint64_t kDefaultAlignment = 32;
constexpr std::uint64_t kMaxKeyBytes = 65535;        // GGUF spec: keys are at most 2^16 - 1 bytes
constexpr std::uint64_t kMaxTensorNameBytes = 65535;  // ggml itself stops at 63; be no stricter than keys
constexpr int kMaxArrayDepth = 8;
// A scalar or a nested array becomes a MetaValue of ~50 bytes, so a file of tiny values could make the
// parsed metadata ~50x the file. Arrays of scalars and strings are packed (their items are not counted).
constexpr std::uint64_t kMaxMetaValues = std::uint64_t{1} << 24;
constexpr std::uint32_t kMaxMetaType = static_cast<std::uint32_t>(MetaType::F64);

// Fewest bytes a value of each type can take: bounds array lengths before anything is reserved.
std::uint64_t min_value_bytes(std::uint32_t type) {
  switch (static_cast<MetaType>(type)) {
    case MetaType::U8: case MetaType::I8: case MetaType::Bool: return 1;
    case MetaType::U16: case MetaType::I16: return 2;
    case MetaType::U32: case MetaType::I32: case MetaType::F32: return 4;
    case MetaType::U64: case MetaType::I64: case MetaType::F64: return 8;
    case MetaType::String: return 8;   // the u64 length
    case MetaType::Array: return 12;   // u32 element type + u64 length
  }
  return 1;
}

std::string u128_str(unsigned __int128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v) { s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10))); v /= 10; }
  return s;
}

std::string printable(std::string_view s, std::size_t max_len = 80) { return printable_text(s, max_len); }

std::string type_desc(std::uint32_t id) {
  const auto name = ggml_type_name(id);
  if (name.empty()) return std::to_string(id) + " (unknown to ggml)";
  return std::string(name) + " (ggml type " + std::to_string(id) + ")";
}

// A bounds-checked cursor over the file. Errors name the file, the item being read (kept in
// ctx_ and, inside arrays, the item indices) and the byte position.
class Parser {
 public:
  Parser(const std::string& path, const std::byte* data, std::size_t size) : path_(path), data_(data), size_(size) {}

  std::size_t pos() const { return pos_; }
  std::size_t left() const { return size_ - pos_; }
  void set_context(std::string ctx) { ctx_ = std::move(ctx); }

  [[noreturn]] void fail(const std::string& what) const {
    std::string where = ctx_;
    for (auto i : items_) where += " item " + std::to_string(i);
    throw ModelError(path_ + ": " + (where.empty() ? "" : where + ": ") + what);
  }

  void need(std::uint64_t n, const char* field) const {
    if (n > left())
      fail(std::string(field) + " at byte " + std::to_string(pos_) + " needs " + std::to_string(n) +
           " bytes, but the file ends at byte " + std::to_string(size_) + " (expected more: is the file truncated?)");
  }

  template <class T>
  T get(const char* field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string str(const char* field, std::uint64_t max_len) {
    const std::size_t at = pos_;
    const auto n = get<std::uint64_t>(field);
    if (n > left())
      fail(std::string(field) + " length " + std::to_string(n) + " at byte " + std::to_string(at) +
           " runs past the end of the file (" + std::to_string(left()) + " bytes left)");
    if (n > max_len)
      fail(std::string(field) + " length " + std::to_string(n) + " at byte " + std::to_string(at) +
           " is too long (at most " + std::to_string(max_len) + " bytes)");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }

  MetaValue value(std::uint32_t type, int depth) {
    if (++n_values_ > kMaxMetaValues)
      fail("the metadata holds more than " + std::to_string(kMaxMetaValues) + " values (expected fewer; corrupt file?)");
    MetaValue v;
    v.type = static_cast<MetaType>(type);
    switch (v.type) {
      case MetaType::U8: v.value = std::uint64_t{get<std::uint8_t>("u8 value")}; break;
      case MetaType::I8: v.value = std::int64_t{get<std::int8_t>("i8 value")}; break;
      case MetaType::U16: v.value = std::uint64_t{get<std::uint16_t>("u16 value")}; break;
      case MetaType::I16: v.value = std::int64_t{get<std::int16_t>("i16 value")}; break;
      case MetaType::U32: v.value = std::uint64_t{get<std::uint32_t>("u32 value")}; break;
      case MetaType::I32: v.value = std::int64_t{get<std::int32_t>("i32 value")}; break;
      case MetaType::U64: v.value = get<std::uint64_t>("u64 value"); break;
      case MetaType::I64: v.value = get<std::int64_t>("i64 value"); break;
      case MetaType::F32: v.value = double{get<float>("f32 value")}; break;
      case MetaType::F64: v.value = get<double>("f64 value"); break;
      case MetaType::Bool: {
        const auto b = get<std::uint8_t>("bool value");
        if (b > 1) fail("bool value at byte " + std::to_string(pos_ - 1) + " is " + std::to_string(b) + " (expected 0 or 1)");
        v.value = b == 1;
        break;
      }
      case MetaType::String: v.value = str("string", std::numeric_limits<std::uint64_t>::max()); break;
      case MetaType::Array: {
        if (depth >= kMaxArrayDepth)
          fail("arrays nested more than " + std::to_string(kMaxArrayDepth) + " levels deep (expected at most " +
               std::to_string(kMaxArrayDepth) + ")");
        const auto elem = get<std::uint32_t>("array element type");
        if (elem > kMaxMetaType)
          fail("array element type id " + std::to_string(elem) + " is unknown (expected 0 to " + std::to_string(kMaxMetaType) + ")");
        const std::size_t at = pos_;
        const auto n = get<std::uint64_t>("array length");
        const auto min = min_value_bytes(elem);
        if (n > left() / min)
          fail("array length " + std::to_string(n) + " at byte " + std::to_string(at) + " needs at least " +
               u128_str(static_cast<unsigned __int128>(n) * min) + " bytes, but only " + std::to_string(left()) +
               " are left in the file (expected a length that fits)");
        v.elem = static_cast<MetaType>(elem);
        if (const std::size_t w = meta_scalar_bytes(v.elem)) {
          // Scalars: the items' bytes as stored (the length check above keeps them inside the file).
          PackedArray p;
          p.bytes.resize(static_cast<std::size_t>(n) * w);
          if (n) std::memcpy(p.bytes.data(), data_ + pos_, p.bytes.size());
          if (v.elem == MetaType::Bool)
            for (std::size_t i = 0; i < p.bytes.size(); ++i)
              if (p.bytes[i] > 1)
                fail("bool value at byte " + std::to_string(pos_ + i) + " is " + std::to_string(p.bytes[i]) + " (expected 0 or 1)");
          pos_ += p.bytes.size();
          v.value = std::move(p);
          break;
        }
        if (v.elem == MetaType::String) {
          // Strings: their bytes back to back and where each ends; ~8 bytes per item beside the text,
          // which the file's own u64 length per item already costs.
          PackedArray p;
          p.ends.reserve(static_cast<std::size_t>(n));
          items_.push_back(0);
          for (std::uint64_t i = 0; i < n; ++i) {
            items_.back() = i;
            const std::size_t at_len = pos_;
            const auto len = get<std::uint64_t>("string length");
            if (len > left())
              fail("string length " + std::to_string(len) + " at byte " + std::to_string(at_len) + " runs past the end of the file (" +
                   std::to_string(left()) + " bytes left)");
            const auto* b = reinterpret_cast<const unsigned char*>(data_ + pos_);
            p.bytes.insert(p.bytes.end(), b, b + len);
            pos_ += static_cast<std::size_t>(len);
            p.ends.push_back(p.bytes.size());
          }
          items_.pop_back();
          p.bytes.shrink_to_fit();
          v.value = std::move(p);
          break;
        }
        std::vector<MetaValue> items;
        items.reserve(static_cast<std::size_t>(n));
        items_.push_back(0);
        for (std::uint64_t i = 0; i < n; ++i) {
          items_.back() = i;
          items.push_back(value(elem, depth + 1));
        }
        items_.pop_back();
        v.value = std::move(items);
        break;
      }
      default:
        fail("value type id " + std::to_string(type) + " is unknown (expected 0 to " + std::to_string(kMaxMetaType) + ")");
    }
    return v;
  }

 private:
  const std::string& path_;
  const std::byte* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::string ctx_;
  std::vector<std::uint64_t> items_;
  std::uint64_t n_values_ = 0;
};

}  // namespace

std::string_view ggml_type_name(std::uint32_t id) {
  // ggml.h's enum ggml_type; gaps are ids ggml has retired.
  static constexpr std::string_view kNames[] = {
      "F32",     "F16",    "Q4_0",    "Q4_1",  "",       "",       "Q5_0",   "Q5_1",    "Q8_0",    "Q8_1",
      "Q2_K",    "Q3_K",   "Q4_K",    "Q5_K",  "Q6_K",   "Q8_K",   "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL",  "IQ3_S",  "IQ2_S",   "IQ4_XS", "I8",    "I16",    "I32",    "I64",     "F64",     "IQ1_M",
      "BF16",    "",       "",        "",      "TQ1_0",  "TQ2_0"};
  return id < std::size(kNames) ? kNames[id] : std::string_view{};
}

bool is_gguf(const std::byte* data, std::size_t size) { return size >= 4 && std::memcmp(data, "GGUF", 4) == 0; }

GgufFile::GgufFile(std::string path, const std::byte* data, std::size_t size)
    : path_(std::move(path)), data_(data), size_(size) {
  metadata_.source = path_;
  Parser p(path_, data, size);
  try {
    if (!is_gguf(data, size)) {
      std::string found = size >= 4 ? "'" + printable(std::string_view(reinterpret_cast<const char*>(data), 4)) + "'"
                                    : "only " + std::to_string(size) + " bytes";
      p.fail("not a GGUF file (expected the magic 'GGUF' at byte 0, found " + found + ")");
    }
    p.get<std::uint32_t>("magic");
    version_ = p.get<std::uint32_t>("version");
    if (version_ != 2 && version_ != 3) {
      if ((version_ & 0xffffu) == 0 && (__builtin_bswap32(version_) == 2 || __builtin_bswap32(version_) == 3))
        p.fail("the version field reads " + std::to_string(version_) +
               ": a big-endian GGUF file, which glassbox does not read (expected a little-endian file)");
      p.fail("GGUF version " + std::to_string(version_) + " is not supported (expected 2 or 3)");
    }
    const auto n_tensors = p.get<std::uint64_t>("tensor count");
    const auto n_kv = p.get<std::uint64_t>("metadata kv count");
    // A tensor info is at least a 1-byte name with its length, n_dims, one ne, type and offset.
    constexpr std::uint64_t kMinTensorInfo = 8 + 1 + 4 + 8 + 4 + 8;
    constexpr std::uint64_t kMinKv = 8 + 1 + 4 + 1;
    if (n_kv > p.left() / kMinKv)
      p.fail("metadata kv count " + std::to_string(n_kv) + " at byte 16 cannot fit in the " + std::to_string(p.left()) +
             " bytes left (each kv takes at least " + std::to_string(kMinKv) + " bytes)");
    if (n_tensors > p.left() / kMinTensorInfo)
      p.fail("tensor count " + std::to_string(n_tensors) + " at byte 8 cannot fit in the " + std::to_string(p.left()) +
             " bytes left (each tensor info takes at least " + std::to_string(kMinTensorInfo) + " bytes)");

    for (std::uint64_t i = 0; i < n_kv; ++i) {
      p.set_context("metadata kv " + std::to_string(i));
      std::string key = p.str("key", kMaxKeyBytes);
      if (key.empty()) p.fail("the key is empty (expected a name such as general.architecture)");
      p.set_context("metadata '" + printable(key) + "'");
      if (metadata_.has(key)) p.fail("duplicate key (expected each key once)");
      const auto type = p.get<std::uint32_t>("value type");
      if (type > kMaxMetaType)
        p.fail("value type id " + std::to_string(type) + " is unknown (expected 0 to " + std::to_string(kMaxMetaType) + ")");
      metadata_.set(std::move(key), p.value(type, 0));
    }

    p.set_context("metadata 'general.alignment'");
    if (const MetaValue* a = metadata_.find("general.alignment")) {
      if (a->type != MetaType::U32) p.fail("has type " + std::string(meta_type_name(a->type)) + " (expected u32)");
      alignment_ = std::get<std::uint64_t>(a->value);
      if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
        p.fail("is " + std::to_string(alignment_) + " (expected a power of two)");
    }

    tensors_.reserve(static_cast<std::size_t>(n_tensors));
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
      p.set_context("tensor info " + std::to_string(i));
      GgufTensorInfo t;
      t.name = p.str("tensor name", kMaxTensorNameBytes);
      if (t.name.empty()) p.fail("the tensor name is empty (expected a name such as token_embd.weight)");
      p.set_context("tensor '" + printable(t.name) + "'");
      if (by_name_.count(t.name)) p.fail("duplicate tensor name (expected each name once)");
      const auto n_dims = p.get<std::uint32_t>("n_dims");
      if (n_dims < 1 || n_dims > 4) p.fail("n_dims is " + std::to_string(n_dims) + " (expected 1 to 4)");
      t.n_dims = static_cast<int>(n_dims);
      t.ne.fill(1);
      std::int64_t numel = 1;
      std::string dims;
      for (std::uint32_t d = 0; d < n_dims; ++d) {
        const auto ne = p.get<std::uint64_t>("ne");
        const std::string field = "ne[" + std::to_string(d) + "]";
        if (ne == 0) p.fail(field + " is 0 (expected at least 1: an empty weight tensor is not usable)");
        if (ne > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          p.fail(field + " is " + std::to_string(ne) + " (expected less than 2^63)");
        t.ne[d] = static_cast<std::int64_t>(ne);
        dims += (d ? ", " : "") + std::to_string(ne);
        if (__builtin_mul_overflow(numel, t.ne[d], &numel))
          p.fail(field + " = " + std::to_string(ne) + " makes the element count overflow 2^63 (expected a size that fits the file)");
      }
      const auto type = p.get<std::uint32_t>("type");
      const DTypeInfo* info = dtype_info(type);
      if (!info)
        p.fail("type " + type_desc(type) + " is not supported (expected one of " + supported_dtypes() + ")");
      t.dtype = info->type;
      if (t.ne[0] % static_cast<std::int64_t>(info->block_values) != 0)
        p.fail("ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of " + std::string(info->name) + "'s block of " +
               std::to_string(info->block_values) + " values (expected whole blocks per row)");
      const auto blocks = static_cast<std::uint64_t>(numel) / info->block_values;
      if (blocks > size / info->block_bytes)
        p.fail("shape [" + dims + "] of " + std::string(info->name) + " needs " +
               u128_str(static_cast<unsigned __int128>(blocks) * info->block_bytes) + " bytes, more than the whole file (" +
               std::to_string(size) + " bytes)");
      t.bytes = static_cast<std::size_t>(blocks * info->block_bytes);
      t.offset = p.get<std::uint64_t>("offset");
      if (t.offset % alignment_ != 0)
        p.fail("data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(alignment_) +
               " (expected aligned tensor data)");
      by_name_.emplace(t.name, tensors_.size());
      tensors_.push_back(std::move(t));
    }

    p.set_context("");
    const auto pad = (alignment_ - p.pos() % alignment_) % alignment_;
    if (pad > p.left())
      p.fail("the padding after the tensor infos (byte " + std::to_string(p.pos()) + ", to a multiple of " +
             std::to_string(alignment_) + ") runs past the end of the file (" + std::to_string(size) +
             " bytes; expected the tensor data to follow)");
    data_offset_ = p.pos() + static_cast<std::size_t>(pad);

    const std::size_t room = size - data_offset_;
    for (const auto& t : tensors_) {
      if (t.offset > room || t.bytes > room - t.offset) {
        const auto begin = static_cast<unsigned __int128>(data_offset_) + t.offset;
        throw ModelError(path_ + ": tensor '" + printable(t.name) + "' data [" + u128_str(begin) + ", " + u128_str(begin + t.bytes) +
                         ") extends past the end of the file (" + std::to_string(size) + " bytes)");
      }
    }
    std::vector<std::size_t> order(tensors_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return tensors_[a].offset < tensors_[b].offset; });
    for (std::size_t i = 1; i < order.size(); ++i) {
      const auto& a = tensors_[order[i - 1]];
      const auto& b = tensors_[order[i]];
      if (a.offset + a.bytes > b.offset)
        throw ModelError(path_ + ": tensors '" + printable(a.name) + "' [" + std::to_string(data_offset_ + a.offset) + ", " +
                         std::to_string(data_offset_ + a.offset + a.bytes) + ") and '" + printable(b.name) + "' [" +
                         std::to_string(data_offset_ + b.offset) + ", " + std::to_string(data_offset_ + b.offset + b.bytes) +
                         ") overlap (expected disjoint tensor data)");
    }
  } catch (const std::bad_alloc&) {
    // Sizes are bounded by the file size first, so this means the metadata really is that big.
    throw ModelError(path_ + ": out of memory while reading the GGUF header at byte " + std::to_string(p.pos()) +
                     " (expected metadata that fits in memory)");
  } catch (const std::length_error&) {
    throw ModelError(path_ + ": a length in the GGUF header at byte " + std::to_string(p.pos()) + " is too large");
  }
}

const GgufTensorInfo* GgufFile::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::tensor(const GgufTensorInfo& info) const {
  Tensor t;
  t.name = info.name;
  t.dtype = info.dtype;
  t.n_dims = info.n_dims;
  for (int i = 0; i < info.n_dims; ++i) t.shape[i] = info.ne[info.n_dims - 1 - i];
  t.data = data_ + data_offset_ + info.offset;
  t.bytes = info.bytes;
  return t;
}

// ---- writer ----

namespace {

[[noreturn]] void writer_fail(const std::string& what) { throw ModelError("GGUF writer: " + what); }

class Out {
 public:
  std::string buf;
  template <class T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    buf.append(b, sizeof(T));
  }
  void str(std::string_view s) {
    put<std::uint64_t>(s.size());
    buf.append(s);
  }
  void pad_to(std::uint64_t alignment) { buf.append((alignment - buf.size() % alignment) % alignment, '\0'); }
};

[[noreturn]] void meta_fail(const std::string& file, const std::string& where, const std::string& what) {
  throw ModelError(file + ": metadata " + where + ": " + what);
}

// Serialises one value of type `type` (an array item has its parent's element type), checking
// that the variant holds what the type needs and that integers fit.
void put_value(Out& o, const std::string& file, const std::string& where, MetaType type, const MetaValue& v, int depth) {
  auto bad = [&](const std::string& what) { meta_fail(file, where, what); };
  if (v.type != type)
    bad("holds a " + std::string(meta_type_name(v.type)) + " where its array declares " + std::string(meta_type_name(type)));
  auto as_i = [&](std::int64_t lo, std::int64_t hi) -> std::int64_t {
    if (auto* i = std::get_if<std::int64_t>(&v.value); i && *i >= lo && *i <= hi) return *i;
    if (auto* u = std::get_if<std::uint64_t>(&v.value); u && *u <= static_cast<std::uint64_t>(hi)) return static_cast<std::int64_t>(*u);
    meta_fail(file, where, v.to_string() + " does not fit " + std::string(meta_type_name(type)));
  };
  auto as_u = [&](std::uint64_t hi) -> std::uint64_t {
    if (auto* u = std::get_if<std::uint64_t>(&v.value); u && *u <= hi) return *u;
    if (auto* i = std::get_if<std::int64_t>(&v.value); i && *i >= 0 && static_cast<std::uint64_t>(*i) <= hi) return static_cast<std::uint64_t>(*i);
    meta_fail(file, where, v.to_string() + " does not fit " + std::string(meta_type_name(type)));
  };
  auto as_f = [&]() -> double {
    if (auto* d = std::get_if<double>(&v.value)) return *d;
    meta_fail(file, where, v.to_string() + " is not a floating-point value for " + std::string(meta_type_name(type)));
  };
  switch (type) {
    case MetaType::U8: o.put(static_cast<std::uint8_t>(as_u(0xff))); break;
    case MetaType::I8: o.put(static_cast<std::int8_t>(as_i(INT8_MIN, INT8_MAX))); break;
    case MetaType::U16: o.put(static_cast<std::uint16_t>(as_u(0xffff))); break;
    case MetaType::I16: o.put(static_cast<std::int16_t>(as_i(INT16_MIN, INT16_MAX))); break;
    case MetaType::U32: o.put(static_cast<std::uint32_t>(as_u(0xffffffffu))); break;
    case MetaType::I32: o.put(static_cast<std::int32_t>(as_i(INT32_MIN, INT32_MAX))); break;
    case MetaType::U64: o.put(as_u(UINT64_MAX)); break;
    case MetaType::I64: o.put(as_i(INT64_MIN, INT64_MAX)); break;
    case MetaType::F32: o.put(static_cast<float>(as_f())); break;
    case MetaType::F64: o.put(as_f()); break;
    case MetaType::Bool: {
      auto* b = std::get_if<bool>(&v.value);
      if (!b) meta_fail(file, where, "is not a bool value");
      o.put<std::uint8_t>(*b ? 1 : 0);
      break;
    }
    case MetaType::String: {
      auto* s = std::get_if<std::string>(&v.value);
      if (!s) meta_fail(file, where, "is not a string value");
      o.str(*s);
      break;
    }
    case MetaType::Array: {
      if (!v.array() && !std::holds_alternative<PackedArray>(v.value)) meta_fail(file, where, "is not an array value");
      if (depth >= kMaxArrayDepth) bad("arrays nested more than " + std::to_string(kMaxArrayDepth) + " levels deep");
      if (static_cast<std::uint32_t>(v.elem) > kMaxMetaType) bad("has an unknown element type");
      o.put(static_cast<std::uint32_t>(v.elem));
      const std::size_t n = v.size();
      o.put<std::uint64_t>(n);
      if (const auto* a = v.array())
        for (std::size_t i = 0; i < n; ++i) put_value(o, file, where + " item " + std::to_string(i), v.elem, (*a)[i], depth + 1);
      else
        for (std::size_t i = 0; i < n; ++i) put_value(o, file, where + " item " + std::to_string(i), v.elem, v.item(i), depth + 1);
      break;
    }
    default: bad("has an unknown type id " + std::to_string(static_cast<std::uint32_t>(type)));
  }
}

}  // namespace

void GgufWriter::set(std::string key, MetaValue v) { metadata_.set(std::move(key), std::move(v)); }

void GgufWriter::add_tensor(std::string name, DType t, std::vector<std::int64_t> shape, std::vector<std::byte> data) {
  if (name.empty() || name.size() > kMaxTensorNameBytes)
    writer_fail("tensor name '" + printable(name) + "' has " + std::to_string(name.size()) + " bytes (expected 1 to 65535)");
  for (const auto& p : tensors_)
    if (p.name == name) writer_fail("duplicate tensor '" + printable(name) + "'");
  if (shape.empty() || shape.size() > 4)
    writer_fail("tensor '" + printable(name) + "' has " + std::to_string(shape.size()) + " dimensions (expected 1 to 4)");
  const auto& info = dtype_info(t);
  std::int64_t numel = 1;
  for (auto d : shape)
    if (d < 1 || __builtin_mul_overflow(numel, d, &numel))
      writer_fail("tensor '" + printable(name) + "' has a dimension " + std::to_string(d) + " (expected sizes >= 1 that do not overflow)");
  if (shape.back() % static_cast<std::int64_t>(info.block_values) != 0)
    writer_fail("tensor '" + printable(name) + "' rows of " + std::to_string(shape.back()) + " values are not a multiple of " +
                std::string(info.name) + "'s block of " + std::to_string(info.block_values));
  const auto bytes = static_cast<std::uint64_t>(numel) / info.block_values * info.block_bytes;
  if (data.size() != bytes)
    writer_fail("tensor '" + printable(name) + "' has " + std::to_string(data.size()) + " bytes of data (expected " +
                std::to_string(bytes) + " for " + std::string(info.name) + ")");
  tensors_.push_back({std::move(name), t, std::move(shape), std::move(data)});
}

void GgufWriter::write(const std::filesystem::path& path, std::uint32_t alignment) const {
  const std::string where = path.string();
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw ModelError(where + ": alignment " + std::to_string(alignment) + " is not a power of two (expected e.g. 32)");

  Metadata meta = metadata_;
  const MetaValue align_value{MetaType::U32, MetaType::U8, std::uint64_t{alignment}};
  if (alignment != kDefaultAlignment || meta.has("general.alignment")) meta.set("general.alignment", align_value);

  Out o;
  o.buf.append("GGUF");
  o.put<std::uint32_t>(3);
  o.put<std::uint64_t>(tensors_.size());
  o.put<std::uint64_t>(meta.entries().size());
  for (const auto& [key, v] : meta.entries()) {
    if (key.empty() || key.size() > kMaxKeyBytes)
      throw ModelError(where + ": metadata key '" + printable(key) + "' has " + std::to_string(key.size()) +
                       " bytes (expected 1 to 65535)");
    o.str(key);
    o.put(static_cast<std::uint32_t>(v.type));
    put_value(o, where, "'" + printable(key) + "'", v.type, v, 0);
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    o.str(t.name);
    o.put<std::uint32_t>(static_cast<std::uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) o.put<std::uint64_t>(static_cast<std::uint64_t>(*it));
    o.put(static_cast<std::uint32_t>(t.dtype));
    o.put<std::uint64_t>(offset);
    offset += (t.data.size() + alignment - 1) / alignment * alignment;
  }
  o.pad_to(alignment);

  // Through OutputFile, the rule for every output (file_io.hpp): never over an input or a FIFO/device,
  // a temporary file renamed only when complete, removed on failure or signal.
  // Its errors stay ModelErrors, as the writer's API says (the message names the file either way).
  try {
    OutputFile out(path);
    out.write({o.buf.data(), o.buf.size()});
    static const char zeros[4096] = {};
    for (const auto& t : tensors_) {
      out.write({reinterpret_cast<const char*>(t.data.data()), t.data.size()});
      std::size_t pad = (alignment - t.data.size() % alignment) % alignment;
      while (pad > 0) {
        const std::size_t n = std::min(pad, sizeof zeros);
        out.write({zeros, n});
        pad -= n;
      }
    }
    out.commit();
  } catch (const OutputError& e) {
    throw ModelError(e.what());
  }
}

}  // namespace glassbox
