// The grammar fuzz targets' bodies (docs/reliability.md): GBNF text through the parser and the recognizer,
// and JSON schemas through the converter, under the grammar bounds (grammar_engine.hpp's Limits, with a
// shorter time per step). Shared by fuzz_grammar / fuzz_json_schema and test_fuzz_regressions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/error.hpp"
#include "grammar_engine.hpp"

namespace gbfuzz {

// Walks a parsed grammar: every prefix of `text` accepted byte by byte and as a whole, and a rejection
// pass over candidates cut from it (the walk the grammar stage runs each step).
inline void walk_grammar(const glassbox::grammar::Grammar& g, std::string_view text) {
  namespace gr = glassbox::grammar;
  gr::Limits lim;
  lim.max_stacks = 20000;
  lim.max_step_ms = 1000;
  gr::Recognizer r(g, lim);
  std::vector<std::vector<std::uint32_t>> cps;
  std::vector<gr::TokenText> cands;
  for (std::size_t i = 0; i < text.size() && cps.size() < 32; i += 3) {
    auto [v, p] = gr::decode_utf8(text.substr(i, 5), {});
    cps.push_back(std::move(v));
    cands.push_back({cands.size(), nullptr, p});
  }
  for (std::size_t i = 0; i < cands.size(); ++i) cands[i].code_points = cps[i].data();
  for (std::size_t i = 0; i < text.size() && i < 64; ++i) {
    (void)r.reject(cands);
    if (!r.accept_text(text.substr(i, 1))) break;
    (void)r.complete();
  }
  r.reset();
  (void)r.accept_text(text);
}

// GBNF text: the first line up to a 0 byte is the grammar, what follows the text to walk.
inline int grammar(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = all.find('\0');
  const std::string_view gbnf = all.substr(0, cut), text = cut == std::string_view::npos ? std::string_view() : all.substr(cut + 1);
  try {
    const auto g = glassbox::grammar::parse(gbnf, "fuzz.gbnf");
    (void)glassbox::grammar::to_gbnf(g);
    walk_grammar(g, text);
  } catch (const glassbox::Error&) {
  }
  return 0;
}

// A JSON schema: converted, the grammar parsed and walked over the input itself.
inline int json_schema(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  try {
    const std::string gbnf = glassbox::grammar::json_schema_to_gbnf(all, "fuzz.json");
    if (gbnf.size() > (64u << 20)) std::abort();  // the converter's output must stay linear in its input
    const auto g = glassbox::grammar::parse(gbnf, "fuzz.json");
    walk_grammar(g, all);
  } catch (const glassbox::Error&) {
  }
  return 0;
}

}  // namespace gbfuzz
