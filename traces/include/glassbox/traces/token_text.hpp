// A token's text for a person: the one place that decides how a special token (llama2.c spells EOS
// "\n</s>\n") or a byte token (half a UTF-8 character) reads on a screen, in a report or in a drawing.
// Every place a person reads a token goes through these; the traces and reports themselves keep the raw text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace glassbox {
class Tokenizer;
}

namespace glassbox::traces {

// The bare name of a special token known only by its text (a trace, a report): "</s>" for "\n</s>\n",
// "<|eot_id|>" for itself; empty for any other text. A special token is a '<…>' name without blanks inside
// that is either wrapped in blanks (llama2.c's "\n<s>\n", "\n</s>\n"), in <|…|> form, or one of <s>, </s>,
// <unk>, <pad>, <eos>, <bos>.
std::string special_name(std::string_view text);

// The text as a person reads it: a special token's bare name; bytes that are not UTF-8 as <0xE2>; the
// text itself otherwise (no quoting, no escaping: each output escapes for its own medium).
std::string person_text(std::string_view text);

// The same from the tokenizer, which knows the token's type: a control token's name, a byte token's
// <0xNN>, else the token's text as decoded after `prev` (-1: none).
std::string person_text(const Tokenizer& tok, std::int32_t prev, std::int32_t id);

}  // namespace glassbox::traces
