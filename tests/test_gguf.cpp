// The GGUF reader against gguf-py's listing of the reference files (TENSORS.txt) and the llama2.c
// checkpoints, the writer (hand-built bytes, round trips, ggml's layout), and malformed files.
#define BOOST_TEST_MODULE gguf
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>

#include "glassbox/error.hpp"
#include "glassbox/model/gguf.hpp"
#include "support.hpp"

// The largest single heap request since the last reset: a parser that reserves before it checks
// a count shows up here even when the allocation happens to succeed. (GCC cannot see that this
// operator new pairs with the free() below.)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
static std::atomic<std::size_t> g_largest_alloc{0};
void* operator new(std::size_t n) {
  std::size_t cur = g_largest_alloc.load(std::memory_order_relaxed);
  while (n > cur && !g_largest_alloc.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

BOOST_TEST_DONT_PRINT_LOG_VALUE(glassbox::MetaType)
BOOST_TEST_DONT_PRINT_LOG_VALUE(glassbox::DType)

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using glassbox::DType;
using glassbox::GgufFile;
using glassbox::GgufWriter;
using glassbox::MetaType;
using glassbox::MetaValue;
using glassbox::ModelError;

namespace {

const std::vector<std::string> kFiles = {
    "stories260K-f32.gguf", "stories260K-f16.gguf",  "stories260K-q8_0.gguf",  "stories260K-q4_0.gguf",
    "synth128-f32.gguf",    "synth128-f16.gguf",     "synth128-q8_0.gguf",     "synth128-q4_0.gguf",
    "synth256-f32.gguf",    "synth256-q8_0.gguf",    "synth256-q6_k.gguf",     "synth256-q5_k_m.gguf",
    "synth256-q4_k_m.gguf"};

const std::byte* bytes_of(const std::string& s) { return reinterpret_cast<const std::byte*>(s.data()); }

// ---- TENSORS.txt (written by gguf-py's GGUFReader) ----

struct ExpectedTensor {
  std::string name, type;
  std::vector<std::int64_t> ne;
  std::uint64_t offset = 0, file_byte = 0, nbytes = 0;
};
struct ExpectedFile {
  std::string file;
  std::size_t bytes = 0, n_kv = 0, n_tensors = 0, data_start = 0;
  unsigned version = 0;
  std::uint64_t alignment = 0;
  std::vector<std::pair<std::string, std::string>> kvs;
  std::vector<ExpectedTensor> tensors;
};

std::map<std::string, ExpectedFile> listing() {
  std::map<std::string, ExpectedFile> out;
  std::istringstream in(gbtest::read_file(gbtest::shared("gguf/TENSORS.txt")));
  std::string line;
  ExpectedFile* cur = nullptr;
  while (std::getline(in, line)) {
    if (line.rfind("== ", 0) == 0) {
      ExpectedFile f;
      char name[256];
      unsigned long long bytes, n_kv, n_tensors, align, start;
      BOOST_REQUIRE_MESSAGE(std::sscanf(line.c_str(), "== %255s (%llu bytes; GGUF v%u; %llu kv; %llu tensors; alignment %llu; "
                                        "tensor data starts at byte %llu)",
                                        name, &bytes, &f.version, &n_kv, &n_tensors, &align, &start) == 7,
                            "unparsed TENSORS.txt line: " << line);
      f.file = name;
      f.bytes = bytes, f.n_kv = n_kv, f.n_tensors = n_tensors, f.alignment = align, f.data_start = start;
      cur = &(out[f.file] = f);
    } else if (line.rfind("  kv ", 0) == 0) {
      BOOST_REQUIRE(cur);
      const auto eq = line.find(" = ");
      BOOST_REQUIRE(eq != std::string::npos);
      std::string value = line.substr(eq + 3);
      if (auto note = value.find("  ("); note != std::string::npos) value.resize(note);  // "1  (MOSTLY_F16)"
      cur->kvs.emplace_back(line.substr(5, eq - 5), value);
    } else if (line.rfind("  tensor ", 0) == 0) {
      BOOST_REQUIRE(cur);
      ExpectedTensor t;
      std::istringstream ls(line.substr(9));
      std::string ne;
      ls >> t.name >> t.type >> ne;
      BOOST_REQUIRE(ne.rfind("ne=[", 0) == 0);
      std::string dims = ne.substr(4);
      while (dims.back() != ']') {  // "ne=[64, 512]" splits at the space
        std::string more;
        ls >> more;
        dims += " " + more;
      }
      std::istringstream ds(dims);
      std::int64_t d;
      char sep;
      while (ds >> d) {
        t.ne.push_back(d);
        ds >> sep;
      }
      std::string rest;
      std::getline(ls, rest);
      unsigned long long off, fb, nb;
      BOOST_REQUIRE_MESSAGE(std::sscanf(rest.c_str(), " offset= %llu (file byte %llu) nbytes=%llu", &off, &fb, &nb) == 3,
                            "unparsed TENSORS.txt line: " << line);
      t.offset = off, t.file_byte = fb, t.nbytes = nb;
      cur->tensors.push_back(t);
    }
  }
  return out;
}

// Compares a parsed value with gguf-py's printed form of a scalar (or "array[N]").
void check_kv(const std::string& key, const MetaValue& v, const std::string& want) {
  BOOST_TEST_CONTEXT("kv " << key << " = " << want) {
    if (want.rfind("array[", 0) == 0) {
      BOOST_REQUIRE(v.is_array());
      BOOST_TEST(std::to_string(v.size()) == want.substr(6, want.size() - 7));
    } else if (auto* s = std::get_if<std::string>(&v.value)) {
      BOOST_TEST(*s == want);
    } else if (auto* u = std::get_if<std::uint64_t>(&v.value)) {
      BOOST_TEST(std::to_string(*u) == want);
    } else if (auto* i = std::get_if<std::int64_t>(&v.value)) {
      BOOST_TEST(std::to_string(*i) == want);
    } else if (auto* d = std::get_if<double>(&v.value)) {
      BOOST_TEST(*d == std::stod(want));  // gguf-py prints the f32 widened to double: exact
    } else if (auto* b = std::get_if<bool>(&v.value)) {
      BOOST_TEST((*b ? "True" : "False") == want);
    } else {
      BOOST_FAIL("unexpected value kind");
    }
  }
}

// ---- helpers for building files byte by byte (independent of GgufWriter) ----

std::string le32(std::uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string le64(std::uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string gstr(const std::string& s) { return le64(s.size()) + s; }

// Type ids as GGUF numbers them, spelled out here rather than taken from MetaType.
constexpr std::uint32_t kU16 = 2, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9;
constexpr std::uint32_t kGgmlF32 = 0, kGgmlQ8_0 = 8;

struct RawKv {
  std::string key;
  std::uint32_t type;
  std::string payload;  // the encoded value
};
struct RawTensor {
  std::string name;
  std::vector<std::uint64_t> ne;
  std::uint32_t type;
  std::uint64_t offset;
  std::optional<std::uint32_t> n_dims;  // default ne.size()
};
struct RawFile {
  std::string magic = "GGUF";
  std::uint32_t version = 3;
  std::optional<std::uint64_t> n_tensors, n_kv;
  std::vector<RawKv> kvs;
  std::vector<RawTensor> tensors;
  std::uint64_t pad_to = 32;
  std::size_t data_bytes = 256;

  std::size_t header_bytes() const { return bytes().size() - data_bytes; }
  std::string bytes() const {
    std::string b = magic + le32(version) + le64(n_tensors.value_or(tensors.size())) + le64(n_kv.value_or(kvs.size()));
    for (const auto& kv : kvs) b += gstr(kv.key) + le32(kv.type) + kv.payload;
    for (const auto& t : tensors) {
      b += gstr(t.name) + le32(t.n_dims.value_or(static_cast<std::uint32_t>(t.ne.size())));
      for (auto d : t.ne) b += le64(d);
      b += le32(t.type) + le64(t.offset);
    }
    b.append((pad_to - b.size() % pad_to) % pad_to, '\0');
    for (std::size_t i = 0; i < data_bytes; ++i) b += static_cast<char>(i * 7 + 1);
    return b;
  }
  RawKv& kv(const std::string& key) {
    for (auto& k : kvs)
      if (k.key == key) return k;
    throw std::logic_error("no kv " + key);
  }
  RawTensor& tensor(const std::string& name) {
    for (auto& t : tensors)
      if (t.name == name) return t;
    throw std::logic_error("no tensor " + name);
  }
};

std::string str_array(const std::vector<std::string>& items) {
  std::string p = le32(kString) + le64(items.size());
  for (const auto& s : items) p += gstr(s);
  return p;
}

// A small valid file: scalar, string, array and nested-array metadata; F32 and Q8_0 tensors
// ending at data byte 228, padded to 256.
RawFile base_file() {
  RawFile f;
  f.kvs = {{"general.architecture", kString, gstr("llama")},
           {"general.name", kString, gstr("NAME_MARKER")},
           {"tokenizer.ggml.tokens", kArray, str_array({"<unk>", "<s>", "</s>"})},
           {"flag", kBool, "\x01"},
           {"scale", kF32, std::string("\x00\x00\x00\x3f", 4)},
           {"ragged", kArray, le32(kArray) + le64(2) + le32(kU16) + le64(2) + std::string("\x01\x00\x02\x00", 4) +
                                  le32(kU16) + le64(1) + std::string("\x03\x00", 2)},
           {"count", kU32, le32(7)}};
  f.tensors = {{"a", {8, 4}, kGgmlF32, 0, {}}, {"b", {8}, kGgmlF32, 128, {}}, {"c", {32, 2}, kGgmlQ8_0, 160, {}}};
  return f;
}

// Parses `data` as "t.gguf" and returns the ModelError's message; fails the test on success or on
// any other exception. Also checks that parsing never asked for a large block of memory.
std::string parse_error(const std::string& data, std::size_t max_alloc = 1 << 20) {
  g_largest_alloc = 0;
  try {
    GgufFile f("t.gguf", bytes_of(data), data.size());
    BOOST_ERROR("parsed without error");
  } catch (const ModelError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.rfind("t.gguf: ", 0) == 0, msg);
    BOOST_TEST(msg.find('\n') == std::string::npos, msg);
    BOOST_TEST(g_largest_alloc.load() <= max_alloc, "largest allocation " << g_largest_alloc.load() << " for: " << msg);
    return msg;
  } catch (const std::exception& e) {
    BOOST_ERROR("threw a non-ModelError: " << e.what());
  }
  return "";
}

// ---- metadata values for the writer tests ----

MetaValue mu(MetaType t, std::uint64_t v) { return {t, MetaType::U8, v}; }
MetaValue mi(MetaType t, std::int64_t v) { return {t, MetaType::U8, v}; }
MetaValue mf(MetaType t, double v) { return {t, MetaType::U8, v}; }
MetaValue mb(bool v) { return {MetaType::Bool, MetaType::U8, v}; }
MetaValue ms(std::string v) { return {MetaType::String, MetaType::U8, std::move(v)}; }
MetaValue ma(MetaType elem, std::vector<MetaValue> items) { return {MetaType::Array, elem, std::move(items)}; }

bool same(const MetaValue& a, const MetaValue& b) {
  if (a.type != b.type) return false;
  if (a.type != MetaType::Array)
    return a.value.index() == b.value.index() &&
           std::visit(
               [&](const auto& x) {
                 using X = std::decay_t<decltype(x)>;
                 if constexpr (std::is_same_v<X, std::vector<MetaValue>> || std::is_same_v<X, glassbox::PackedArray>) return false;
                 else return x == std::get<X>(b.value);
               },
               a.value);
  // An array read back is packed where the one written was a vector: compare item by item.
  if (a.elem != b.elem || a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!same(a.item(i), b.item(i))) return false;
  return true;
}

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
  return out;
}

}  // namespace

// ======================================================================================
BOOST_AUTO_TEST_SUITE(reference_files, *boost::unit_test::precondition(gbtest::NeedsShared()))

BOOST_AUTO_TEST_CASE(listing_covers_every_reference_file) {
  const auto l = listing();
  BOOST_TEST(l.size() == kFiles.size());
  for (const auto& f : kFiles) BOOST_TEST(l.count(f) == 1u, f);
}

// Header, every scalar kv, every tensor's name, type, ne, offset and size against gguf-py.
BOOST_DATA_TEST_CASE(file_matches_gguf_py, bdata::make(kFiles), name) {
  static const auto all = listing();
  const ExpectedFile& want = all.at(name);
  const std::string data = gbtest::read_file(gbtest::shared("gguf/" + name));
  BOOST_REQUIRE_EQUAL(data.size(), want.bytes);
  BOOST_TEST(glassbox::is_gguf(bytes_of(data), data.size()));
  GgufFile f(name, bytes_of(data), data.size());
  BOOST_TEST(f.version() == want.version);
  BOOST_TEST(f.alignment() == want.alignment);
  BOOST_TEST(f.data_offset() == want.data_start);
  BOOST_TEST(f.metadata().source == name);

  const auto& entries = f.metadata().entries();
  BOOST_REQUIRE_EQUAL(entries.size(), want.n_kv);
  BOOST_REQUIRE_EQUAL(want.kvs.size(), want.n_kv);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    BOOST_TEST(entries[i].first == want.kvs[i].first);  // file order
    check_kv(entries[i].first, entries[i].second, want.kvs[i].second);
  }

  BOOST_REQUIRE_EQUAL(f.tensors().size(), want.n_tensors);
  BOOST_REQUIRE_EQUAL(want.tensors.size(), want.n_tensors);
  for (std::size_t i = 0; i < want.tensors.size(); ++i) {
    const auto& w = want.tensors[i];
    const auto& t = f.tensors()[i];
    BOOST_TEST_CONTEXT("tensor " << w.name) {
      BOOST_TEST(t.name == w.name);
      BOOST_TEST(glassbox::dtype_name(t.dtype) == w.type);
      BOOST_REQUIRE_EQUAL(t.n_dims, static_cast<int>(w.ne.size()));
      for (int d = 0; d < t.n_dims; ++d) BOOST_TEST(t.ne[d] == w.ne[d]);
      BOOST_TEST(t.offset == w.offset);
      BOOST_TEST(t.bytes == w.nbytes);
      BOOST_TEST(f.find(w.name) == &t);
      const auto view = f.tensor(t);
      BOOST_TEST(view.data == bytes_of(data) + w.file_byte);
      BOOST_TEST(view.bytes == w.nbytes);
      BOOST_TEST(view.n_dims == t.n_dims);
      for (int d = 0; d < t.n_dims; ++d) BOOST_TEST(view.shape[d] == w.ne[w.ne.size() - 1 - d]);
    }
  }
  BOOST_TEST(f.find("no.such.tensor") == nullptr);

  const auto tokens = f.metadata().get_strings("tokenizer.ggml.tokens");
  BOOST_REQUIRE(tokens);
  BOOST_TEST(tokens->size() == 512u);
  BOOST_TEST((*tokens)[1] == "<s>");
  BOOST_TEST(f.metadata().get_floats("tokenizer.ggml.scores")->size() == 512u);
  BOOST_TEST(f.metadata().find("tokenizer.ggml.scores")->elem == MetaType::F32);
  BOOST_TEST(f.metadata().find("tokenizer.ggml.token_type")->elem == MetaType::I32);
}

// Every F32 tensor is the llama2.c checkpoint's array bit for bit (gguf/README.md: no q/k permutation).
BOOST_DATA_TEST_CASE(f32_tensors_equal_the_llama2c_checkpoint, bdata::make({"stories260K", "synth128", "synth256"}), model) {
  const std::string gguf = gbtest::read_file(gbtest::shared("gguf/" + std::string(model) + "-f32.gguf"));
  const std::string bin = gbtest::read_file(gbtest::shared("models/" + std::string(model) + ".bin"));
  GgufFile f("f32.gguf", bytes_of(gguf), gguf.size());
  BOOST_REQUIRE_GE(bin.size(), 28u);
  std::int32_t h[7];
  std::memcpy(h, bin.data(), sizeof h);
  const std::int64_t dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4], vocab = h[5], seq = h[6];
  BOOST_REQUIRE(vocab > 0);  // shared classifier
  const std::int64_t kv_dim = dim * kv_heads / heads;
  std::size_t at = 28;
  int compared = 0;
  // Takes the next `count` matrices of {rows, cols} floats and compares each with the GGUF tensor.
  auto take = [&](const std::string& pattern, std::int64_t count, std::int64_t rows, std::int64_t cols) {
    const std::size_t n = static_cast<std::size_t>(rows * cols) * 4;
    for (std::int64_t l = 0; l < count; ++l) {
      std::string name = pattern;
      if (auto p = name.find('#'); p != std::string::npos) name.replace(p, 1, std::to_string(l));
      BOOST_TEST_CONTEXT(name) {
        const auto* info = f.find(name);
        BOOST_REQUIRE(info);
        const auto t = f.tensor(*info);
        BOOST_TEST(t.dtype == DType::F32);
        if (rows == 1) {
          BOOST_TEST(t.n_dims == 1);
          BOOST_TEST(t.shape[0] == cols);
        } else {
          BOOST_TEST(t.n_dims == 2);
          BOOST_TEST(t.shape[0] == rows);
          BOOST_TEST(t.shape[1] == cols);
        }
        BOOST_REQUIRE_EQUAL(t.bytes, n);
        BOOST_REQUIRE_LE(at + n, bin.size());
        BOOST_TEST(std::memcmp(t.data, bin.data() + at, n) == 0);
        ++compared;
      }
      at += n;
    }
  };
  const std::size_t embedding_at = at;
  take("token_embd.weight", 1, vocab, dim);
  take("blk.#.attn_norm.weight", layers, 1, dim);
  take("blk.#.attn_q.weight", layers, dim, dim);
  take("blk.#.attn_k.weight", layers, kv_dim, dim);
  take("blk.#.attn_v.weight", layers, kv_dim, dim);
  take("blk.#.attn_output.weight", layers, dim, dim);
  take("blk.#.ffn_norm.weight", layers, 1, dim);
  take("blk.#.ffn_gate.weight", layers, hidden, dim);
  take("blk.#.ffn_down.weight", layers, dim, hidden);
  take("blk.#.ffn_up.weight", layers, hidden, dim);
  take("output_norm.weight", 1, 1, dim);
  at += static_cast<std::size_t>(seq * (dim / heads)) * 4;  // freq_cis_real and _imag (unused)
  BOOST_TEST(at == bin.size());
  at = embedding_at;
  take("output.weight", 1, vocab, dim);  // the shared classifier, written out again
  BOOST_TEST(compared == static_cast<int>(f.tensors().size()));
}

