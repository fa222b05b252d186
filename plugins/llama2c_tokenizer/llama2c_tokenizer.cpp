// Tokenizer "llama2c": SentencePiece-style BPE (score-ordered merges, dummy-prefix space, <0xNN> byte
// fallback) from llama2.c's tokenizer.bin, or from a GGUF model's tokenizer.ggml.* metadata ("llama").
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include <glassbox/error.hpp>
#include <glassbox/file_io.hpp>
#include <glassbox/plugin.hpp>

namespace {

using glassbox::TokenizerError;
using glassbox::TokenType;

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 "▁": SentencePiece's space in GGUF pieces
// Pairs scoring at or below this never merge (llama2.c's initial "best" score).
constexpr float kNoMerge = -1e10f;

class SpmTokenizer final : public glassbox::VocabTokenizer {
 public:
  SpmTokenizer(const glassbox::Params& p, const glassbox::Metadata& model)
      : VocabTokenizer("tokenizer 'llama2c'"), reference_(p.get_bool("reference_merge")) {
    add_bos_ = true;
    const std::string& path = p.get_string("path");
    if (!path.empty()) {
      load_file(path);
    } else if (model.get_string("tokenizer.ggml.model") == "llama") {
      load_metadata(model);
    } else if (auto kind = model.get_string("tokenizer.ggml.model")) {
      throw glassbox::ConfigError("tokenizer 'llama2c': model metadata has tokenizer.ggml.model = '" + *kind +
                                  "', expected 'llama' (use the 'bpe' tokenizer for 'gpt2')");
    } else {
      throw glassbox::ConfigError("tokenizer 'llama2c': no tokenizer file given (parameter 'path') and the model has no "
                                  "tokenizer.ggml.* metadata");
    }
    finish();
  }

  std::string_view decode(std::int32_t prev, std::int32_t id) const override {
    std::string_view s = VocabTokenizer::decode(prev, id);
    // After BOS, SentencePiece drops the dummy-prefix space.
    if (prev == bos_ && prev >= 0 && add_space_prefix_ && !s.empty() && s.front() == ' ') s.remove_prefix(1);
    return s;
  }
  std::string_view model_kind() const override { return "llama"; }

 private:
  void encode_text(std::string_view text, std::vector<std::int32_t>& ids) const override {
    // SentencePiece's dummy prefix: non-empty text starts as if preceded by a space. GGUF pieces
    // spell the space "▁", llama2.c's pieces a plain space.
    std::string norm;
    norm.reserve(text.size() + 3);
    if (!text.empty() && add_space_prefix_) norm += space_;
    for (char c : text) {
      if (c == ' ') norm += space_;
      else norm += c;
    }
    // Every UTF-8 code point that is a vocabulary entry becomes its token; others fall
    // back to one token per byte. (A stray continuation byte is its own "code point".)
    std::vector<std::int32_t> t;
    t.reserve(norm.size());
    for (std::size_t i = 0; i < norm.size();) {
      std::size_t len = 1;
      while (i + len < norm.size() && len < 4 && (static_cast<unsigned char>(norm[i + len]) & 0xC0) == 0x80) ++len;
      push_piece(std::string_view(norm).substr(i, len), t);
      i += len;
    }
    if (reference_) merge_quadratic(t);
    else merge_heap(t);
    ids.insert(ids.end(), t.begin(), t.end());
  }

  void push_piece(std::string_view s, std::vector<std::int32_t>& out) const {
    auto it = lookup_.find(std::string(s));
    if (it != lookup_.end()) { out.push_back(it->second); return; }
    for (unsigned char b : s) out.push_back(byte_id_[b]);
  }

  // The id and score of the concatenation of two tokens' pieces; id -1 when it is no mergeable piece.
  std::pair<std::int32_t, float> pair_of(std::int32_t a, std::int32_t b, std::string& buf) const {
    buf.assign(vocab_[a]).append(vocab_[b]);
    auto it = lookup_.find(buf);
    if (it == lookup_.end() || !(scores_[it->second] > kNoMerge)) return {-1, 0.f};
    return {it->second, scores_[it->second]};
  }

  // The reference: merge the adjacent pair whose concatenation has the highest score (leftmost on
  // ties) until no pair is in the vocabulary. Quadratic; kept to test merge_heap against.
  void merge_quadratic(std::vector<std::int32_t>& t) const {
    std::string buf;
    while (true) {
      float best = kNoMerge;
      int best_id = -1, best_i = -1;
      for (int i = 0; i + 1 < static_cast<int>(t.size()); ++i) {
        auto [id, score] = pair_of(t[i], t[i + 1], buf);
        if (id >= 0 && score > best) {
          best = score;
          best_id = id;
          best_i = i;
        }
      }
      if (best_i < 0) break;
      t[best_i] = best_id;
      t.erase(t.begin() + best_i + 1);
    }
  }

