// Chat formats recognized from a template's markers (after llama.cpp's llm_chat_detect_template),
// and each format's turn layout.
#include "glassbox/chat_template.hpp"

namespace glassbox {

std::string_view chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::None: return "none";
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama2: return "llama-2";
    case ChatFormat::Llama3: return "llama-3";
    case ChatFormat::Zephyr: return "zephyr";
    case ChatFormat::Plain: return "plain";
  }
  return "none";
}

ChatFormat detect_chat_format(std::string_view t) {
  auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (t.empty()) return ChatFormat::None;
  if (has("<|im_start|>")) return ChatFormat::ChatML;
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return ChatFormat::Llama3;
  if (has("[INST]")) return ChatFormat::Llama2;
  if (has("<|user|>") && has("<|assistant|>") && has("</s>")) return ChatFormat::Zephyr;
  return ChatFormat::Plain;
}

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  switch (f) {
    case ChatFormat::ChatML:
      for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case ChatFormat::Llama3:
      for (const auto& m : messages) out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFormat::Llama2: {
      // [INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] assistant </s><s>[INST] user [/INST]
      std::string system;
      bool first = true;
      for (const auto& m : messages) {
        if (m.role == "system") { system = m.content; continue; }
        if (m.role == "user") {
          if (!first) out += "<s>";
          out += "[INST] ";
          if (!system.empty()) { out += "<<SYS>>\n" + system + "\n<</SYS>>\n\n"; system.clear(); }
          out += m.content + " [/INST]";
          first = false;
        } else {
          out += " " + m.content + " </s>";
        }
      }
      break;
    }
    case ChatFormat::Zephyr:
      for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
      if (add_generation_prompt) out += "<|assistant|>\n";
      break;
    case ChatFormat::None:
    case ChatFormat::Plain:
      for (const auto& m : messages) {
        const std::string who = m.role == "user" ? "User" : m.role == "assistant" ? "Assistant" : "System";
        out += who + ": " + m.content + "\n";
      }
      if (add_generation_prompt) out += "Assistant:";
      break;
  }
  return out;
}

}  // namespace glassbox
