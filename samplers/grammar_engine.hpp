// GBNF grammars (llama.cpp's format) for the "grammar" sampler stage: the parser, the stack-based
// recognizer that says which token texts can continue a parse (llama.cpp's llama-grammar algorithm),
// and the JSON-schema -> GBNF converter. A static library shared by the stage module and its tests.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace glassbox::grammar {

// One element of a rule's flat encoding (llama.cpp's llama_grammar_element): a rule is a list of
// alternatives, each a sequence of elements, separated by Alt and closed by End. A character class
// is a Char/CharNot followed by CharAlt (another character) and CharRngUpper (closing a range).
enum class Type : std::uint8_t { End, Alt, RuleRef, Char, CharNot, CharRngUpper, CharAlt, CharAny };
struct Element {
  Type type;
  std::uint32_t value;  // a code point, or a rule id
};
using Rule = std::vector<Element>;

// The bounds on what a grammar may cost (docs/reliability.md); past one, a ConfigError naming it. They
// hold wherever the grammar stage runs (run, chat, compare, serve).
struct Limits {
  std::size_t max_elements = 4'000'000;  // elements of all rules once repetitions are written out (~32 MB)
  std::size_t max_rules = 1'000'000;     // rules, generated ones included
  std::size_t max_stacks = 250'000;      // parse stacks after one character (an alternative each, for a 100k-way choice)
  double max_step_ms = 5000;             // wall time of one step's walk (accepting a token, or filtering the candidates)
};

struct Grammar {
  std::vector<Rule> rules;          // by rule id
  std::vector<std::string> names;   // by rule id ("root", "list-3" for generated ones)
  std::uint32_t root = 0;
};

// Parses GBNF text. Errors are ConfigErrors "SOURCE:LINE:COLUMN: what was expected"; an undefined rule
// reference is named with the place of its first use; a missing `root`, or left recursion (which a
// stack-based recognizer cannot run), is refused too.
Grammar parse(std::string_view text, const std::string& source, const Limits& limits = {});

// The grammar as GBNF text again (generated rules included), for messages and tests.
std::string to_gbnf(const Grammar& g);

// A UTF-8 decoding that may stop inside a character: `n_remain` bytes are still due and `value` holds
// the bits so far (n_remain -1: invalid UTF-8); `length` is that character's length in bytes.
struct PartialUtf8 {
  std::uint32_t value = 0;
  int n_remain = 0;
  int length = 0;
};
// Decodes `text` continuing `start`: the complete code points, closed by a 0, and what is left over.
// Invalid UTF-8 gives just {0} and n_remain -1; that includes what encodes no Unicode scalar value:
// overlong forms, surrogates (U+D800..DFFF), values past U+10FFFF and the bytes C0, C1, F5..FF.
std::pair<std::vector<std::uint32_t>, PartialUtf8> decode_utf8(std::string_view text, PartialUtf8 start);

// Where a parse can be: each stack holds the element positions still to match, the next one on top
// (back), always a character element; an empty stack means the grammar is complete.
using Stack = std::vector<const Element*>;
using Stacks = std::vector<Stack>;

// One candidate being checked: its index in the caller's list and its text's code points (0-closed).
struct TokenText {
  std::size_t index;
  const std::uint32_t* code_points;
  PartialUtf8 partial;  // what the text leaves unfinished at its end
};

// Runs a grammar over text: the set of stacks after the text accepted so far.
class Recognizer {
 public:
  // `g` must outlive the recognizer. Each step (reset, accept_text, reject) is bounded by `limits`
  // (stacks, wall time) and stops with a ConfigError when the process's interrupt flag is raised
  // (SIGINT/SIGTERM: glassbox/interrupt_flag.hpp).
  explicit Recognizer(const Grammar& g, const Limits& limits = {});
  void reset();                           // back to the start (the root rule)
  // True when the text so far is a complete sentence (some stack is empty).
  bool complete() const;
  // True when no continuation is possible (every stack died): only after a rejected accept.
  bool dead() const { return stacks_.empty(); }
  // Advances over a token's text; returns false (and leaves the state unchanged) when the text cannot
  // continue the parse.
  bool accept_text(std::string_view text);
  // The candidates whose text cannot continue the parse from here (each stack's rejections, then the
  // next stack's over those: llama.cpp's llama_grammar_reject_candidates). Cost: for each stack, one
  // character test per candidate, then again per surviving candidate for each further character.
  std::vector<TokenText> reject(const std::vector<TokenText>& candidates) const;
  const PartialUtf8& partial() const { return partial_; }
  const Stacks& stacks() const { return stacks_; }

 private:
  const Grammar& g_;
  Limits limits_;
  Stacks stacks_;
  PartialUtf8 partial_;
};

// Converts a JSON schema (text) to GBNF text, for the documented subset: type object (properties,
// required, additionalProperties), string (minLength, maxLength), number, integer, boolean, null,
// array (items, minItems, maxItems), enum, const; annotations (title, description, $schema, $id,
// $comment, default, examples) are ignored. Anything else is a ConfigError "SOURCE: ... at /key/path".
std::string json_schema_to_gbnf(std::string_view schema_text, const std::string& source);

}  // namespace glassbox::grammar
