// Chat formats: which common turn format a model's chat template (GGUF tokenizer.chat_template,
// Jinja text) uses, recognized by its markers as llama.cpp does, and rendering turns in it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/tokenizer.hpp"

namespace glassbox {

enum class ChatFormat { None, ChatML, Llama2, Llama3, Zephyr, Plain, Gemma, Phi3 };
// "chatml", "llama-2", "llama-3", "zephyr", "plain", "none", "gemma", "phi-3"
std::string_view chat_format_name(ChatFormat f);
// From the template's markers; None for an empty template, Plain ("User: …\nAssistant: …") for an
// unrecognized one.
ChatFormat detect_chat_format(std::string_view jinja_template);

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};
// The conversation as the model was trained to see it, ending with the assistant's turn opened
// (add_generation_prompt). Control markers appear as text: encode it with special tokens parsed.
std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt = true);

// The same text, with the byte ranges the template wrote (markers, role names, separators) apart
// from the messages' contents: encode with EncodeOptions{.parse_special = true, .special_ranges =
// markers} and a marker becomes its control token while a message spelling "<|im_start|>" stays text.
struct RenderedChat {
  std::string text;
  std::vector<TextRange> markers;
};
RenderedChat render_chat_marked(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt = true);

// render_chat_marked, encoded with BOS (when the tokenizer adds one) and its markers parsed.
std::vector<std::int32_t> encode_chat(const Tokenizer& tok, ChatFormat f, const std::vector<ChatMessage>& messages,
                                      bool add_generation_prompt = true, bool bos = true);

}  // namespace glassbox
