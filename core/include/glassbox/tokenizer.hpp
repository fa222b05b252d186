// The Tokenizer plugin interface: text <-> token ids, with what real vocabularies need
// (BOS/EOS policy, token types, several end-of-generation ids, a chat template).
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

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Encodes text, optionally framed by BOS / EOS. Control tokens are never produced from text:
  // "<s>" in a prompt is the three characters, not BOS.
  virtual std::vector<std::int32_t> encode(std::string_view text, bool bos, bool eos) const = 0;
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

// Concatenates decode(prev, id) over ids, skipping a leading BOS: the inverse of encode.
std::string decode_all(const Tokenizer& tok, const std::vector<std::int32_t>& ids);

}  // namespace glassbox
