// Helpers shared by every tokenizer.
#include "glassbox/tokenizer.hpp"

#include <algorithm>
#include <array>

#include "glassbox/error.hpp"
#include "glassbox/model/metadata.hpp"

namespace glassbox {

std::vector<std::int32_t> VocabTokenizer::encode(std::string_view text, const EncodeOptions& opt) const {
  std::vector<std::int32_t> ids;
  if (opt.bos && bos_ >= 0) ids.push_back(bos_);
  constexpr auto npos = std::string_view::npos;
  std::vector<const Special*> cands;  // the special tokens this call matches
  for (const auto& s : special_)
    if (!s.control || opt.parse_special) cands.push_back(&s);
  // Where candidate s next occurs at or after `from`, counting a control token only inside a range.
  auto find = [&](const Special& s, std::size_t from) {
    const std::string& p = s.text;
    for (std::size_t at = text.find(p, from); at != npos; at = text.find(p, at + 1)) {
      if (!s.control || opt.special_ranges.empty()) return at;
      for (const auto& r : opt.special_ranges)
        if (r.begin <= at && at + p.size() <= r.end) return at;
    }
    return npos;
  };
  std::size_t pos = 0;
  if (!cands.empty()) {
    // next[k]: found once, refreshed only when the text before it has been consumed.
    std::vector<std::size_t> next(cands.size());
    for (std::size_t k = 0; k < cands.size(); ++k) next[k] = find(*cands[k], 0);
    while (true) {
      std::size_t best = npos, best_len = 0;
      std::int32_t best_id = -1;
      for (std::size_t k = 0; k < cands.size(); ++k) {
        if (next[k] != npos && next[k] < pos) next[k] = find(*cands[k], pos);
        const std::size_t len = cands[k]->text.size();
        if (next[k] != npos && (next[k] < best || (next[k] == best && len > best_len)))
          best = next[k], best_len = len, best_id = cands[k]->id;
      }
      if (best == npos) break;
      if (best > pos) encode_text(text.substr(pos, best - pos), ids);
      ids.push_back(best_id);
      pos = best + best_len;
    }
  }
  if (pos < text.size()) encode_text(text.substr(pos), ids);
  if (opt.eos && eos_ >= 0) ids.push_back(eos_);
  return ids;
}

std::string_view VocabTokenizer::decode(std::int32_t, std::int32_t id) const {
  check(id);
  return decoded_[id];
}

void VocabTokenizer::check(std::int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw TokenizerError(who_ + ": token id " + std::to_string(id) + " outside 0.." + std::to_string(vocab_size() - 1));
}

void VocabTokenizer::index_special_tokens(bool trim) {
  special_.clear();
  for (std::size_t i = 0; i < vocab_.size(); ++i) {
    const TokenType t = types_[i];
    const bool control = t == TokenType::Control || t == TokenType::Unknown;
    if (t != TokenType::UserDefined && !control) continue;
    std::string text = vocab_[i];
    if (trim && control) {
      const auto b = text.find_first_not_of(" \n\r\t"), e = text.find_last_not_of(" \n\r\t");
      text = b == std::string::npos ? std::string() : text.substr(b, e - b + 1);
    }
    if (!text.empty()) special_.push_back({static_cast<std::int32_t>(i), control, std::move(text)});
  }
}

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
