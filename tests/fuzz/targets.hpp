// The fuzz targets' bodies (docs/reliability.md): shared by the libFuzzer executables (tests/fuzz/fuzz_*.cpp)
// and by test_fuzz_regressions, which replays every kept input under the normal suite.
// Each returns normally for any input: a glassbox::Error is the expected answer to bad bytes; anything
// else (a crash, a sanitizer report, another exception type) is a finding.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/error.hpp"
#include "glassbox/model/gguf.hpp"
#include "glassbox/model/metadata.hpp"
#include "glassbox/model/model_source.hpp"
#include "glassbox/registry.hpp"
#include "glassbox/run_spec.hpp"
#include "glassbox/tokenizer.hpp"
#include "glassbox/traces/diff.hpp"
#include "glassbox/traces/html.hpp"
#include "glassbox/traces/reader.hpp"

namespace gbfuzz {

// Bytes to a private temporary file (the loaders take paths), removed after use.
class TempFile {
 public:
  TempFile(const std::uint8_t* data, std::size_t size, const std::string& name) {
    static const std::filesystem::path dir = [] {
      std::string t = (std::filesystem::temp_directory_path() / "glassbox-fuzz-XXXXXX").string();
      if (!::mkdtemp(t.data())) std::abort();
      return std::filesystem::path(t);
    }();
    path_ = dir / name;
    std::ofstream(path_, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A model file (llama2.c or GGUF, detected by magic): open, read the config, build the weight views.
inline int model(const std::uint8_t* data, std::size_t size) {
  TempFile f(data, size, "model.bin");
  try {
    auto src = glassbox::ModelSource::open(f.path());
    (void)src->config();
    (void)src->weights().type_summary();
  } catch (const glassbox::Error&) {
  }
  return 0;
}

// The GGUF reader on memory: header, metadata, tensor table, every tensor view.
inline int gguf(const std::uint8_t* data, std::size_t size) {
  try {
    glassbox::GgufFile g("fuzz.gguf", reinterpret_cast<const std::byte*>(data), size);
    for (const auto& t : g.tensors()) (void)g.tensor(t);
  } catch (const glassbox::Error&) {
  }
  return 0;
}

inline const glassbox::Registry& registry() {
  static const glassbox::Registry* r = [] {
    auto* reg = new glassbox::Registry;  // never destroyed: modules stay loaded until exit
    reg->load_default();
    return reg;
  }();
  return *r;
}

// A tokenizer file for `plugin`, then encode/decode of fixed texts and of the input's own bytes.
inline int tokenizer(const std::uint8_t* data, std::size_t size, const std::string& plugin, const std::string& name) {
  TempFile f(data, size, name);
  try {
    auto tok = registry().make_tokenizer(glassbox::PluginSpec{plugin, {{"path", f.path().string()}}});
    const std::string_view bytes(reinterpret_cast<const char*>(data), std::min<std::size_t>(size, 256));
    for (std::string_view text : {std::string_view("Once upon a time"), std::string_view("\xff\xfe\x00 <s> \n\t", 9), bytes}) {
      const auto ids = tok->encode(text, true, true);
      (void)glassbox::decode_all(*tok, ids);
    }
    for (std::int32_t id = 0; id < tok->vocab_size() && id < 4096; ++id) (void)tok->decode(id > 0 ? id - 1 : -1, id);
  } catch (const glassbox::Error&) {
  }
  return 0;
}

// ---- encode/decode of arbitrary text with real vocabularies ----

// A vocabulary the encode target runs every input through.
struct Vocab {
  std::string source;
  std::unique_ptr<glassbox::Tokenizer> tok;
};

// GPT-2's byte -> code point map (printable bytes stand for themselves, the rest from U+0100 on), UTF-8.
inline std::string gpt2_byte(unsigned b) {
  unsigned cp = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)) {
    unsigned n = 0;
    for (unsigned x = 0; x < b; ++x)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) ++n;
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) out += static_cast<char>(cp);
  else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// A small byte-level BPE vocabulary as GGUF metadata (tokenizer.ggml.model = gpt2), built here so that the
// target needs no file: every byte, a few dozen merges of common English pieces, and <|endoftext|>.
inline glassbox::Metadata tiny_gpt2_vocab() {
  using glassbox::MetaType;
  using glassbox::MetaValue;
  std::vector<std::string> tokens;
  for (unsigned b = 0; b < 256; ++b) tokens.push_back(gpt2_byte(b));
  const std::string sp = gpt2_byte(' ');
  std::vector<std::string> merges;
  auto merge = [&](const std::string& a, const std::string& b) {
    merges.push_back(a + " " + b);
    tokens.push_back(a + b);
  };
  for (const char* w : {"t", "a", "s", "w", "o", "b", "c", "m", "f", "h"}) merge(sp, w);
  merge("h", "e"), merge("i", "n"), merge("e", "r"), merge("o", "n"), merge("a", "n"), merge("r", "e");
  merge(sp + "t", "he"), merge(sp + "a", "n"), merge("in", "g"), merge(sp + "w", "a"), merge(sp + "o", "n");
  merge(sp + "the", "r"), merge("an", "d"), merge(sp + "an", "d"), merge("e", "d"), merge("1", "2"), merge("12", "3");
  std::vector<MetaValue> tok_values, merge_values, types;
  for (const auto& t : tokens) tok_values.push_back({MetaType::String, MetaType::U8, t});
  for (const auto& m : merges) merge_values.push_back({MetaType::String, MetaType::U8, m});
  for (std::size_t i = 0; i < tokens.size(); ++i) types.push_back({MetaType::I32, MetaType::U8, std::int64_t{1}});
  tok_values.push_back({MetaType::String, MetaType::U8, std::string("<|endoftext|>")});
  types.push_back({MetaType::I32, MetaType::U8, std::int64_t{3}});
  const auto eot = static_cast<std::uint64_t>(tok_values.size() - 1);
  glassbox::Metadata m;
  m.source = "fuzz:tiny-gpt2";
  m.set("tokenizer.ggml.model", {MetaType::String, MetaType::U8, std::string("gpt2")});
  m.set("tokenizer.ggml.pre", {MetaType::String, MetaType::U8, std::string("gpt-2")});
  m.set("tokenizer.ggml.tokens", {MetaType::Array, MetaType::String, tok_values});
  m.set("tokenizer.ggml.token_type", {MetaType::Array, MetaType::I32, types});
  m.set("tokenizer.ggml.merges", {MetaType::Array, MetaType::String, merge_values});
  m.set("tokenizer.ggml.bos_token_id", {MetaType::U32, MetaType::U8, eot});
  m.set("tokenizer.ggml.eos_token_id", {MetaType::U32, MetaType::U8, eot});
  return m;
}

// One vocabulary file: a GGUF file's metadata (the tokenizer that accepts it: llama -> llama2c,
// gpt2 -> bpe), a llama2.c tokenizer.bin, or a bpe tokenizer.json / encoder.json folder.
inline std::unique_ptr<glassbox::Tokenizer> load_vocab(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  if (std::string_view(magic, 4) == "GGUF") {
    in.seekg(0);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const glassbox::GgufFile g(path.string(), reinterpret_cast<const std::byte*>(bytes.data()), bytes.size());
    return registry().make_tokenizer(glassbox::PluginSpec{glassbox::tokenizer_for(registry(), g.metadata(), path.string()), {}}, g.metadata());
  }
  const bool bpe = std::filesystem::is_directory(path) || path.extension() == ".json";
  return registry().make_tokenizer(glassbox::PluginSpec{bpe ? "bpe" : "llama2c", {{"path", path.string()}}});
}

// The vocabularies: the files in $GLASSBOX_FUZZ_VOCAB (':'-separated; tools/fuzz.sh names ../shared's GGUF and
// tokenizer files and the npm GPT-2 / Llama 3 vocabularies when present; a missing one is skipped with a
// message), always followed by the two the tree has without any download: models/toy/toy-tok.bin
// (SentencePiece) and tiny_gpt2_vocab() (byte-level BPE).
inline const std::vector<Vocab>& vocabs() {
  static const std::vector<Vocab>* v = [] {
    auto* out = new std::vector<Vocab>;
    std::string list = std::getenv("GLASSBOX_FUZZ_VOCAB") ? std::getenv("GLASSBOX_FUZZ_VOCAB") : "";
    list += std::string(list.empty() ? "" : ":") + GLASSBOX_SOURCE_DIR + "/models/toy/toy-tok.bin";
    std::size_t at = 0;
    while (at <= list.size()) {
      const std::size_t colon = std::min(list.find(':', at), list.size());
      const std::string item = list.substr(at, colon - at);
      at = colon + 1;
      if (item.empty()) continue;
      std::error_code ec;
      if (!std::filesystem::exists(item, ec)) {
        std::fprintf(stderr, "fuzz encode: vocabulary %s not found: skipped\n", item.c_str());
        continue;
      }
      out->push_back({item, load_vocab(item)});  // a bad vocabulary here is a setup error: let it throw
    }
    out->push_back({"tiny-gpt2", registry().make_tokenizer(glassbox::PluginSpec{"bpe", {}}, tiny_gpt2_vocab())});
    return out;
  }();
  return *v;
}

// Arbitrary bytes as text through every vocabulary: encode (plain, and framed by BOS/EOS), every id inside
// the vocabulary, decode. A byte-level BPE vocabulary holds every byte, so there decode(encode(text)) must
// give the text back exactly; a mismatch is a finding.
inline int encode(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& v : vocabs()) {
    try {
      for (const bool framed : {false, true}) {
        const auto ids = v.tok->encode(text, framed, framed);
        for (const auto id : ids)
          if (id < 0 || id >= v.tok->vocab_size()) {
            std::fprintf(stderr, "fuzz encode: %s: id %d outside the vocabulary of %d\n", v.source.c_str(), id, v.tok->vocab_size());
            std::abort();
          }
        const std::string back = glassbox::decode_all(*v.tok, ids);
        if (!framed && v.tok->model_kind() == "gpt2" && back != text) {
          std::fprintf(stderr, "fuzz encode: %s: decode(encode(text)) differs from the text (%zu -> %zu bytes)\n", v.source.c_str(),
                       text.size(), back.size());
          std::abort();
        }
      }
    } catch (const glassbox::Error&) {
    }
  }
  return 0;
}

// A trace: read it into the typed schema (cut-short traces too); when it reads, write it out again and
// read that (the same typed values, or the schema's writer and reader disagree), diff it with itself and
// build its page.
inline int trace(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  namespace tr = glassbox::traces;
  try {
    tr::ReadOptions ro;
    ro.require_summary = false;
    const auto t = tr::parse_trace(in, "fuzz.jsonl", ro);
    std::string again;
    for (const auto& line : t.lines()) again += tr::dump(line) + "\n";
    std::istringstream in2(again);
    tr::Trace u;
    try {
      u = tr::parse_trace(in2, "again.jsonl", ro);
    } catch (const glassbox::Error&) {
      std::abort();  // the schema wrote a trace it does not read back
    }
    if (!(u.header == t.header && u.steps == t.steps && u.context == t.context && u.summary == t.summary &&
          u.end == t.end))
      std::abort();
    (void)tr::diff_traces(t, t);
    std::ostringstream report;
    tr::write_diff_report(report, t, t, tr::diff_traces(t, t), {});
    (void)tr::trace_html(t);
  } catch (const glassbox::Error&) {
  }
  return 0;
}

}  // namespace gbfuzz
