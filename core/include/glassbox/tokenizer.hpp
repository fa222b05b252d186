// The Tokenizer plugin interface: text <-> token ids.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace glassbox {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Encodes text, optionally framed by BOS / EOS.
  virtual std::vector<std::int32_t> encode(std::string_view text, bool bos, bool eos) const = 0;
  // The bytes to print for `id` when it follows `prev` (SentencePiece drops the dummy-prefix
  // space after BOS). The view stays valid as long as the tokenizer lives.
  virtual std::string_view decode(std::int32_t prev, std::int32_t id) const = 0;
  // The raw vocabulary entry of `id` (e.g. " sunny", "<0x0A>").
  virtual std::string_view piece(std::int32_t id) const = 0;
  virtual std::int32_t vocab_size() const = 0;
  virtual std::int32_t bos_id() const = 0;
  virtual std::int32_t eos_id() const = 0;
};

// Concatenates decode(prev, id) over ids, skipping a leading BOS: the inverse of encode.
std::string decode_all(const Tokenizer& tok, const std::vector<std::int32_t>& ids);

}  // namespace glassbox