  // The same merges in O(n log n): the symbols form a linked list and every adjacent pair that is a
  // piece waits in a max-heap by (score, then leftmost). A merge changes only its two neighbouring
  // pairs, so those are pushed; heap entries whose symbols have since changed are skipped when popped.
  // A merge across a boundary would make a piece holding the boundary's two bytes side by side; where
  // no mergeable piece holds that byte pair, no merge ever crosses, so the runs between such
  // boundaries (about words) are merged one by one with a small heap. Same result, fewer cache misses.
  void merge_heap(std::vector<std::int32_t>& t) const {
    std::vector<std::int32_t> out;
    out.reserve(t.size());
    std::size_t begin = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
      const std::string& a = vocab_[t[i]];
      const std::string* b = i + 1 < t.size() ? &vocab_[t[i + 1]] : nullptr;
      if (b && !a.empty() && !b->empty() && inner_pair_[static_cast<unsigned char>(a.back()) * 256 + static_cast<unsigned char>(b->front())])
        continue;
      merge_run(t.data() + begin, static_cast<int>(i + 1 - begin), out);
      begin = i + 1;
    }
    t.swap(out);
  }

  void merge_run(const std::int32_t* t, int n, std::vector<std::int32_t>& out) const {
    if (n < 2) { out.insert(out.end(), t, t + n); return; }
    struct Sym { std::int32_t id; int prev, next; };
    struct Cand {
      float score;
      int left, right;
      std::int32_t left_id, right_id, merged;
      bool operator<(const Cand& o) const { return score < o.score || (score == o.score && left > o.left); }
    };
    std::vector<Sym> sym(n);
    for (int i = 0; i < n; ++i) sym[i] = {t[i], i - 1, i + 1 < n ? i + 1 : -1};
    std::priority_queue<Cand> heap;
    std::string buf;
    auto consider = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      auto [id, score] = pair_of(sym[l].id, sym[r].id, buf);
      if (id >= 0) heap.push({score, l, r, sym[l].id, sym[r].id, id});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
    while (!heap.empty()) {
      const Cand c = heap.top();
      heap.pop();
      Sym& l = sym[c.left];
      Sym& r = sym[c.right];
      // Stale: one side was merged away or grew since this pair was pushed.
      if (l.id < 0 || r.id < 0 || l.next != c.right || l.id != c.left_id || r.id != c.right_id) continue;
      l.id = c.merged;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = c.left;
      r.id = -1;
      consider(l.prev, c.left);
      consider(c.left, l.next);
    }
    for (int i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
  }

  void load_file(const std::string& path) {
    source_ = path;
    if (auto why = glassbox::not_a_regular_file(path)) throw TokenizerError(path + ": " + *why + " (expected a llama2.c tokenizer.bin)");
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
    // llama2.c's fixed layout: 0 <unk>, 1 <s>, 2 </s>; <0xNN> pieces are bytes, the rest normal.
    unk_ = 0, bos_ = 1, eos_ = 2;
    types_.assign(vocab_.size(), TokenType::Normal);
    types_[0] = TokenType::Unknown;
    types_[1] = types_[2] = TokenType::Control;
    for (std::size_t i = 3; i < vocab_.size(); ++i)
      if (byte_value(vocab_[i]) >= 0) types_[i] = TokenType::Byte;
    // llama2.c prints control pieces as stored ("\n<s>\n"); GGUF vocabularies print nothing for them.
    print_control_ = true;
  }

  void load_metadata(const glassbox::Metadata& m) {
    source_ = m.source.empty() ? "model metadata" : m.source;
    auto fail = [&](const std::string& why) { return TokenizerError(source_ + ": " + why); };
    auto tokens = m.get_strings("tokenizer.ggml.tokens");
    if (!tokens) throw fail("tokenizer.ggml.model is 'llama' but tokenizer.ggml.tokens is missing");
    if (tokens->empty() || tokens->size() > (1u << 22))
      throw fail("tokenizer.ggml.tokens has " + std::to_string(tokens->size()) + " entries, expected 1..4194304");
    vocab_ = std::move(*tokens);
    const std::size_t n = vocab_.size();
    scores_.assign(n, 0.f);
    if (auto s = m.get_floats("tokenizer.ggml.scores")) {
      if (s->size() != n) throw fail("tokenizer.ggml.scores has " + std::to_string(s->size()) + " entries, expected " + std::to_string(n));
      for (std::size_t i = 0; i < n; ++i) {
        if (!std::isfinite((*s)[i])) throw fail("tokenizer.ggml.scores[" + std::to_string(i) + "] is not a finite number");
        scores_[i] = static_cast<float>((*s)[i]);
      }
    }
    types_.assign(n, TokenType::Normal);
    if (auto ty = m.get_ints("tokenizer.ggml.token_type")) {
      if (ty->size() != n) throw fail("tokenizer.ggml.token_type has " + std::to_string(ty->size()) + " entries, expected " + std::to_string(n));
      for (std::size_t i = 0; i < n; ++i) {
        if ((*ty)[i] < 0 || (*ty)[i] > 6) throw fail("tokenizer.ggml.token_type[" + std::to_string(i) + "] = " + std::to_string((*ty)[i]) + " is not in 0..6");
        types_[i] = static_cast<TokenType>((*ty)[i]);
      }
    }
    const auto sp = glassbox::read_special_tokens(m, n, /*default_add_bos=*/true, source_);
    unk_ = sp.unk, bos_ = sp.bos, eos_ = sp.eos, eot_ = sp.eot, eom_ = sp.eom;
    add_bos_ = sp.add_bos;
    add_eos_ = sp.add_eos;
    chat_template_ = sp.chat_template;
    add_space_prefix_ = m.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    space_ = kSpaceMark;
  }

  // 0..255 for a "<0xNN>" piece, else -1.
  static int byte_value(const std::string& s) {
    unsigned int b = 0;
    char tail = 0;
    if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && std::sscanf(s.c_str(), "<0x%2X%c", &b, &tail) == 2 && tail == '>')
      return static_cast<int>(b);
    return -1;
  }

