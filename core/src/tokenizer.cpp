// Helpers shared by every tokenizer.
#include "glassbox/tokenizer.hpp"

namespace glassbox {

std::string decode_all(const Tokenizer& tok, const std::vector<std::int32_t>& ids) {
  std::string out;
  std::int32_t prev = tok.bos_id();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i == 0 && ids[i] == tok.bos_id()) continue;
    out += tok.decode(prev, ids[i]);
    prev = ids[i];
  }
  return out;
}

}  // namespace glassbox

namespace glassbox {

std::string_view token_type_name(TokenType t) {
  switch (t) {
    case TokenType::Undefined: return "undefined";
    case TokenType::Normal: return "normal";
    case TokenType::Unknown: return "unknown";
    case TokenType::Control: return "control";
    case TokenType::UserDefined: return "user-defined";
    case TokenType::Unused: return "unused";
    case TokenType::Byte: return "byte";
  }
  return "?";
}

}  // namespace glassbox