// Reading a reference file and writing it back with GgufWriter gives the same bytes: the writer
// lays files out as ggml's gguf writer does (metadata order, offsets, padding).
BOOST_DATA_TEST_CASE(writer_reproduces_ggml_files_byte_for_byte, bdata::make(kFiles), name) {
  const std::string data = gbtest::read_file(gbtest::shared("gguf/" + name));
  GgufFile f(name, bytes_of(data), data.size());
  GgufWriter w;
  for (const auto& [k, v] : f.metadata().entries()) w.set(k, v);
  for (const auto& info : f.tensors()) {
    const auto t = f.tensor(info);
    w.add_tensor(t.name, t.dtype, std::vector<std::int64_t>(t.shape.begin(), t.shape.begin() + t.n_dims),
                 std::vector<std::byte>(t.data, t.data + t.bytes));
  }
  const fs::path dir = gbtest::temp_dir("gguf-rewrite");
  w.write(dir / name);
  const std::string again = gbtest::read_file(dir / name);
  BOOST_TEST(again.size() == data.size());
  BOOST_TEST((again == data));
  fs::remove_all(dir);
}

// Truncation at every byte of the first 4 KB of a real file and at 200 points through the rest of
// its header and data: always a ModelError, never a crash or a large allocation.
BOOST_AUTO_TEST_CASE(truncated_reference_file_is_refused) {
  const std::string data = gbtest::read_file(gbtest::shared("gguf/stories260K-q4_0.gguf"));
  GgufFile full("t.gguf", bytes_of(data), data.size());
  std::size_t data_end = 0;
  for (const auto& t : full.tensors()) data_end = std::max<std::size_t>(data_end, full.data_offset() + t.offset + t.bytes);
  std::vector<std::size_t> cuts;
  for (std::size_t n = 0; n < 4096; ++n) cuts.push_back(n);
  for (int i = 0; i < 200; ++i) cuts.push_back(4096 + (data_end - 4096) * i / 200);
  cuts.push_back(full.data_offset() - 1);
  cuts.push_back(data_end - 1);
  for (auto n : cuts) {
    BOOST_TEST_CONTEXT("cut at " << n) { parse_error(data.substr(0, n), 1 << 20); }
  }
  // The last tensor's trailing padding carries no data: a file cut there still reads.
  BOOST_CHECK_NO_THROW(GgufFile("t.gguf", bytes_of(data), data_end));
}