  // Lookup, byte fallback, printed text and end-of-generation ids, from vocab_/types_.
  void finish() {
    byte_id_.fill(unk_ >= 0 ? unk_ : 0);  // <unk> when the vocabulary lacks a byte piece
    decoded_.resize(vocab_.size());
    for (std::int32_t i = static_cast<std::int32_t>(vocab_.size()) - 1; i >= 0; --i) {
      const std::string& s = vocab_[i];
      const TokenType ty = types_[i];
      const int b = byte_value(s);
      if (ty == TokenType::Byte && b < 0) throw TokenizerError(source_ + ": token " + std::to_string(i) + " is a byte token but its piece is not <0xNN>");
      if (ty == TokenType::Byte) {
        byte_id_[b] = i;
        decoded_[i] = std::string(1, static_cast<char>(b));
        continue;
      }
      if (ty == TokenType::Control) {
        decoded_[i] = print_control_ ? s : std::string();
        continue;  // never produced from text
      }
      // Normal, user-defined, unknown and unused pieces can be matched in text; the descending
      // loop makes the lowest id win for duplicate pieces. <unk> and unused pieces are kept
      // out, as SentencePiece never emits them for their spelling.
      if (ty == TokenType::Normal || ty == TokenType::UserDefined || ty == TokenType::Undefined) {
        lookup_[s] = i;
        for (std::size_t k = 0; k + 1 < s.size(); ++k)
          inner_pair_[static_cast<unsigned char>(s[k]) * 256 + static_cast<unsigned char>(s[k + 1])] = true;
      }
      std::string d;
      for (std::size_t k = 0; k < s.size();) {
        if (space_ != " " && s.compare(k, space_.size(), space_) == 0) { d += ' '; k += space_.size(); }
        else d += s[k++];
      }
      decoded_[i] = std::move(d);
    }
    glassbox::SpecialTokens sp;
    sp.eos = eos_, sp.eot = eot_, sp.eom = eom_;
    // llama2.c files print their control pieces as text: only their EOS ends generation.
    eog_ = glassbox::end_of_generation_ids(sp, print_control_ ? std::vector<std::string>{} : vocab_, types_);
    index_special_tokens(/*trim=*/print_control_);
  }

  bool reference_ = false;           // use merge_quadratic (tests)
  std::string space_ = " ";          // how pieces spell a space
  bool print_control_ = false;
  std::vector<float> scores_;        // (vocab_size) merge priority
  std::unordered_map<std::string, std::int32_t> lookup_;  // pieces text can produce
  std::array<std::int32_t, 256> byte_id_{};
  std::vector<bool> inner_pair_ = std::vector<bool>(256 * 256);  // byte pairs found inside mergeable pieces
  bool add_space_prefix_ = true;
};

void register_factories(glassbox::Registrar& r) {
  r.add_tokenizer({"llama2c",
                   "SentencePiece-style BPE (merge score, dummy-prefix space, <0xNN> byte fallback): a llama2.c "
                   "tokenizer.bin, or the model's GGUF vocabulary (tokenizer.ggml.model = llama) when no path is given",
                   {{"path", glassbox::ParamType::String, "", "tokenizer.bin file (empty: the model's own vocabulary)", {}, {}},
                    {"reference_merge", glassbox::ParamType::Bool, "false",
                     "use the slow quadratic merge loop the fast one is tested against", {}, {}}},
                   "path"},
                  [](const glassbox::Params& p, const glassbox::PluginContext& c) { return std::make_unique<SpmTokenizer>(p, c.metadata()); },
                  // SentencePiece vocabularies: GGUF's "llama", and llama2.c checkpoints, which name none.
                  {"llama", [](const glassbox::Metadata& m) {
                     const auto family = m.get_string("tokenizer.ggml.model");
                     return !family || *family == "llama";
                   }});
}

}  // namespace

GLASSBOX_MODULE("llama2c-tokenizer", "SentencePiece-style tokenizers: llama2.c files and GGUF 'llama' vocabularies", register_factories)
