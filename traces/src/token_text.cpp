// A token's text for a person (token_text.hpp): special tokens by their bare name, stray bytes as <0xNN>.
#include "glassbox/traces/token_text.hpp"

#include <cstdio>

#include "glassbox/tokenizer.hpp"

namespace glassbox::traces {

namespace {

bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Length of the valid UTF-8 sequence at s[i], or 0 when none starts there.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  if (n == 2 && b < 0xC2) return 0;  // overlong
  return n;
}

}  // namespace

std::string special_name(std::string_view text) {
  std::size_t b = 0, e = text.size();
  while (b < e && blank(text[b])) ++b;
  while (e > b && blank(text[e - 1])) --e;
  const std::string_view core = text.substr(b, e - b);
  if (core.size() < 3 || core.size() > 48 || core.front() != '<' || core.back() != '>') return {};
  for (std::size_t i = 1; i + 1 < core.size(); ++i)
    if (blank(core[i]) || core[i] == '<' || core[i] == '>') return {};
  const bool wrapped = core.size() != text.size();
  const bool bar_form = core.size() >= 4 && core[1] == '|' && core[core.size() - 2] == '|';
  const bool known = core == "<s>" || core == "</s>" || core == "<unk>" || core == "<pad>" || core == "<eos>" || core == "<bos>";
  return wrapped || bar_form || known ? std::string(core) : std::string();
}

std::string person_text(std::string_view text) {
  if (std::string name = special_name(text); !name.empty()) return name;
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (const std::size_t n = utf8_length(text, i)) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned char>(text[i]));
    out += buf;
    ++i;
  }
  return out;
}

std::string person_text(const Tokenizer& tok, std::int32_t prev, std::int32_t id) {
  if (id < 0 || id >= tok.vocab_size()) return "#" + std::to_string(id);
  const TokenType type = tok.token_type(id);
  if (type == TokenType::Control) {
    std::string_view name = tok.piece(id);
    std::size_t b = 0, e = name.size();
    while (b < e && blank(name[b])) ++b;
    while (e > b && blank(name[e - 1])) --e;
    return b == e ? "#" + std::to_string(id) : std::string(name.substr(b, e - b));
  }
  return person_text(tok.decode(prev, id));
}

}  // namespace glassbox::traces
