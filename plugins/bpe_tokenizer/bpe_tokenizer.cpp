// Tokenizer "bpe": byte-level BPE (GPT-2, Llama 3, SmolLM, ...): regex pre-tokenization (pretokenizer.hpp), GPT-2's
// byte-to-unicode alphabet, merges by rank. Reads GGUF metadata, GPT-2's files, or a tokenizer.json.
#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <queue>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include <glassbox/error.hpp>
#include <glassbox/file_io.hpp>
#include <glassbox/structured_input.hpp>
#include <glassbox/plugin.hpp>

#include "pretokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using glassbox::TokenizerError;
using glassbox::TokenType;
using nlohmann::json;
using namespace glassbox::bpe;  // the known regexes (kGpt2, ...) and the pre-tokenizer


struct Family {
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // a pre-token that is itself a vocabulary entry is taken whole
  bool add_bos = false;
};

// GGUF tokenizer.ggml.pre names (llama.cpp's spelling) -> regex list.
std::optional<Family> family(const std::string& pre) {
  if (pre == "gpt2" || pre == "gpt-2" || pre == "phi-2" || pre == "mpt" || pre == "olmo" || pre == "jais")
    return Family{{kGpt2}};
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" || pre == "dbrx" || pre == "smaug-bpe")
    return Family{{kLlama3}, pre != "dbrx" && pre != "smaug-bpe", pre != "dbrx" && pre != "smaug-bpe"};
  if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "stablelm2") return Family{{kQwen2}};
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "codeshell" || pre == "exaone")
    return Family{{kEachNumber, kGpt2}};
  // llama.cpp's fallback for a missing or "default" pre-tokenizer.
  if (pre == "default" || pre.empty())
    return Family{{kDefaultPunct, kGpt2, kNumberRuns, kDigitTriples}};
  return std::nullopt;
}
constexpr const char* kKnownPre = "gpt-2, llama-bpe (llama3), qwen2, smollm (starcoder, ...), default";

