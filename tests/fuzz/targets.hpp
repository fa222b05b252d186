// The fuzz targets' bodies (docs/reliability.md): shared by the libFuzzer executables (tests/fuzz/fuzz_*.cpp)
// and by test_fuzz_regressions, which replays every kept input under the normal suite.
// Each returns normally for any input: a glassbox::Error is the expected answer to bad bytes; anything
// else (a crash, a sanitizer report, another exception type) is a finding.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "glassbox/error.hpp"
#include "glassbox/gguf.hpp"
#include "glassbox/model_source.hpp"
#include "glassbox/registry.hpp"
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
