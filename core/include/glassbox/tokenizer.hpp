// The Tokenizer plugin interface: text <-> token ids, with what real vocabularies need
// (BOS/EOS policy, token types, several end-of-generation ids, a chat template, control tokens
// spelled in text), and VocabTokenizer, the vocabulary-table base both tokenizer plugins share.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/params.hpp"

namespace glassbox {

// GGUF's tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : std::uint8_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };
std::string_view token_type_name(TokenType t);

// Bytes [begin, end) of a text.
struct TextRange {
  std::size_t begin = 0, end = 0;
};

struct EncodeOptions {
  bool bos = false;  // prepend BOS (when the vocabulary has one)
  bool eos = false;  // append EOS
  // Take the vocabulary's control and unknown tokens spelled in the text ("<|im_start|>", "</s>") as
  // their single ids, as llama.cpp's parse_special does. Off, text never yields one: "<s>" in a
  // prompt is three characters. (User-defined tokens are matched either way, as llama.cpp does.)
  bool parse_special = false;
  // With parse_special, only spellings lying wholly inside one of these ranges count (a chat
  // template's markers), so the text between them (a user's message) cannot inject a control
  // token. Empty: anywhere in the text.
  std::span<const TextRange> special_ranges = {};
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Encodes text, optionally framed by BOS / EOS, optionally parsing control tokens (above).
  virtual std::vector<std::int32_t> encode(std::string_view text, const EncodeOptions& opt) const = 0;
  // Plain text: control tokens are never produced ("<s>" in a prompt is not BOS).
  std::vector<std::int32_t> encode(std::string_view text, bool bos, bool eos) const {
    return encode(text, EncodeOptions{bos, eos, false, {}});
  }
  // The bytes to print for `id` when it follows `prev` (SentencePiece drops the dummy-prefix
  // space after BOS; control tokens print nothing). The view lives as long as the tokenizer.
  virtual std::string_view decode(std::int32_t prev, std::int32_t id) const = 0;
  // The raw vocabulary entry of `id` (e.g. "▁sunny" or " sunny", "<0x0A>", "Ġthe").
  virtual std::string_view piece(std::int32_t id) const = 0;
  virtual std::int32_t vocab_size() const = 0;
  virtual std::int32_t bos_id() const = 0;  // -1: none
  virtual std::int32_t eos_id() const = 0;  // -1: none

  // What the vocabulary says about itself; defaults fit llama2.c's SentencePiece files.
  virtual TokenType token_type(std::int32_t id) const { return id == bos_id() || id == eos_id() ? TokenType::Control : TokenType::Normal; }
  virtual bool add_bos() const { return true; }   // prepend BOS to a prompt
  virtual bool add_eos() const { return false; }  // append EOS to a prompt
  // Ids that end generation (EOS, <|eot_id|>, <|im_end|>, ...). Default: {eos_id()}.
  virtual std::vector<std::int32_t> eog_ids() const { return eos_id() >= 0 ? std::vector<std::int32_t>{eos_id()} : std::vector<std::int32_t>{}; }
  // The model's chat template (Jinja text from tokenizer.chat_template), empty when none.
  virtual std::string_view chat_template() const { return {}; }
  // "llama" (SentencePiece), "gpt2" (byte-level BPE), ...: for the trace header and `inspect`.
  virtual std::string_view model_kind() const { return "llama"; }

  // The plugin's name and resolved parameters (the registry's wrapper answers these), so every
  // kind describes itself the same way in the trace header.
  virtual std::string name() const { return {}; }
  virtual const Params& params() const {
    static const Params none;
    return none;
  }

