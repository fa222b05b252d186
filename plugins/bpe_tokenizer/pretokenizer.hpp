// The bpe tokenizer's pre-tokenizer: splits text into the pieces BPE then encodes, by a list of regexes
// applied in turn. The regexes every known vocabulary uses (GPT-2, Llama 3, Qwen2, digit splits, llama.cpp's
// default list) run as hand-written rules over Unicode property tables generated from ICU's data
// (unicode_tables.inc, tools/gen-unicode-tables.sh), giving ICU's regex pieces without a regex engine;
// any other regex runs through ICU's regex engine where the build has ICU (GLASSBOX_BPE_HAVE_ICU).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace glassbox::bpe {

// ---- The known pre-tokenizer regexes (llama.cpp's llama-vocab.cpp spellings) ----

// GPT-2's own pattern (also Hugging Face's ByteLevel pre-tokenizer with use_regex).
inline constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's, with (?i:'s|...) spelled out as llama.cpp does: ICU's case folding would also let 'ſ match.
// The tokenizer reads the original spelling (kLlama3Original, in tokenizer.json files) as this one.
inline constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kLlama3Original =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kQwen2Original =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kEachNumber = R"(\p{N})";   // SmolLM's digit split; Digits(individual_digits)
inline constexpr const char* kNumberRuns = R"(\p{N}+)";  // llama.cpp's default list; Digits
inline constexpr const char* kDefaultPunct = R"([\p{P}\$\+<=>\^~\|]+)";  // llama.cpp's default list
inline constexpr const char* kDigitTriples = "[0-9][0-9][0-9]";          // llama.cpp's default list

// The split rules written as code, one per known regex.
enum class Rule { Gpt2, Llama3, Qwen2, EachNumber, NumberRuns, DefaultPunct, DigitTriples };
// The rule that splits as `regex` does (in the tokenizer's \s = White_Space reading), if there is one.
// Both spellings of Llama 3's and Qwen2's regexes give the spelled-out one's rule (see kLlama3).
std::optional<Rule> rule_for(std::string_view regex);
const char* rule_name(Rule r);

// ---- Unicode properties (unicode_tables.inc) ----

inline constexpr unsigned char kLetter = 1, kNumber = 2, kPunct = 4, kSpace = 8;  // \p{L}, \p{N}, \p{P}, White_Space
unsigned char unicode_props(char32_t c);
// "ICU 72.1, Unicode 15.0": where the tables came from.
const char* unicode_tables_icu_version();
const char* unicode_tables_unicode_version();

// ---- Text as code points ----

// The text's code points, each with its properties and its byte offset (off.back() == text size).
// An invalid byte becomes U+FFFD and stays one code point of one byte (as the ICU path always did), so
// pieces map back to the original bytes.
struct CodePoints {
  std::vector<char32_t> cp;
  std::vector<unsigned char> props;
  std::vector<std::size_t> off;
};
void decode(std::string_view text, CodePoints& out);

// UTF-8 to code points replacing each maximal ill-formed subpart by one U+FFFD (Unicode's recommended
// practice; what ICU's UnicodeString::fromUTF8 does): for vocabulary pieces, not for text to split.
std::u32string utf8_to_u32(std::string_view s);

using Range = std::pair<std::uint32_t, std::uint32_t>;  // code point indices [first, last)
// Splits the code points [piece.first, piece.second) into the rule's matches and the text between them,
// appended to out in order (what a regex find loop over that region gives).
void split(Rule rule, const CodePoints& text, Range piece, std::vector<Range>& out);

// ---- The pre-tokenizer: a list of regexes applied in turn ----

class PreTokenizer {
 public:
  enum class Engine {
    Rules,  // the code rules for known regexes, ICU's regex engine for the others (where the build has ICU)
    Icu,    // ICU's regex engine for every regex (the reference the rules are tested against)
  };
  // Throws TokenizerError naming `source` and the regex when one does not compile, or when the build has
  // no ICU and a regex is not a known one.
  PreTokenizer(const std::vector<std::string>& regexes, const std::string& source, Engine engine = Engine::Rules);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // The pieces of text as byte ranges [first, last), in order, together covering the text; each regex
  // splits every piece the previous one left into its matches and the text between them.
  void split(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const;

  static bool has_icu();  // whether this build can run regexes other than the known ones

 private:
  struct IcuPattern;
  struct Step {
    std::string regex;
    std::optional<Rule> rule;
    std::unique_ptr<IcuPattern> icu;
  };
  std::vector<Step> steps_;
  std::string source_;
};

}  // namespace glassbox::bpe
