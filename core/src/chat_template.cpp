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
    case ChatFormat::Gemma: return "gemma";
    case ChatFormat::Phi3: return "phi-3";
  }
  return "none";
}

ChatFormat detect_chat_format(std::string_view t) {
  auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (t.empty()) return ChatFormat::None;
  if (has("<|im_start|>")) return ChatFormat::ChatML;
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return ChatFormat::Llama3;
  if (has("[INST]")) return ChatFormat::Llama2;
  if (has("<start_of_turn>")) return ChatFormat::Gemma;
  if (has("<|assistant|>") && has("<|end|>")) return ChatFormat::Phi3;
  if (has("<|user|>") && has("<|assistant|>") && has("</s>")) return ChatFormat::Zephyr;
  return ChatFormat::Plain;
}

RenderedChat render_chat_marked(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  RenderedChat r;
  std::string& out = r.text;
  // Template text is recorded as a marker range (adjacent ones joined); contents are not.
  auto tpl = [&](std::string_view s) {
    if (s.empty()) return;
    if (!r.markers.empty() && r.markers.back().end == out.size()) r.markers.back().end += s.size();
    else r.markers.push_back({out.size(), out.size() + s.size()});
    out += s;
  };
  auto content = [&](std::string_view s) { out += s; };
  switch (f) {
    case ChatFormat::ChatML:
      for (const auto& m : messages) tpl("<|im_start|>" + m.role + "\n"), content(m.content), tpl("<|im_end|>\n");
      if (add_generation_prompt) tpl("<|im_start|>assistant\n");
      break;
    case ChatFormat::Llama3:
      for (const auto& m : messages) tpl("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n"), content(m.content), tpl("<|eot_id|>");
      if (add_generation_prompt) tpl("<|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    case ChatFormat::Llama2: {
      // [INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] assistant </s><s>[INST] user [/INST]
      std::string system;
      bool first = true;
      for (const auto& m : messages) {
        if (m.role == "system") {  // several (chat's pinned one, then its summary) join, in order
          system += (system.empty() ? "" : "\n\n") + m.content;
          continue;
        }
        if (m.role == "user") {
          if (!first) tpl("<s>");
          tpl("[INST] ");
          if (!system.empty()) { tpl("<<SYS>>\n"), content(system), tpl("\n<</SYS>>\n\n"); system.clear(); }
          content(m.content), tpl(" [/INST]");
          first = false;
        } else {
          tpl(" "), content(m.content), tpl(" </s>");
        }
      }
      break;
    }
    case ChatFormat::Gemma: {
      // <start_of_turn>user\n…<end_of_turn>\n<start_of_turn>model\n: Gemma has no system role, its
      // template puts a system message at the head of the first user turn.
      std::string system;
      for (const auto& m : messages) {
        if (m.role == "system") { system += m.content + "\n\n"; continue; }  // several join, in order
        tpl("<start_of_turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n");
        if (!system.empty() && m.role == "user") content(system), system.clear();
        content(m.content), tpl("<end_of_turn>\n");
      }
      if (add_generation_prompt) tpl("<start_of_turn>model\n");
      break;
    }
    case ChatFormat::Phi3:
      for (const auto& m : messages) tpl("<|" + m.role + "|>\n"), content(m.content), tpl("<|end|>\n");
      if (add_generation_prompt) tpl("<|assistant|>\n");
      break;
    case ChatFormat::Zephyr:
      for (const auto& m : messages) tpl("<|" + m.role + "|>\n"), content(m.content), tpl("</s>\n");
      if (add_generation_prompt) tpl("<|assistant|>\n");
      break;
    case ChatFormat::None:
    case ChatFormat::Plain:
      for (const auto& m : messages) {
        const std::string who = m.role == "user" ? "User" : m.role == "assistant" ? "Assistant" : "System";
        tpl(who + ": "), content(m.content), tpl("\n");
      }
      if (add_generation_prompt) tpl("Assistant:");
      break;
  }
  return r;
}

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  return render_chat_marked(f, messages, add_generation_prompt).text;
}

std::vector<std::int32_t> encode_chat(const Tokenizer& tok, ChatFormat f, const std::vector<ChatMessage>& messages,
                                      bool add_generation_prompt, bool bos) {
  const RenderedChat r = render_chat_marked(f, messages, add_generation_prompt);
  EncodeOptions o;
  o.bos = bos && tok.add_bos();  // Qwen and GPT-2 vocabularies add none
  o.parse_special = true;
  o.special_ranges = r.markers;
  return tok.encode(r.text, o);
}

}  // namespace glassbox