  bool is_eog(std::int32_t id) const {
    for (auto e : eog_ids()) if (e == id) return true;
    return false;
  }
};

// What every vocabulary read from GGUF metadata shares, whatever its family: the special ids
// (tokenizer.ggml.{unknown,bos,eos,eot,eom}_token_id; 0xFFFFFFFF = none), the BOS/EOS policy and
// the chat template. Ids are checked against the vocabulary size n; errors name `source`.
struct SpecialTokens {
  std::int32_t unk = -1, bos = -1, eos = -1, eot = -1, eom = -1;
  bool add_bos = true, add_eos = false;
  std::string chat_template;
};
class Metadata;
SpecialTokens read_special_tokens(const Metadata& m, std::size_t n, bool default_add_bos, const std::string& source);
// EOS, EOT, EOM, then every control token spelled like one of llama.cpp's end-of-generation
// markers (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, <|eom_id|>, </s>).
std::vector<std::int32_t> end_of_generation_ids(const SpecialTokens& s, const std::vector<std::string>& pieces,
                                                const std::vector<TokenType>& types);

// A tokenizer that is a table of pieces with types (what llama.cpp calls a vocab): the accessors,
// the special ids and the splitting of text at special tokens live here; a plugin adds how it
// turns a stretch of ordinary text into ids (encode_text) and fills the tables.
class VocabTokenizer : public Tokenizer {
 public:
  using Tokenizer::encode;
  // Splits text at special tokens (user-defined always; control and unknown with parse_special),
  // leftmost first and the longest at a position, then encodes each stretch between them with
  // encode_text — llama.cpp's tokenizer_st_partition, so SentencePiece adds its dummy-prefix space
  // to every stretch, as llama.cpp does after each special token.
  std::vector<std::int32_t> encode(std::string_view text, const EncodeOptions& opt) const final;
  std::string_view decode(std::int32_t prev, std::int32_t id) const override;
  std::string_view piece(std::int32_t id) const override { check(id); return vocab_[id]; }
  std::int32_t vocab_size() const override { return static_cast<std::int32_t>(vocab_.size()); }
  std::int32_t bos_id() const override { return bos_; }
  std::int32_t eos_id() const override { return eos_; }
  TokenType token_type(std::int32_t id) const override { check(id); return types_[id]; }
  bool add_bos() const override { return add_bos_; }
  bool add_eos() const override { return add_eos_; }
  std::vector<std::int32_t> eog_ids() const override { return eog_; }
  std::string_view chat_template() const override { return chat_template_; }

 protected:
  explicit VocabTokenizer(std::string who) : who_(std::move(who)) {}
  // Appends the ids of a non-empty stretch of text holding no special token.
  virtual void encode_text(std::string_view text, std::vector<std::int32_t>& out) const = 0;
  // TokenizerError unless 0 <= id < vocab_size(), naming the plugin.
  void check(std::int32_t id) const;
  // Lists the special tokens encode matches, from vocab_ and types_; call once they are filled.
  // trim: a control or unknown token is spelled without the whitespace around its piece (llama2.c's
  // tokenizer.bin stores BOS as "\n<s>\n"; llama.cpp's converter names it "<s>").
  void index_special_tokens(bool trim = false);

  std::string who_;                   // "tokenizer 'bpe'", for messages
  std::string source_;                // file or model, for messages
  std::vector<std::string> vocab_;    // (vocab_size) raw pieces
  std::vector<TokenType> types_;      // (vocab_size)
  std::vector<std::string> decoded_;  // (vocab_size) bytes to print
  std::int32_t unk_ = -1, bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1;
  bool add_bos_ = false, add_eos_ = false;
  std::vector<std::int32_t> eog_;
  std::string chat_template_;

 private:
  struct Special {
    std::int32_t id;
    bool control;      // control or unknown: matched only with parse_special
    std::string text;  // its spelling in text
  };
  std::vector<Special> special_;  // non-empty pieces, by id
};

// Concatenates decode(prev, id) over ids, skipping a leading BOS: the inverse of encode.
std::string decode_all(const Tokenizer& tok, const std::vector<std::int32_t>& ids);

}  // namespace glassbox
