// The fuzz targets over the CLI's own parsers of untrusted files: `compare merge` shard results and other
// engines' captures for `trace import` / `glassbox check` (cli/engine_import.hpp). Shared by
// tests/fuzz/fuzz_shard.cpp, tests/fuzz/fuzz_import.cpp and test_fuzz_regressions; apart from targets.hpp
// because they need glassbox_session.
#pragma once
#include <string>
#include <vector>

#include "../../cli/compare.hpp"
#include "../../cli/engine_import.hpp"
#include "targets.hpp"

namespace gbfuzz {

// A shard result: merged alone (a one-shard sweep), then with itself (refused: the same shard twice);
// when it merges, the report in every output form.
inline int shard(const std::uint8_t* data, std::size_t size) {
  TempFile f(data, size, "shard.json");
  namespace cmp = glassbox::cli::compare;
  try {
    const auto report = cmp::merge_shards({f.path().string()});
    (void)cmp::markdown(report);
    (void)cmp::csv(report);
    (void)cmp::html(report, (f.path().parent_path() / "report.html").string());
  } catch (const glassbox::Error&) {
  }
  try {
    (void)cmp::merge_shards({f.path().string(), f.path().string()});
  } catch (const glassbox::Error&) {
  }
  return 0;
}

// The two vocabularies the tree has without a download: SentencePiece (models/toy/toy-tok.bin) and a
// byte-level BPE one (tiny_gpt2_vocab()).
inline const std::vector<Vocab>& import_vocabs() {
  static const std::vector<Vocab>* v = [] {
    auto* out = new std::vector<Vocab>;
    out->push_back({"toy", load_vocab(std::string(GLASSBOX_SOURCE_DIR) + "/models/toy/toy-tok.bin")});
    out->push_back({"tiny-gpt2", registry().make_tokenizer(glassbox::PluginSpec{"bpe", {}}, tiny_gpt2_vocab())});
    return out;
  }();
  return *v;
}

// Another engine's capture: detected by shape, then read as each dialect in turn, against each vocabulary;
// every aligned id must lie inside the vocabulary.
inline int import(const std::uint8_t* data, std::size_t size) {
  TempFile f(data, size, "capture.json");
  std::vector<std::string> dialects{""};
  for (const auto& d : glassbox::cli::import_dialects()) dialects.push_back(d);
  for (const auto& v : import_vocabs()) {
    const int V = v.tok->vocab_size();
    for (const auto& from : dialects) {
      try {
        const auto run = glassbox::cli::read_engine_file(f.path().string(), from, 0, *v.tok);
        for (const auto& s : run.steps) {
          bool ok = s.token >= 0 && s.token < V;
          for (const auto& c : s.top) ok = ok && c.id >= 0 && c.id < V;
          if (!ok) {
            std::fprintf(stderr, "fuzz import: %s as '%s': an id outside the vocabulary of %d\n", v.source.c_str(), from.c_str(), V);
            std::abort();
          }
        }
      } catch (const glassbox::Error&) {
      }
    }
  }
  return 0;
}

}  // namespace gbfuzz