// Random byte changes in the header region: each parses or throws ModelError; nothing else.
BOOST_AUTO_TEST_CASE(mutated_reference_header_never_crashes) {
  const std::string data = gbtest::read_file(gbtest::shared("gguf/stories260K-q4_0.gguf"));
  GgufFile full("t.gguf", bytes_of(data), data.size());
  std::mt19937 rng(7);
  int refused = 0, read = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string m = data;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      const auto pos = rng() % full.data_offset();
      m[pos] = static_cast<char>(rng() % 4 == 0 ? 0xff : rng() & 0xff);
    }
    g_largest_alloc = 0;
    try {
      GgufFile f("t.gguf", bytes_of(m), m.size());
      ++read;
    } catch (const ModelError&) {
      ++refused;
    }
    BOOST_TEST_REQUIRE(g_largest_alloc.load() <= (std::size_t{16} << 20));
  }
  BOOST_TEST_MESSAGE("3000 mutated headers: " << refused << " refused, " << read << " read");
  BOOST_TEST(refused > 100);
}

BOOST_AUTO_TEST_SUITE_END()

// ======================================================================================
BOOST_AUTO_TEST_SUITE(writer)

// The smallest file with a kv and a tensor, byte by byte as the GGUF spec lays it out.
BOOST_AUTO_TEST_CASE(writes_the_documented_layout) {
  GgufWriter w;
  w.set("a", mu(MetaType::U32, 7));
  const float values[2] = {1.0f, 2.0f};
  std::vector<std::byte> data(8);
  std::memcpy(data.data(), values, 8);
  w.add_tensor("t", DType::F32, {2}, data);
  const fs::path dir = gbtest::temp_dir("gguf-layout");
  w.write(dir / "x.gguf");
  std::string want = "GGUF" + le32(3) + le64(1) + le64(1);   // header
  want += gstr("a") + le32(kU32) + le32(7);                    // kv
  want += gstr("t") + le32(1) + le64(2) + le32(0) + le64(0);   // tensor info: F32 [2] at 0
  BOOST_REQUIRE_EQUAL(want.size(), 74u);
  want.append(96 - 74, '\0');                                  // pad to 32
  want += std::string(reinterpret_cast<const char*>(values), 8);
  want.append(128 - 104, '\0');                                // the tensor padded to 32
  BOOST_TEST((gbtest::read_file(dir / "x.gguf") == want));
  // The folder holds the file and no temporary leftovers.
  BOOST_TEST(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  fs::remove_all(dir);
}

// Every value type (nested arrays, strings with NUL and UTF-8) and tensors of several types come
// back as written, with the file and every tensor aligned.
BOOST_DATA_TEST_CASE(round_trip, bdata::make({1u, 8u, 32u, 64u, 256u}), alignment) {
  GgufWriter w;
  w.set("general.architecture", ms("llama"));
  w.set("u8", mu(MetaType::U8, 200));
  w.set("i8", mi(MetaType::I8, -100));
  w.set("u16", mu(MetaType::U16, 60000));
  w.set("i16", mi(MetaType::I16, -30000));
  w.set("u32", mu(MetaType::U32, 4000000000u));
  w.set("i32", mi(MetaType::I32, -2000000000));
  w.set("u64", mu(MetaType::U64, (std::uint64_t{1} << 63) + 5));
  w.set("i64", mi(MetaType::I64, INT64_MIN));
  w.set("f32", mf(MetaType::F32, static_cast<double>(0.1f)));
  w.set("f64", mf(MetaType::F64, M_PI));
  w.set("yes", mb(true));
  w.set("no", mb(false));
  w.set("text", ms(std::string("a\0b \xe2\x96\x81\xc3\xa9 \xf0\x9f\x98\x80", 14)));
  w.set("empty", ms(""));
  w.set("clé.\xe2\x96\x81", ms("utf-8 key"));
  w.set("no_items", ma(MetaType::U8, {}));
  w.set("strings", ma(MetaType::String, {ms("<s>"), ms(""), ms(std::string("\0\0", 2))}));
  w.set("ints", ma(MetaType::I32, {mi(MetaType::I32, -1), mi(MetaType::I32, 2)}));
  w.set("floats", ma(MetaType::F32, {mf(MetaType::F32, 0.5), mf(MetaType::F32, -1.25)}));
  w.set("bools", ma(MetaType::Bool, {mb(true), mb(false)}));
  w.set("ragged", ma(MetaType::Array, {ma(MetaType::U16, {mu(MetaType::U16, 1), mu(MetaType::U16, 2)}),
                                       ma(MetaType::U16, {}), ma(MetaType::String, {ms("x")})}));
  w.set("deep", ma(MetaType::Array, {ma(MetaType::Array, {ma(MetaType::String, {ms("deepest")})})}));
  w.set("u8", mu(MetaType::U8, 201));  // replaces the value, keeps the position

  struct T {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::size_t bytes;
  };
  const std::vector<T> tensors = {{"w.f32", DType::F32, {3, 5}, 60},     {"v.f16", DType::F16, {7}, 14},
                                  {"w.q8_0", DType::Q8_0, {2, 64}, 136}, {"w.q4_k", DType::Q4_K, {1, 256}, 144},
                                  {"x.bf16", DType::BF16, {2, 1, 3, 2}, 24}, {"w.q4_0", DType::Q4_0, {3, 32}, 54}};
  for (std::size_t i = 0; i < tensors.size(); ++i)
    w.add_tensor(tensors[i].name, tensors[i].dtype, tensors[i].shape, random_bytes(tensors[i].bytes, static_cast<unsigned>(i)));

  const fs::path dir = gbtest::temp_dir("gguf-round-trip");
  w.write(dir / "rt.gguf", alignment);
  const std::string data = gbtest::read_file(dir / "rt.gguf");
  GgufFile f("rt.gguf", bytes_of(data), data.size());
  BOOST_TEST(f.version() == 3u);
  BOOST_TEST(f.alignment() == alignment);
  BOOST_TEST(f.data_offset() % alignment == 0u);

  auto want = w.metadata().entries();
  if (alignment != 32) want.emplace_back("general.alignment", mu(MetaType::U32, alignment));
  const auto& got = f.metadata().entries();
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST(got[i].first == want[i].first);
    BOOST_TEST(same(got[i].second, want[i].second), got[i].first << ": " << got[i].second.to_string());
  }
  BOOST_TEST(f.metadata().get_int("u8").value() == 201);
  BOOST_TEST(f.metadata().get_string("text")->size() == 14u);

  BOOST_REQUIRE_EQUAL(f.tensors().size(), tensors.size());
  std::size_t end = f.data_offset();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& info = f.tensors()[i];
    const auto t = f.tensor(info);
    BOOST_TEST_CONTEXT(tensors[i].name) {
      BOOST_TEST(info.name == tensors[i].name);
      BOOST_TEST(t.dtype == tensors[i].dtype);
      BOOST_TEST(t.n_dims == static_cast<int>(tensors[i].shape.size()));
      for (int d = 0; d < t.n_dims; ++d) BOOST_TEST(t.shape[d] == tensors[i].shape[d]);
      BOOST_TEST(info.offset % alignment == 0u);
      BOOST_TEST((data.size() - (t.data - bytes_of(data))) >= t.bytes);
      const auto expect = random_bytes(tensors[i].bytes, static_cast<unsigned>(i));
      BOOST_REQUIRE_EQUAL(t.bytes, expect.size());
      BOOST_TEST(std::memcmp(t.data, expect.data(), t.bytes) == 0);
      end = f.data_offset() + info.offset + info.bytes;
    }
  }
  BOOST_TEST(data.size() == (end + alignment - 1) / alignment * alignment);  // the last tensor padded too
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(refuses_values_and_tensors_it_cannot_write) {
  const fs::path dir = gbtest::temp_dir("gguf-writer-errors");
  auto write_error = [&](const GgufWriter& w, std::uint32_t alignment = 32) -> std::string {
    try {
      w.write(dir / "bad.gguf", alignment);
    } catch (const ModelError& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto contains = [](const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; };
  {
    GgufWriter w;
    w.set("small", mu(MetaType::U8, 300));
    BOOST_TEST(contains(write_error(w), "metadata 'small': 300 does not fit u8"), write_error(w));
  }
  {
    GgufWriter w;
    w.set("neg", mi(MetaType::U32, -1));
    BOOST_TEST(contains(write_error(w), "'neg'"));
  }
  {
    GgufWriter w;
    w.set("mixed", ma(MetaType::I32, {mi(MetaType::I32, 1), ms("two")}));
    BOOST_TEST(contains(write_error(w), "metadata 'mixed' item 1"), write_error(w));
  }
  {
    GgufWriter w;
    w.set("kind", {MetaType::String, MetaType::U8, std::int64_t{3}});
    BOOST_TEST(contains(write_error(w), "'kind': is not a string"), write_error(w));
  }
  {
    GgufWriter w;
    BOOST_TEST(contains(write_error(w, 3), "alignment 3 is not a power of two"));
    BOOST_TEST(contains(write_error(w, 0), "alignment 0"));
  }
  BOOST_TEST(!fs::exists(dir / "bad.gguf"));
  GgufWriter w;
  BOOST_CHECK_THROW(w.add_tensor("t", DType::F32, {2, 3}, std::vector<std::byte>(20)), ModelError);  // needs 24
  BOOST_CHECK_THROW(w.add_tensor("t", DType::Q8_0, {2, 16}, std::vector<std::byte>(34)), ModelError);  // half a block
  BOOST_CHECK_THROW(w.add_tensor("t", DType::F32, {}, {}), ModelError);
  BOOST_CHECK_THROW(w.add_tensor("t", DType::F32, {1, 1, 1, 1, 1}, std::vector<std::byte>(4)), ModelError);
  BOOST_CHECK_THROW(w.add_tensor("t", DType::F32, {0}, {}), ModelError);
  BOOST_CHECK_THROW(w.add_tensor("", DType::F32, {1}, std::vector<std::byte>(4)), ModelError);
  w.add_tensor("t", DType::F32, {1}, std::vector<std::byte>(4));
  BOOST_CHECK_THROW(w.add_tensor("t", DType::F32, {1}, std::vector<std::byte>(4)), ModelError);
  BOOST_CHECK_THROW(w.write(dir / "no" / "such" / "dir.gguf"), ModelError);
  fs::remove_all(dir);
}

// A write that fails half-way (here: the file size limit) leaves the old file as it was and no
// temporary file behind.
BOOST_AUTO_TEST_CASE(failed_write_leaves_no_half_written_file) {
  const fs::path dir = gbtest::temp_dir("gguf-atomic");
  GgufWriter small;
  small.set("general.name", ms("old"));
  small.write(dir / "m.gguf");
  const std::string before = gbtest::read_file(dir / "m.gguf");

  GgufWriter big;
  big.set("general.name", ms("new"));
  big.add_tensor("w", DType::F32, {64, 64}, std::vector<std::byte>(64 * 64 * 4));
  rlimit old{};
  BOOST_REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit lim = old;
  lim.rlim_cur = 4096;
  BOOST_REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  std::string err;
  try {
    big.write(dir / "m.gguf");
  } catch (const ModelError& e) {
    err = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  BOOST_TEST(err.find("m.gguf: write failed") != std::string::npos, err);
  BOOST_TEST((gbtest::read_file(dir / "m.gguf") == before));
  BOOST_TEST(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

// ======================================================================================
BOOST_AUTO_TEST_SUITE(malformed)

BOOST_AUTO_TEST_CASE(base_file_reads) {
  const RawFile raw = base_file();
  const std::string data = raw.bytes();
  GgufFile f("t.gguf", bytes_of(data), data.size());
  BOOST_TEST(f.data_offset() == raw.header_bytes());
  BOOST_TEST(f.data_offset() % 32 == 0u);
  BOOST_TEST(f.metadata().get_string("general.name").value() == "NAME_MARKER");
  BOOST_TEST(f.metadata().get_strings("tokenizer.ggml.tokens")->at(2) == "</s>");
  BOOST_TEST(f.metadata().get_bool("flag").value());
  BOOST_TEST(f.metadata().get_float("scale").value() == 0.5);
  BOOST_TEST(f.metadata().get_int("count").value() == 7);
  const auto* ragged = f.metadata().find("ragged");
  BOOST_REQUIRE(ragged && ragged->elem == MetaType::Array);
  BOOST_TEST(ragged->array()->at(0).elem == MetaType::U16);
  BOOST_TEST(ragged->to_string() == "[array × 2] [u16 × 2] 1, 2, [u16 × 1] 3");
  BOOST_REQUIRE_EQUAL(f.tensors().size(), 3u);
  const auto c = f.tensor(*f.find("c"));
  BOOST_TEST(c.dtype == DType::Q8_0);
  BOOST_TEST(c.rows() == 2);
  BOOST_TEST(c.cols() == 32);
  BOOST_TEST(c.bytes == 68u);
  BOOST_TEST(c.data == bytes_of(data) + f.data_offset() + 160);
}

BOOST_AUTO_TEST_CASE(version_2_reads) {
  RawFile raw = base_file();
  raw.version = 2;
  const std::string data = raw.bytes();
  BOOST_TEST(GgufFile("t.gguf", bytes_of(data), data.size()).version() == 2u);
}

// Arrays nested 8 deep are the limit; 9 are refused (the BadField case below).
std::string nested(int depth) {
  std::string p = le32(kString) + le64(1) + gstr("leaf");
  for (int i = 1; i < depth; ++i) p = le32(kArray) + le64(1) + p;
  return p;
}

BOOST_AUTO_TEST_CASE(arrays_nested_eight_deep_read) {
  RawFile raw = base_file();
  raw.kvs.push_back({"deep", kArray, nested(8)});
  const std::string data = raw.bytes();
  GgufFile f("t.gguf", bytes_of(data), data.size());
  BOOST_TEST(f.metadata().find("deep")->to_string(8).find("\"leaf\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(alignment_64_reads) {
  RawFile raw = base_file();
  raw.kvs.push_back({"general.alignment", kU32, le32(64)});
  raw.pad_to = 64;
  raw.tensor("c").offset = 192;
  raw.data_bytes = 260;
  const std::string data = raw.bytes();
  GgufFile f("t.gguf", bytes_of(data), data.size());
  BOOST_TEST(f.alignment() == 64u);
  BOOST_TEST(f.data_offset() % 64 == 0u);
  BOOST_TEST(f.data_offset() == raw.header_bytes());
}

// Cut anywhere before the end of the last tensor's data: refused with a message.
BOOST_AUTO_TEST_CASE(truncated_at_every_byte) {
  const RawFile raw = base_file();
  const std::string data = raw.bytes();
  const std::size_t data_end = raw.header_bytes() + 228;
  for (std::size_t n = 0; n < data_end; ++n) {
    BOOST_TEST_CONTEXT("cut at " << n) { parse_error(data.substr(0, n)); }
  }
  const std::string cut = data.substr(0, data_end - 1);
  BOOST_TEST(parse_error(cut) == "t.gguf: tensor 'c' data [" + std::to_string(raw.header_bytes() + 160) + ", " +
                                     std::to_string(data_end) + ") extends past the end of the file (" +
                                     std::to_string(data_end - 1) + " bytes)");
}

struct BadField {
  std::string what;
  std::function<std::string()> build;
  std::vector<std::string> expect;  // parts the message must contain
};
std::ostream& operator<<(std::ostream& o, const BadField& c) { return o << c.what; }

std::string with(const std::function<void(RawFile&)>& change) {
  RawFile f = base_file();
  change(f);
  return f.bytes();
}

// Overwrites the u64 just before the first occurrence of `marker` (a string's length field).
std::string with_length_before(const std::string& marker, const std::function<std::uint64_t(std::size_t, std::size_t)>& len) {
  std::string b = base_file().bytes();
  const auto at = b.find(marker);
  const std::uint64_t v = len(at, b.size());
  std::memcpy(b.data() + at - 8, &v, 8);
  return b;
}

const std::uint64_t k2p40 = std::uint64_t{1} << 40;

std::vector<BadField> bad_fields() {
  const std::string supported = glassbox::supported_dtypes();
  return {
      {"magic", [] { return with([](RawFile& f) { f.magic = "GGML"; }); }, {"not a GGUF file", "'GGML'"}},
      {"version 1", [] { return with([](RawFile& f) { f.version = 1; }); },
       {"t.gguf: GGUF version 1 is not supported (expected 2 or 3)"}},
      {"version 4", [] { return with([](RawFile& f) { f.version = 4; }); }, {"GGUF version 4 is not supported (expected 2 or 3)"}},
      {"big-endian version", [] { return with([](RawFile& f) { f.version = 0x03000000; }); }, {"big-endian"}},
      {"tensor count 2^40", [] { return with([](RawFile& f) { f.n_tensors = k2p40; }); }, {"tensor count 1099511627776"}},
      {"kv count 2^40", [] { return with([](RawFile& f) { f.n_kv = k2p40; }); }, {"kv count 1099511627776"}},
      {"string length 2^40", [] { return with([](RawFile& f) { f.kv("general.name").payload = le64(k2p40) + "NAME"; }); },
       {"metadata 'general.name'", "string length 1099511627776", "runs past the end"}},
      {"string length just past the end",
       [] { return with_length_before("NAME_MARKER", [](std::size_t at, std::size_t size) { return size - at + 1; }); },
       {"metadata 'general.name'", "string length", "runs past the end of the file"}},
      {"string length to the end",
       [] { return with_length_before("NAME_MARKER", [](std::size_t at, std::size_t size) { return size - at; }); },
       {"metadata kv 2", "key", "file ends at byte"}},
      {"key length 2^40", [] { return with_length_before("general.name", [](std::size_t, std::size_t) { return k2p40; }); },
       {"metadata kv 1", "key length 1099511627776"}},
      {"key length 70000", [] { return with([](RawFile& f) { f.kvs[1].key = std::string(70000, 'k'); }); },
       {"metadata kv 1", "key length 70000", "at most 65535"}},
      {"empty key", [] { return with([](RawFile& f) { f.kvs[1].key = ""; }); }, {"metadata kv 1", "key is empty"}},
      {"duplicate key", [] { return with([](RawFile& f) { f.kvs.push_back({"general.name", kString, gstr("again")}); }); },
       {"metadata 'general.name'", "duplicate key"}},
      {"array length 2^40",
       [] { return with([](RawFile& f) { f.kv("tokenizer.ggml.tokens").payload = le32(kString) + le64(k2p40) + gstr("x"); }); },
       {"metadata 'tokenizer.ggml.tokens'", "array length 1099511627776"}},
      {"array element type 13",
       [] { return with([](RawFile& f) { f.kv("tokenizer.ggml.tokens").payload.replace(0, 4, le32(13)); }); },
       {"metadata 'tokenizer.ggml.tokens'", "element type id 13"}},
      {"array item string length",
       [] { return with_length_before("</s>", [](std::size_t, std::size_t) { return k2p40; }); },
       {"metadata 'tokenizer.ggml.tokens' item 2", "string length 1099511627776"}},
      {"value type 13", [] { return with([](RawFile& f) { f.kv("count").type = 13; }); }, {"metadata 'count'", "value type id 13"}},
      {"bool value 2", [] { return with([](RawFile& f) { f.kv("flag").payload = "\x02"; }); },
       {"metadata 'flag'", "bool value", "is 2 (expected 0 or 1)"}},
      {"arrays nested 9 deep", [] { return with([](RawFile& f) { f.kvs.push_back({"deep", kArray, nested(9)}); }); },
       {"metadata 'deep' item 0 item 0", "nested more than 8 levels"}},
      {"alignment 0", [] { return with([](RawFile& f) { f.kvs.push_back({"general.alignment", kU32, le32(0)}); }); },
       {"metadata 'general.alignment'", "is 0 (expected a power of two)"}},
      {"alignment 3", [] { return with([](RawFile& f) { f.kvs.push_back({"general.alignment", kU32, le32(3)}); }); },
       {"metadata 'general.alignment'", "is 3 (expected a power of two)"}},
      {"alignment of type i32", [] { return with([](RawFile& f) { f.kvs.push_back({"general.alignment", kI32, le32(32)}); }); },
       {"metadata 'general.alignment'", "has type i32 (expected u32)"}},
      {"alignment 64 with offsets aligned to 32",
       [] { return with([](RawFile& f) { f.kvs.push_back({"general.alignment", kU32, le32(64)}); f.pad_to = 64; }); },
       {"tensor 'c'", "data offset 160 is not a multiple of the alignment 64"}},
      {"tensor name length 2^40",
       [] {
         std::string b = with([](RawFile& f) { f.tensors[0].name = "TENSOR_MARKER"; });
         const std::uint64_t v = k2p40;
         std::memcpy(b.data() + b.find("TENSOR_MARKER") - 8, &v, 8);
         return b;
       },
       {"tensor info 0", "tensor name length 1099511627776"}},
      {"empty tensor name", [] { return with([](RawFile& f) { f.tensors[0].name = ""; }); }, {"tensor info 0", "tensor name is empty"}},
      {"duplicate tensor name", [] { return with([](RawFile& f) { f.tensor("c").name = "a"; }); },
       {"tensor 'a'", "duplicate tensor name"}},
      {"n_dims 5", [] { return with([](RawFile& f) { f.tensor("a").n_dims = 5; }); }, {"tensor 'a'", "n_dims is 5 (expected 1 to 4)"}},
      {"n_dims 0", [] { return with([](RawFile& f) { f.tensor("a").n_dims = 0; }); }, {"tensor 'a'", "n_dims is 0 (expected 1 to 4)"}},
      {"ne 0", [] { return with([](RawFile& f) { f.tensor("b").ne = {0}; }); }, {"tensor 'b'", "ne[0] is 0"}},
      {"ne 2^62 overflows", [] { return with([](RawFile& f) { f.tensor("a").ne = {8, std::uint64_t{1} << 62}; }); },
       {"tensor 'a'", "ne[1]", "overflow"}},
      {"ne 2^62 bigger than the file", [] { return with([](RawFile& f) { f.tensor("b").ne = {std::uint64_t{1} << 62}; }); },
       {"tensor 'b'", "shape [4611686018427387904]", "more than the whole file"}},
      {"ne 2^63", [] { return with([](RawFile& f) { f.tensor("b").ne = {std::uint64_t{1} << 63}; }); },
       {"tensor 'b'", "ne[0] is 9223372036854775808"}},
      {"unknown tensor type 99", [] { return with([](RawFile& f) { f.tensor("a").type = 99; }); },
       {"tensor 'a'", "type 99 (unknown to ggml) is not supported", supported}},
      {"tensor type IQ2_XXS", [] { return with([](RawFile& f) { f.tensor("a").type = 16; }); },
       {"tensor 'a'", "type IQ2_XXS (ggml type 16) is not supported", supported}},
      {"tensor type Q8_K", [] { return with([](RawFile& f) { f.tensor("a").type = 15; }); }, {"tensor 'a'", "Q8_K (ggml type 15)"}},
      {"tensor type Q8_1", [] { return with([](RawFile& f) { f.tensor("a").type = 9; }); }, {"tensor 'a'", "Q8_1 (ggml type 9)"}},
      {"row not whole blocks", [] { return with([](RawFile& f) { f.tensor("c").ne = {16, 4}; }); },
       {"tensor 'c'", "ne[0] = 16", "block of 32 values"}},
      {"offset misaligned", [] { return with([](RawFile& f) { f.tensor("b").offset = 130; }); },
       {"tensor 'b'", "data offset 130 is not a multiple of the alignment 32"}},
      {"offset past the end", [] { return with([](RawFile& f) { f.tensor("c").offset = k2p40; }); },
       {"tensor 'c' data [", "extends past the end of the file"}},
      {"offset + size overflows", [] { return with([](RawFile& f) { f.tensor("c").offset = ~std::uint64_t{31}; }); },
       {"tensor 'c' data [", "extends past the end of the file"}},
      {"data past the end", [] { return with([](RawFile& f) { f.tensor("c").offset = 192; }); },
       {"tensor 'c' data [", "extends past the end of the file (", " bytes)"}},
      {"overlapping tensors", [] { return with([](RawFile& f) { f.tensor("b").offset = 96; }); },
       {"tensors 'a'", "and 'b'", "overlap"}},
      {"identical offsets", [] { return with([](RawFile& f) { f.tensor("c").offset = 128; }); }, {"'b'", "'c'", "overlap"}},
      {"tensor count one too many", [] { return with([](RawFile& f) { f.n_tensors = 4; }); }, {"tensor info 3"}},
  };
}

BOOST_DATA_TEST_CASE(bad_field_is_named, bdata::make(bad_fields()), c) {
  const std::string msg = parse_error(c.build());
  BOOST_TEST_MESSAGE(c.what << " -> " << msg);
  for (const auto& part : c.expect) BOOST_TEST(msg.find(part) != std::string::npos, "'" << part << "' not in: " << msg);
}

BOOST_AUTO_TEST_CASE(tiny_inputs) {
  parse_error("");
  parse_error("GGU");
  BOOST_TEST(!glassbox::is_gguf(bytes_of(std::string("GGU")), 3));
  BOOST_TEST(glassbox::is_gguf(bytes_of(std::string("GGUF")), 4));
  BOOST_TEST(parse_error("GGUF").find("version at byte 4 needs 4 bytes") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(ggml_type_names) {
  BOOST_TEST(glassbox::ggml_type_name(6) == "Q5_0");
  BOOST_TEST(glassbox::ggml_type_name(30) == "BF16");
  BOOST_TEST(glassbox::ggml_type_name(35) == "TQ2_0");
  BOOST_TEST(glassbox::ggml_type_name(4).empty());
  BOOST_TEST(glassbox::ggml_type_name(99).empty());
  for (std::uint32_t id = 0; id < 64; ++id)
    if (const auto* info = glassbox::dtype_info(id)) BOOST_TEST(glassbox::ggml_type_name(id) == info->name);
}

BOOST_AUTO_TEST_SUITE_END()
