// Tokenizer "llama2c": llama2.c's tokenizer.bin — score-ordered BPE merges, SentencePiece's
// dummy-prefix space and <0xNN> byte fallback — reproducing llama2.c's encode() exactly.
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <glassbox/error.hpp>
#include <glassbox/plugin.hpp>

namespace {

using glassbox::TokenizerError;

class Llama2cTokenizer final : public glassbox::Tokenizer {
 public:
  explicit Llama2cTokenizer(const glassbox::Params& p) {
    const std::string& path = p.get_string("path");
    if (path.empty()) throw glassbox::ConfigError("tokenizer 'llama2c': no tokenizer file given (parameter 'path')");
    load(path);
  }

  std::vector<std::int32_t> encode(std::string_view text, bool bos, bool eos) const override {
    std::vector<std::int32_t> ids;
    if (bos) ids.push_back(bos_id());
    std::vector<std::int32_t> t;
    t.reserve(text.size() + 1);
    // SentencePiece's dummy prefix: non-empty text starts as if preceded by a space.
    if (!text.empty()) push_piece(" ", t);
    // Every UTF-8 code point that is a vocabulary entry becomes its token; others fall
    // back to one token per byte. (A stray continuation byte is its own "code point".)
    for (std::size_t i = 0; i < text.size();) {
      std::size_t len = 1;
      while (i + len < text.size() && len < 4 && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80) ++len;
      push_piece(text.substr(i, len), t);
      i += len;
    }
    // Merge the adjacent pair whose concatenation has the highest score (leftmost on ties)
    // until no pair is in the vocabulary.
    std::string buf;
    while (true) {
      float best = -1e10f;
      int best_id = -1, best_i = -1;
      for (int i = 0; i + 1 < static_cast<int>(t.size()); ++i) {
        buf.assign(vocab_[t[i]]).append(vocab_[t[i + 1]]);
        auto it = lookup_.find(buf);
        if (it != lookup_.end() && scores_[it->second] > best) {
          best = scores_[it->second];
          best_id = it->second;
          best_i = i;
        }
      }
      if (best_i < 0) break;
      t[best_i] = best_id;
      t.erase(t.begin() + best_i + 1);
    }
    ids.insert(ids.end(), t.begin(), t.end());
    if (eos) ids.push_back(eos_id());
    return ids;
  }

  std::string_view decode(std::int32_t prev, std::int32_t id) const override {
    check(id);
    std::string_view s = decoded_[id];
    // After BOS, SentencePiece drops the dummy-prefix space.
    if (prev == bos_id() && !s.empty() && s.front() == ' ') s.remove_prefix(1);
    return s;
  }
  std::string_view piece(std::int32_t id) const override { check(id); return vocab_[id]; }
  std::int32_t vocab_size() const override { return static_cast<std::int32_t>(vocab_.size()); }
  std::int32_t bos_id() const override { return 1; }
  std::int32_t eos_id() const override { return 2; }

 private:
  void check(std::int32_t id) const {
    if (id < 0 || id >= vocab_size())
      throw TokenizerError("tokenizer 'llama2c': token id " + std::to_string(id) + " outside 0.." + std::to_string(vocab_size() - 1));
  }

  void push_piece(std::string_view s, std::vector<std::int32_t>& out) const {
    auto it = lookup_.find(std::string(s));
    if (it != lookup_.end()) { out.push_back(it->second); return; }
    for (unsigned char b : s) out.push_back(byte_id_[b]);
  }

  void load(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw TokenizerError(path + ": cannot open tokenizer file: " + std::strerror(errno));
    auto fail = [&](const std::string& why) { return TokenizerError(path + ": " + why + " (expected a llama2.c tokenizer.bin)"); };
    std::int32_t max_len = 0;
    if (!f.read(reinterpret_cast<char*>(&max_len), 4)) throw fail("file shorter than its 4-byte header");
    if (max_len <= 0 || max_len > 65536) throw fail("max_token_length = " + std::to_string(max_len) + " is not in 1..65536");
    while (f.peek() != std::char_traits<char>::eof()) {
      const std::string at = "token " + std::to_string(vocab_.size());
      float score;
      std::int32_t len;
      if (!f.read(reinterpret_cast<char*>(&score), 4) || !f.read(reinterpret_cast<char*>(&len), 4))
        throw fail(at + ": truncated entry header");
      if (!std::isfinite(score)) throw fail(at + ": score is not a finite number");
      if (len < 0 || len > max_len) throw fail(at + ": length " + std::to_string(len) + " is not in 0.." + std::to_string(max_len));
      std::string s(static_cast<std::size_t>(len), '\0');
      if (len > 0 && !f.read(s.data(), len)) throw fail(at + ": truncated piece bytes");
      vocab_.push_back(std::move(s));
      scores_.push_back(score);
      if (vocab_.size() > (1u << 22)) throw fail("more than 4194304 tokens");
    }
    if (vocab_.size() < 3) throw fail("only " + std::to_string(vocab_.size()) + " tokens; <unk>, <s>, </s> are required");
    byte_id_.fill(0);  // <unk> when the vocabulary lacks a byte piece
    decoded_.resize(vocab_.size());
    for (std::int32_t i = static_cast<std::int32_t>(vocab_.size()) - 1; i >= 0; --i) {
      const std::string& s = vocab_[i];
      lookup_[s] = i;  // descending loop: the lowest id wins for duplicate pieces
      unsigned int b = 0;
      char tail = 0;
      if (s.size() == 6 && std::sscanf(s.c_str(), "<0x%2X%c", &b, &tail) == 2 && tail == '>') {
        byte_id_[b] = i;
        decoded_[i] = std::string(1, static_cast<char>(b));
      } else {
        decoded_[i] = s;
      }
    }
  }

  std::vector<std::string> vocab_;   // (vocab_size) raw pieces
  std::vector<float> scores_;        // (vocab_size) merge priority
  std::vector<std::string> decoded_; // (vocab_size) bytes to print (byte pieces resolved)
  std::unordered_map<std::string, std::int32_t> lookup_;
  std::array<std::int32_t, 256> byte_id_{};
};

void register_factories(glassbox::Registrar& r) {
  r.add_tokenizer({"llama2c", "llama2.c tokenizer.bin: BPE by merge score, dummy-prefix space, <0xNN> byte fallback",
                   {{"path", glassbox::ParamType::String, "", "tokenizer.bin file", {}, {}}},
                   "path"},
                  [](const glassbox::Params& p, const glassbox::Metadata&) { return std::make_unique<Llama2cTokenizer>(p); });
}

}  // namespace

GLASSBOX_MODULE("llama2c-tokenizer", "llama2.c tokenizer format", register_factories)