// GPT-2's byte -> code point alphabet: printable Latin-1 bytes stand for themselves, the others
// (controls, space, ...) take code points from 256 on, so every byte is a visible character.
std::array<char32_t, 256> byte_to_unicode() {
  std::array<char32_t, 256> m{};
  std::array<bool, 256> direct{};
  for (int b = 0; b < 256; ++b) direct[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) m[b] = direct[b] ? static_cast<char32_t>(b) : next++;
  return m;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) out += static_cast<char>(cp);
  else if (cp < 0x800) { out += static_cast<char>(0xC0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
  else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string read_text(const fs::path& p) {
  if (auto why = glassbox::not_a_regular_file(p)) throw TokenizerError(p.string() + ": " + *why + " (expected a tokenizer file)");
  std::ifstream f(p, std::ios::binary);
  if (!f) throw TokenizerError(p.string() + ": cannot open tokenizer file: " + std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every JSON file here goes through the size and nesting limits of structured_input.hpp: a deeply nested
// pre_tokenizer would otherwise overflow the stack when it is copied.
json read_json(const fs::path& p) { return glassbox::read_json_input<TokenizerError>(p.string(), "a tokenizer file"); }

class BpeTokenizer final : public glassbox::VocabTokenizer {
 public:
  BpeTokenizer(const glassbox::Params& p, const glassbox::Metadata& model) : VocabTokenizer("tokenizer 'bpe'") {
    const std::string& path = p.get_string("path");
    std::string pre_override = p.get_string("pre");
    if (!path.empty()) {
      const fs::path dir(path);
      std::error_code ec;
      if (fs::is_directory(dir, ec)) {
        if (fs::exists(dir / "tokenizer.json", ec)) load_hf(dir / "tokenizer.json");
        else if (fs::exists(dir / "encoder.json", ec) && fs::exists(dir / "vocab.bpe", ec)) load_gpt2(dir);
        else throw TokenizerError(path + ": folder holds neither tokenizer.json nor encoder.json + vocab.bpe");
      } else if (fs::exists(dir, ec)) {
        load_hf(dir);
      } else {
        throw TokenizerError(path + ": no such tokenizer file or folder");
      }
    } else if (model.get_string("tokenizer.ggml.model") == "gpt2") {
      load_metadata(model);
    } else if (auto kind = model.get_string("tokenizer.ggml.model")) {
      throw glassbox::ConfigError("tokenizer 'bpe': model metadata has tokenizer.ggml.model = '" + *kind +
                                  "', expected 'gpt2' (use the 'llama2c' tokenizer for 'llama')");
    } else {
      throw glassbox::ConfigError("tokenizer 'bpe': no tokenizer given (parameter 'path': a tokenizer.json, or a folder with "
                                  "encoder.json + vocab.bpe) and the model has no tokenizer.ggml.* metadata");
    }
    if (!pre_override.empty()) {
      auto f = family(pre_override);
      if (!f) throw glassbox::ConfigError("tokenizer 'bpe': unknown pre-tokenizer '" + pre_override + "' (known: " + kKnownPre + ")");
      regexes_ = f->regexes;
      ignore_merges_ = f->ignore_merges;
    }
    const std::string& bos = p.get_string("add_bos");
    if (bos == "true") add_bos_ = true;
    else if (bos == "false") add_bos_ = false;
    else if (bos != "auto") throw glassbox::ConfigError("tokenizer 'bpe': add_bos = '" + bos + "', expected auto, true or false");
    if (add_bos_ && bos_ < 0) throw TokenizerError(source_ + ": BOS is to be added but the vocabulary names no BOS token");
    finish();
  }

  std::string_view model_kind() const override { return "gpt2"; }

 private:
  // Pre-tokenizes text and BPE-encodes every piece. (User-defined tokens were split off before, by
  // VocabTokenizer::encode, as Hugging Face and llama.cpp do.)
  void encode_text(std::string_view text, std::vector<std::int32_t>& out) const override {
    if (text.empty()) return;
    std::vector<std::pair<std::size_t, std::size_t>> pieces;
    pre_->split(text, pieces);
    std::string word;
    std::vector<std::int32_t> syms;
    for (auto [a, b] : pieces) bpe(text.substr(a, b - a), word, syms, out);
  }

  // One pre-token: its bytes as GPT-2 characters, then merges by rank (lowest first, leftmost on
  // ties) through a heap over adjacent pairs; stale heap entries are skipped when popped.
  void bpe(std::string_view bytes, std::string& word, std::vector<std::int32_t>& syms, std::vector<std::int32_t>& out) const {
    if (ignore_merges_) {
      word.clear();
      for (unsigned char c : bytes) word += byte_char_[c];
      if (auto it = lookup_.find(word); it != lookup_.end()) { out.push_back(it->second); return; }
    }
    syms.clear();
    for (unsigned char c : bytes) {
      std::int32_t id = byte_tok_[c];
      if (id < 0) id = unk_;
      if (id < 0) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", c);
        throw TokenizerError(source_ + ": byte " + hex + " has no token in the vocabulary and there is no unknown token");
      }
      syms.push_back(id);
    }
    const int n = static_cast<int>(syms.size());
    if (n == 1) { out.push_back(syms[0]); return; }
    struct Cand {
      std::int32_t rank;
      int left, right;
      std::int32_t left_id, right_id, merged;
      bool operator<(const Cand& o) const { return rank > o.rank || (rank == o.rank && left > o.left); }
    };
    std::vector<int> prev(n), nxt(n);
    for (int i = 0; i < n; ++i) prev[i] = i - 1, nxt[i] = i + 1 < n ? i + 1 : -1;
    std::priority_queue<Cand> heap;
    auto consider = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      auto it = merges_.find(key(syms[l], syms[r]));
      if (it != merges_.end()) heap.push({it->second.first, l, r, syms[l], syms[r], it->second.second});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
    while (!heap.empty()) {
      const Cand c = heap.top();
      heap.pop();
      if (syms[c.left] < 0 || syms[c.right] < 0 || nxt[c.left] != c.right || syms[c.left] != c.left_id || syms[c.right] != c.right_id)
        continue;
      syms[c.left] = c.merged;
      syms[c.right] = -1;
      nxt[c.left] = nxt[c.right];
      if (nxt[c.right] >= 0) prev[nxt[c.right]] = c.left;
      consider(prev[c.left], c.left);
      consider(c.left, nxt[c.left]);
    }
    for (int i = 0; i >= 0; i = nxt[i]) out.push_back(syms[i]);
  }

  static std::uint64_t key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }

  // ---- Sources ----

  void set_vocab_size(std::size_t n) {
    if (n == 0 || n > (1u << 22)) throw TokenizerError(source_ + ": " + std::to_string(n) + " tokens, expected 1..4194304");
    vocab_.resize(n);
    types_.resize(n, TokenType::Normal);
  }

  void add_merge(const std::string& a, const std::string& b, std::size_t rank, std::unordered_map<std::string, std::int32_t>& ids) {
    auto ia = ids.find(a), ib = ids.find(b), im = ids.find(a + b);
    // Merges whose parts or result are not in the vocabulary can never apply; skip them.
    if (ia == ids.end() || ib == ids.end() || im == ids.end()) return;
    merges_.try_emplace(key(ia->second, ib->second), static_cast<std::int32_t>(rank), im->second);
  }
  void add_merge_line(const std::string& line, std::size_t rank, std::unordered_map<std::string, std::int32_t>& ids) {
    const auto sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
      throw TokenizerError(source_ + ": merge " + std::to_string(rank) + " '" + line.substr(0, 80) + "' is not two pieces separated by one space");
    add_merge(line.substr(0, sp), line.substr(sp + 1), rank, ids);
  }
  std::unordered_map<std::string, std::int32_t> all_ids() const {
    std::unordered_map<std::string, std::int32_t> ids;
    for (std::int32_t i = static_cast<std::int32_t>(vocab_.size()) - 1; i >= 0; --i) ids[vocab_[i]] = i;
    return ids;
  }

  void load_metadata(const glassbox::Metadata& m) {
    source_ = m.source.empty() ? "model metadata" : m.source;
    auto fail = [&](const std::string& why) { return TokenizerError(source_ + ": " + why); };
    auto tokens = m.get_strings("tokenizer.ggml.tokens");
    if (!tokens) throw fail("tokenizer.ggml.model is 'gpt2' but tokenizer.ggml.tokens is missing");
    set_vocab_size(tokens->size());
    vocab_ = std::move(*tokens);
    const std::size_t n = vocab_.size();
    if (auto ty = m.get_ints("tokenizer.ggml.token_type")) {
      if (ty->size() != n) throw fail("tokenizer.ggml.token_type has " + std::to_string(ty->size()) + " entries, expected " + std::to_string(n));
      for (std::size_t i = 0; i < n; ++i) {
        if ((*ty)[i] < 0 || (*ty)[i] > 6) throw fail("tokenizer.ggml.token_type[" + std::to_string(i) + "] = " + std::to_string((*ty)[i]) + " is not in 0..6");
        types_[i] = static_cast<TokenType>((*ty)[i]);
      }
    }
    auto merges = m.get_strings("tokenizer.ggml.merges");
    if (!merges) throw fail("tokenizer.ggml.model is 'gpt2' but tokenizer.ggml.merges is missing");
    auto ids = all_ids();
    for (std::size_t r = 0; r < merges->size(); ++r) add_merge_line((*merges)[r], r, ids);
    const std::string pre = m.get_string("tokenizer.ggml.pre").value_or("default");
    auto f = family(pre);
    if (!f) throw fail("tokenizer.ggml.pre = '" + pre + "' is not a known pre-tokenizer (known: " + kKnownPre + ")");
    regexes_ = f->regexes;
    ignore_merges_ = f->ignore_merges;
    const auto sp = glassbox::read_special_tokens(m, n, f->add_bos, source_);
    unk_ = sp.unk, bos_ = sp.bos, eos_ = sp.eos, eot_ = sp.eot, eom_ = sp.eom;
    add_bos_ = sp.add_bos;
    add_eos_ = sp.add_eos;
    chat_template_ = sp.chat_template;
  }

  // GPT-2's release files: encoder.json (piece -> id) and vocab.bpe (a version line, then merges).
  void load_gpt2(const fs::path& dir) {
    source_ = dir.string();
    const json enc = read_json(dir / "encoder.json");
    if (!enc.is_object()) throw TokenizerError((dir / "encoder.json").string() + ": expected an object of piece -> id");
    std::size_t n = 0;
    for (const auto& [k, v] : enc.items()) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= (1 << 22))
        throw TokenizerError((dir / "encoder.json").string() + ": id of '" + k + "' is not an integer in 0..4194303");
      n = std::max(n, v.get<std::size_t>() + 1);
    }
    // Ids are bounded by the number of entries (a dense table, as GPT-2's is): one id of 4194303 in a
    // 6 KB file would otherwise size the vocabulary at 4 million pieces.
    if (n > enc.size())
      throw TokenizerError((dir / "encoder.json").string() + ": an id of " + std::to_string(n - 1) + " but only " +
                           std::to_string(enc.size()) + " entries (ids must lie in 0.." + std::to_string(enc.size() - 1) + ")");
    set_vocab_size(n);
    std::vector<bool> seen(n);
    for (const auto& [k, v] : enc.items()) vocab_[v.get<std::size_t>()] = k, seen[v.get<std::size_t>()] = true;
    for (std::size_t i = 0; i < n; ++i) if (!seen[i]) types_[i] = TokenType::Unused;
    std::istringstream bpe(read_text(dir / "vocab.bpe"));
    auto ids = all_ids();
    std::string line;
    std::size_t rank = 0;
    source_ = (dir / "vocab.bpe").string();
    while (std::getline(bpe, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line.rfind("#version", 0) == 0) continue;
      add_merge_line(line, rank++, ids);
    }
    source_ = dir.string();
    regexes_ = {kGpt2};
    // GPT-2's one special token is both the document separator and the end of text; no BOS is added.
    if (auto it = ids.find("<|endoftext|>"); it != ids.end()) {
      types_[it->second] = TokenType::Control;
      bos_ = eos_ = it->second;
    }
    add_bos_ = false;
  }

  // A Hugging Face tokenizer.json (model.type BPE, byte-level), plus tokenizer_config.json beside it
  // for the BOS/EOS names and the chat template when present.
  void load_hf(const fs::path& file) {
    source_ = file.string();
    auto fail = [&](const std::string& why) { return TokenizerError(source_ + ": " + why); };
    const json j = read_json(file);
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) throw fail("no 'model' object (expected a tokenizer.json)");
    // Typed reads that name the file and key: json::value() would throw its own type_error, which reaches
    // the user as the plugin's failure without the file or the key.
    auto text_at = [&](const json& o, const char* key, const std::string& fallback, const std::string& where) -> std::string {
      if (!o.is_object()) return fallback;
      auto it = o.find(key);
      if (it == o.end() || it->is_null()) return fallback;
      if (!it->is_string()) throw fail(where + key + ": expected a string, got " + std::string(it->type_name()) + " " + it->dump().substr(0, 40));
      return it->get<std::string>();
    };
    auto array_at = [&](const json& o, const char* key, const std::string& where) -> json {
      auto it = o.find(key);
      if (it == o.end() || it->is_null()) return json::array();
      if (!it->is_array()) throw fail(where + key + ": expected an array, got " + std::string(it->type_name()));
      return *it;
    };
    const json& model = j["model"];
    const std::string type = text_at(model, "type", "BPE", "model.");
    if (type != "BPE") throw fail("model.type is '" + type + "', expected 'BPE'");
    if (!model.contains("vocab") || !model["vocab"].is_object()) throw fail("model.vocab is not an object of piece -> id");
    std::size_t n = 0;
    auto id_of = [&](const json& v, const std::string& what) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= (1 << 22))
        throw fail(what + " is not an integer in 0..4194303");
      return v.get<std::size_t>();
    };
    for (const auto& [k, v] : model["vocab"].items()) n = std::max(n, id_of(v, "model.vocab['" + k + "']") + 1);
    const json added = array_at(j, "added_tokens", "");
    for (std::size_t i = 0; i < added.size(); ++i) {
      if (!added[i].is_object()) throw fail("added_tokens[" + std::to_string(i) + "]: expected an object {id, content}, got " + std::string(added[i].type_name()));
      n = std::max(n, id_of(added[i].contains("id") ? added[i]["id"] : json(), "added_tokens[" + std::to_string(i) + "].id") + 1);
    }
    // Ids are bounded by the number of entries (model.vocab and added_tokens), as for encoder.json.
    const std::size_t entries = model["vocab"].size() + added.size();
    if (n > entries)
      throw fail("an id of " + std::to_string(n - 1) + " but only " + std::to_string(entries) +
                 " entries in model.vocab and added_tokens (ids must lie in 0.." + std::to_string(entries == 0 ? 0 : entries - 1) + ")");
    set_vocab_size(n);
    std::vector<bool> seen(n);
    for (const auto& [k, v] : model["vocab"].items()) vocab_[v.get<std::size_t>()] = k, seen[v.get<std::size_t>()] = true;
    for (const auto& a : added) {
      const std::size_t id = a["id"].get<std::size_t>();
      if (!a.contains("content") || !a["content"].is_string()) throw fail("added token " + std::to_string(id) + " has no content string");
      vocab_[id] = a["content"].get<std::string>();
      types_[id] = a.contains("special") && a["special"].is_boolean() && a["special"].get<bool>() ? TokenType::Control : TokenType::UserDefined;
      seen[id] = true;
    }
    for (std::size_t i = 0; i < n; ++i) if (!seen[i]) types_[i] = TokenType::Unused;
    auto ids = all_ids();
    const json merges = array_at(model, "merges", "model.");
    for (std::size_t r = 0; r < merges.size(); ++r) {
      const json& mg = merges[r];
      if (mg.is_string()) add_merge_line(mg.get<std::string>(), r, ids);
      else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) add_merge(mg[0], mg[1], r, ids);
      else throw fail("model.merges[" + std::to_string(r) + "] is neither \"a b\" nor [\"a\", \"b\"]");
    }
    if (model.contains("ignore_merges") && !model["ignore_merges"].is_boolean() && !model["ignore_merges"].is_null())
      throw fail("model.ignore_merges: expected true or false, got " + std::string(model["ignore_merges"].type_name()));
    ignore_merges_ = model.contains("ignore_merges") && model["ignore_merges"].is_boolean() && model["ignore_merges"].get<bool>();
    if (model.contains("unk_token") && model["unk_token"].is_string())
      if (auto it = ids.find(model["unk_token"].get<std::string>()); it != ids.end()) unk_ = it->second;
    regexes_ = hf_pre_tokenizer(j.value("pre_tokenizer", json()));

    // BOS/EOS: tokenizer_config.json's names, else the usual spellings; BOS is added when the
    // post-processor's template starts with a special token (or the config says add_bos_token).
    auto token_name = [](const json& v) -> std::string {
      if (v.is_string()) return v.get<std::string>();
      if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
      return {};
    };
    auto find_id = [&](const std::string& s) { auto it = ids.find(s); return it == ids.end() ? -1 : it->second; };
    std::string bos_name, eos_name;
    std::optional<bool> cfg_add_bos, cfg_add_eos;
    const fs::path cfg_path = file.parent_path() / "tokenizer_config.json";
    std::error_code ec;
    if (fs::exists(cfg_path, ec)) {
      const json cfg = read_json(cfg_path);
      bos_name = token_name(cfg.value("bos_token", json()));
      eos_name = token_name(cfg.value("eos_token", json()));
      if (cfg.contains("chat_template") && cfg["chat_template"].is_string()) chat_template_ = cfg["chat_template"];
      if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) cfg_add_bos = cfg["add_bos_token"].get<bool>();
      if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean()) cfg_add_eos = cfg["add_eos_token"].get<bool>();
    }
    for (const char* s : {"<|begin_of_text|>", "<s>", "<|startoftext|>"})
      if (bos_name.empty() && find_id(s) >= 0) bos_name = s;
    for (const char* s : {"<|end_of_text|>", "<|endoftext|>", "</s>"})
      if (eos_name.empty() && find_id(s) >= 0) eos_name = s;
    bos_ = bos_name.empty() ? -1 : find_id(bos_name);
    eos_ = eos_name.empty() ? -1 : find_id(eos_name);
    const json post = j.contains("post_processor") ? j["post_processor"] : json();
    bool template_bos = false;
    auto scan_template = [&](const json& p, const std::string& where) {
      if (!p.is_object() || text_at(p, "type", "", where) != "TemplateProcessing" || !p.contains("single") || !p["single"].is_array() ||
          p["single"].empty())
        return;
      const json& first = p["single"][0];
      if (first.is_object() && first.contains("SpecialToken") && first["SpecialToken"].is_object()) {
        const int id = find_id(text_at(first["SpecialToken"], "id", "", where + "single[0].SpecialToken."));
        if (id >= 0) { template_bos = true; bos_ = id; }
      }
    };
    scan_template(post, "post_processor.");
    if (post.is_object() && text_at(post, "type", "", "post_processor.") == "Sequence") {
      const json procs = array_at(post, "processors", "post_processor.");
      for (std::size_t i = 0; i < procs.size(); ++i) scan_template(procs[i], "post_processor.processors[" + std::to_string(i) + "].");
    }
    add_bos_ = template_bos || cfg_add_bos.value_or(false);
    add_eos_ = cfg_add_eos.value_or(false);
    eot_ = find_id("<|eot_id|>");
    eom_ = find_id("<|eom_id|>");
  }

  // The regex list a tokenizer.json pre_tokenizer amounts to: known patterns map to their family's
  // llama.cpp spelling (and run as code, pretokenizer.hpp), other Split patterns are used as written
  // (through ICU's regex engine; a build without ICU refuses them).
  std::vector<std::string> hf_pre_tokenizer(const json& pre) {
    std::vector<std::string> out;
    auto one = [&](const json& p, auto& self) -> void {
      if (!p.is_object()) return;
      const std::string type = p.value("type", "");
      if (type == "Sequence") {
        for (const auto& q : p.value("pretokenizers", json::array())) self(q, self);
      } else if (type == "ByteLevel") {
        if (p.value("add_prefix_space", false)) throw TokenizerError(source_ + ": pre_tokenizer ByteLevel with add_prefix_space is not supported");
        if (p.value("use_regex", true)) out.push_back(kGpt2);
      } else if (type == "Split") {
        const json& pat = p.value("pattern", json());
        std::string re;
        if (pat.contains("Regex") && pat["Regex"].is_string()) re = pat["Regex"];
        else if (pat.contains("String") && pat["String"].is_string()) {
          for (char c : pat["String"].get<std::string>()) {
            if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) re += '\\';
            re += c;
          }
        } else throw TokenizerError(source_ + ": pre_tokenizer Split has no Regex or String pattern");
        if (p.value("behavior", "Isolated") != "Isolated" || p.value("invert", false))
          throw TokenizerError(source_ + ": pre_tokenizer Split behavior '" + p.value("behavior", "") + "' is not supported (expected Isolated)");
        if (re == kLlama3Original) re = kLlama3;
        else if (re == kQwen2Original) re = kQwen2;
        out.push_back(re);
      } else if (type == "Digits") {
        out.push_back(p.value("individual_digits", false) ? kEachNumber : kNumberRuns);
      } else {
        throw TokenizerError(source_ + ": pre_tokenizer type '" + type + "' is not supported (expected Sequence, Split, ByteLevel, Digits)");
      }
    };
    if (pre.is_null()) return {kGpt2};
    one(pre, one);
    return out;
  }

  // The pre-tokenizer, lookups, printed text and end-of-generation ids.
  void finish() {
    pre_.emplace(regexes_, source_);
    const auto b2u = byte_to_unicode();
    std::unordered_map<char32_t, unsigned char> u2b;
    for (int b = 0; b < 256; ++b) {
      byte_char_[b].clear();
      append_utf8(byte_char_[b], b2u[b]);
      u2b[b2u[b]] = static_cast<unsigned char>(b);
    }
    byte_tok_.fill(-1);
    decoded_.resize(vocab_.size());
    for (std::int32_t i = static_cast<std::int32_t>(vocab_.size()) - 1; i >= 0; --i) {
      const std::string& s = vocab_[i];
      switch (types_[i]) {
        case TokenType::Control: decoded_[i].clear(); continue;
        case TokenType::UserDefined: decoded_[i] = s; continue;
        case TokenType::Unused: continue;
        default: break;
      }
      lookup_[s] = i;
      // Pieces are spelled in GPT-2's alphabet: map each character back to its byte.
      std::string d;
      for (const char32_t cp : utf8_to_u32(s)) {
        if (auto it = u2b.find(cp); it != u2b.end()) d += static_cast<char>(it->second);
        else append_utf8(d, cp);
      }
      decoded_[i] = std::move(d);
    }
    for (int b = 0; b < 256; ++b)
      if (auto it = lookup_.find(byte_char_[b]); it != lookup_.end()) byte_tok_[b] = it->second;
    glassbox::SpecialTokens sp;
    sp.eos = eos_, sp.eot = eot_, sp.eom = eom_;
    eog_ = glassbox::end_of_generation_ids(sp, vocab_, types_);
    index_special_tokens();
  }

  // vocab_ holds the raw pieces in GPT-2's byte alphabet.
  std::unordered_map<std::string, std::int32_t> lookup_;  // normal pieces
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges_;  // (left, right) -> (rank, merged)
  std::vector<std::string> regexes_;
  std::optional<PreTokenizer> pre_;  // regexes_ as code rules, or ICU's regexes for unknown ones
  bool ignore_merges_ = false;
  std::array<std::string, 256> byte_char_;
  std::array<std::int32_t, 256> byte_tok_{};
};

