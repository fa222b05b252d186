// Helpers shared by every tokenizer.
#include "glassbox/tokenizer.hpp"

#include <algorithm>
#include <array>

#include "glassbox/error.hpp"
#include "glassbox/metadata.hpp"

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

namespace glassbox {

SpecialTokens read_special_tokens(const Metadata& m, std::size_t n, bool default_add_bos, const std::string& source) {
  auto id = [&](const char* key) -> std::int32_t {
    const auto v = m.get_int(key);
    if (!v || *v == 0xFFFFFFFFll || *v == -1) return -1;
    if (*v < 0 || *v >= static_cast<std::int64_t>(n))
      throw TokenizerError(source + ": " + key + " = " + std::to_string(*v) + " is outside the vocabulary 0.." + std::to_string(n - 1));
    return static_cast<std::int32_t>(*v);
  };
  SpecialTokens s;
  s.unk = id("tokenizer.ggml.unknown_token_id");
  s.bos = id("tokenizer.ggml.bos_token_id");
  s.eos = id("tokenizer.ggml.eos_token_id");
  s.eot = id("tokenizer.ggml.eot_token_id");
  s.eom = id("tokenizer.ggml.eom_token_id");
  s.add_bos = m.get_bool("tokenizer.ggml.add_bos_token").value_or(default_add_bos);
  s.add_eos = m.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  s.chat_template = m.get_string("tokenizer.chat_template").value_or("");
  if (s.add_bos && s.bos < 0) throw TokenizerError(source + ": tokenizer.ggml.add_bos_token is true but there is no tokenizer.ggml.bos_token_id");
  if (s.add_eos && s.eos < 0) throw TokenizerError(source + ": tokenizer.ggml.add_eos_token is true but there is no tokenizer.ggml.eos_token_id");
  return s;
}

std::vector<std::int32_t> end_of_generation_ids(const SpecialTokens& s, const std::vector<std::string>& pieces,
                                                const std::vector<TokenType>& types) {
  static constexpr std::array<std::string_view, 7> kMarkers = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                                               "<|endoftext|>", "<|eom_id|>", "</s>"};
  std::vector<std::int32_t> eog;
  auto add = [&](std::int32_t id) {
    if (id >= 0 && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
  };
  add(s.eos);
  add(s.eot);
  add(s.eom);
  for (std::size_t i = 0; i < pieces.size() && i < types.size(); ++i)
    if (types[i] == TokenType::Control && std::find(kMarkers.begin(), kMarkers.end(), pieces[i]) != kMarkers.end())
      add(static_cast<std::int32_t>(i));
  return eog;
}

}  // namespace glassbox