void register_factories(glassbox::Registrar& r) {
  r.add_tokenizer({"bpe",
                   "byte-level BPE (GPT-2, Llama 3, SmolLM, ...): a tokenizer.json, a folder with GPT-2's encoder.json + "
                   "vocab.bpe, or the model's GGUF vocabulary (tokenizer.ggml.model = gpt2) when no path is given",
                   {{"path", glassbox::ParamType::String, "", "tokenizer.json, or a folder holding it or encoder.json + vocab.bpe", {}, {}},
                    {"pre", glassbox::ParamType::String, "", "pre-tokenizer family to use instead of the source's (gpt-2, llama-bpe, qwen2, smollm, default)", {}, {}},
                    {"add_bos", glassbox::ParamType::String, "auto", "prepend BOS to prompts: auto (as the source says), true, false", {}, {}}},
                   "path"},
                  [](const glassbox::Params& p, const glassbox::PluginContext& c) { return std::make_unique<BpeTokenizer>(p, c.metadata()); },
                  {"gpt2", [](const glassbox::Metadata& m) { return m.get_string("tokenizer.ggml.model") == "gpt2"; }});
}

}  // namespace

GLASSBOX_MODULE("bpe-tokenizer", "byte-level BPE tokenizers (GPT-2 family)", register_factories)
