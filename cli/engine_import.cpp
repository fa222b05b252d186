// Reading other engines' logprob dialects into ImportedRun (engine_import.hpp): shape detection, the
// response / SSE / JSONL / .npy / .kld containers, and the alignment of token strings and bytes to the
// model's vocabulary, with llama.cpp's quirks (held-back incomplete UTF-8, -FLT_MAX for p = 0).
#include "engine_import.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <unordered_map>

#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/structured_input.hpp"
#include "glassbox/traces/mass.hpp"

namespace glassbox::cli {

using nlohmann::json;

namespace {

// ---------------------------------------------------------------- the vocabulary, by bytes and by text

class Vocab {
 public:
  explicit Vocab(const Tokenizer& tok) : V_(tok.vocab_size()) {
    bytes_.resize(static_cast<std::size_t>(V_));
    byte_token_.fill(-1);
    for (std::int32_t id = 0; id < V_; ++id) {
      const std::string piece(tok.piece(id));
      unsigned b = 0;
      const TokenType type = tok.token_type(id);
      if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>' && std::sscanf(piece.c_str() + 3, "%2x", &b) == 1) {
        bytes_[id] = std::string(1, static_cast<char>(b));
        if (byte_token_[b] < 0) byte_token_[b] = id;
      } else if (type == TokenType::Control || type == TokenType::Unknown) {
        bytes_[id].clear();  // a server shows none of these in generated text
        special_[piece] = id;
      } else {
        bytes_[id] = std::string(tok.decode(0, id));
        normal_.emplace(bytes_[id], id);  // the first (lowest) id of a duplicate text wins
      }
      pieces_.emplace(piece, id);
    }
  }
  int size() const { return V_; }
  const std::string& bytes(std::int32_t id) const { return bytes_[static_cast<std::size_t>(id)]; }
  std::int32_t byte_token(unsigned char b) const { return byte_token_[b]; }

  // A token given as its bytes: a normal piece with exactly these bytes, else the byte-fallback token of a
  // single byte. An empty text names no token (control tokens and held-back bytes both read "").
  std::optional<std::int32_t> by_bytes(const std::string& b) const {
    if (b.empty()) return std::nullopt;
    if (auto it = normal_.find(b); it != normal_.end()) return it->second;
    if (b.size() == 1 && byte_token_[static_cast<unsigned char>(b[0])] >= 0) return byte_token_[static_cast<unsigned char>(b[0])];
    return std::nullopt;
  }
  // A token given as text, in any of the ways engines write one: its bytes (" Once"), llama.cpp's old
  // "byte: \x94", the raw piece ("▁Once", "<0x0A>", "<s>"), or with the SentencePiece marker for a space.
  std::optional<std::int32_t> by_text(const std::string& t) const {
    if (t.rfind("byte: \\x", 0) == 0 && t.size() == 10) {
      unsigned b = 0;
      if (std::sscanf(t.c_str() + 8, "%2x", &b) == 1 && byte_token_[b] >= 0) return byte_token_[b];
    }
    if (auto id = by_bytes(t)) return id;
    if (auto it = special_.find(t); it != special_.end()) return it->second;
    if (auto it = pieces_.find(t); it != pieces_.end()) return it->second;
    std::string spaced;  // "▁Once" -> " Once"
    for (std::size_t i = 0; i < t.size();) {
      if (t.compare(i, 3, "\xE2\x96\x81") == 0) spaced += ' ', i += 3;
      else spaced += t[i++];
    }
    if (spaced != t) return by_bytes(spaced);
    return std::nullopt;
  }

 private:
  int V_;
  std::vector<std::string> bytes_;
  std::array<std::int32_t, 256> byte_token_{};
  std::unordered_map<std::string, std::int32_t> normal_, special_, pieces_;
};

// llama.cpp's validate_utf8 (examples/server/utils.hpp): whether the text ends inside a UTF-8 sequence.
bool ends_incomplete(const std::string& s) {
  for (std::size_t i = 1; i <= 4 && i <= s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - i]);
    if ((c & 0xE0) == 0xC0) { if (i < 2) return true; }
    else if ((c & 0xF0) == 0xE0) { if (i < 3) return true; }
    else if ((c & 0xF8) == 0xF0) { if (i < 4) return true; }
  }
  return false;
}

std::string show(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out + "\"";
}

// ---------------------------------------------------------------- entries as the dialects give them

// A token as an engine names it: by id, by bytes, or by text (any of them may be missing).
struct RawToken {
  std::optional<std::int32_t> id;
  std::optional<std::string> bytes, text;
  std::string where;
};
struct RawCandidate {
  RawToken tok;  // (its `where` is left empty, and its text and bytes once it has an id: see RawEntry::top_at)
  double value = 0;  // logprob, or probability in post mode; -inf for p = 0
};
// An entry's candidates aligned to the vocabulary: as listed (duplicates of an id dropped), and the mass
// left outside them.
struct AlignedTop {
  std::vector<ImportedCandidate> top;
  std::optional<double> unlisted;
};
struct RawEntry {
  RawToken tok;
  std::optional<double> value;
  std::vector<RawCandidate> top;
  bool has_top = false;
  std::string where;
  std::optional<long> predicted;  // llama.cpp's running tokens_predicted on a stream event (counts held-back tokens)
  // Where candidate k is, made only for a message (a string per candidate was most of an import's memory):
  // top_at + "[k]" + top_then, or with top_by_key, top_at + "[\"its text\"]" (OpenAI's legacy dicts).
  std::string top_at, top_then;
  bool top_by_key = false;
  std::optional<AlignedTop> aligned;  // `top` aligned as the entry was read (Parsed::on_entry), `top` then emptied
  std::string candidate_where(std::size_t k) const {
    if (top_by_key) return top_at + "[" + show(top[k].tok.text.value_or("")) + "]";
    return top_at + "[" + std::to_string(k) + "]" + top_then;
  }
};

// A candidate kept: its place is RawEntry::candidate_where; the text and bytes of one that has an id are
// not read again (the id wins).
void slim(RawCandidate& c) {
  c.tok.where = std::string();
  if (c.tok.id) c.tok.text.reset(), c.tok.bytes.reset();
}

struct Parsed {
  std::string dialect, distribution;
  std::vector<RawEntry> entries;
  std::optional<std::vector<std::int32_t>> tokens;  // every generated id, when the response lists them
  std::optional<std::vector<std::int32_t>> prompt_ids;
  std::optional<std::string> prompt;
  std::vector<std::string> notes;
  // Called on each entry as it is read (the capture's entries are aligned then, not all held as read).
  std::function<void(RawEntry&)> on_entry;
};
void add(Parsed& out, RawEntry&& r) {
  out.entries.push_back(std::move(r));
  if (out.on_entry) out.on_entry(out.entries.back());
}

std::string path_join(const std::string& a, const std::string& key) { return a.empty() ? key : a + "." + key; }

// ---------------------------------------------------------------- a capture, parsed compactly
//
// A parsed nlohmann::json tree costs about 27x its text (a 20 MB capture: 550 MiB). So every object or
// array that is an element of an array is kept as its compact text (nlohmann's binary value, which JSON
// text never produces) as soon as the parser has finished it, and parsed again, the same way, only when
// read (`item`): the tree of a capture is its skeleton and its entries' texts, and one entry's tree at a
// time.

// The text of `j`, as dump() writes it, with each compacted element's text in its place.
template <class J>
void compact_text(const J& j, std::string& out) {
  if (j.is_binary()) {
    out.append(j.get_binary().begin(), j.get_binary().end());
  } else if (j.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ',';
      first = false;
      out += J(it.key()).dump();
      out += ':';
      compact_text(it.value(), out);
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (i) out += ',';
      compact_text(j[i], out);
    }
    out += ']';
  } else {
    out += j.dump();
  }
}
// For messages: what dump() would show.
template <class J>
std::string dump(const J& j) {
  std::string out;
  compact_text(j, out);
  return out;
}

// nlohmann's SAX interface building that tree (its parser callback cannot: after each object or array
// it scans the parent's elements for a discarded one, quadratic in an array's length).
template <class J>
class CompactBuilder {
 public:
  using string_t = typename J::string_t;
  bool null() { return put(J(nullptr)); }
  bool boolean(bool v) { return put(J(v)); }
  bool number_integer(typename J::number_integer_t v) { return put(J(v)); }
  bool number_unsigned(typename J::number_unsigned_t v) { return put(J(v)); }
  bool number_float(typename J::number_float_t v, const string_t&) { return put(J(v)); }
  bool string(string_t& v) { return put(J(std::move(v))); }
  bool binary(typename J::binary_t& v) { return put(J::binary(std::move(v))); }
  bool key(string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) { return open(J::object()); }
  bool start_array(std::size_t) { return open(J::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& ex) {
    throw ex;
  }
  J root;

 private:
  bool put(J&& v) {
    place(std::move(v));
    return true;
  }
  J* place(J&& v) {
    if (stack_.empty()) return &(root = std::move(v));
    J& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    return &(top[key_] = std::move(v));  // a key given twice: the last one, as nlohmann's parser does
  }
  bool open(J&& v) {
    stack_.push_back(place(std::move(v)));
    return true;
  }
  bool close() {
    J* done = stack_.back();
    stack_.pop_back();
    if (!stack_.empty() && stack_.back()->is_array()) {
      std::string t;
      compact_text(*done, t);
      *done = J::binary(std::vector<std::uint8_t>(t.begin(), t.end()));
    }
    return true;
  }
  std::vector<J*> stack_;
  string_t key_;
};

template <class J>
J parse_compact_text(std::string_view text) {
  CompactBuilder<J> b;
  J::sax_parse(text, &b);
  return std::move(b.root);
}

// parse_json_input (structured_input.hpp): the same checks and messages, parsed compactly.
template <class J = json>
J parse_capture(std::string_view text, const std::string& what) {
  if (auto why = structured_text_problem(text, Syntax::Json)) throw InputError(what + ": " + *why);
  try {
    return parse_compact_text<J>(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(what + ": not valid JSON (" + detail::json_error_tail(e) + ")");
  }
}

// Element i of an array of a compact tree: a compacted object or array comes back parsed into `kept`
// (compactly again when it is large, so that a response's one choice holding every entry is read entry by
// entry; a small one, an entry, as a plain tree); any other element is returned as it is.
constexpr std::size_t kCompactAbove = 64 << 10;
template <class J>
const J& item(const J& a, std::size_t i, J& kept) {
  const J& e = a[i];
  if (!e.is_binary()) return e;
  const auto& b = e.get_binary();
  const std::string_view t(reinterpret_cast<const char*>(b.data()), b.size());
  kept = t.size() > kCompactAbove ? parse_compact_text<J>(t) : J::parse(t);
  return kept;
}
template <class J>
J item(const J& a, std::size_t i) {
  J kept;
  const J& e = item(a, i, kept);
  return &e == &kept ? std::move(kept) : e;
}

// A logprob as the dialects write it: a number <= 0; null, <= -1e30 (llama.cpp's -FLT_MAX) and OpenAI's
// -9999 mean p = 0, which only an alternative can have (the engine cannot have picked such a token).
double read_logprob(const json& v, const std::string& where, bool chosen) {
  if (v.is_null() || (v.is_number() && v.get<double>() <= -9999.0)) {
    if (chosen)
      throw InputError(where + ": " + dump(v) + " (probability 0) for the token the engine chose: it cannot have chosen it");
    return -HUGE_VAL;
  }
  if (!v.is_number()) throw InputError(where + ": expected a logprob (a number <= 0), got " + dump(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x > 1e-6) throw InputError(where + ": " + dump(v) + " is not a logprob (a number <= 0)");
  return std::min(x, 0.0);
}
double read_prob(const json& v, const std::string& where) {
  if (!v.is_number()) throw InputError(where + ": expected a probability in [0, 1], got " + dump(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0 || x > 1 + 1e-6) throw InputError(where + ": " + dump(v) + " is not a probability in [0, 1]");
  return std::min(x, 1.0);
}
std::string read_bytes(const json& v, const std::string& where) {
  if (!v.is_array()) throw InputError(where + ": expected an array of byte values, got " + std::string(v.type_name()));
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    json b_kept;
    const json& b = item(v, i, b_kept);
    if (!b.is_number_integer() || b.get<std::int64_t>() < 0 || b.get<std::int64_t>() > 255)
      throw InputError(where + "[" + std::to_string(i) + "]: expected a byte value 0..255, got " + dump(b));
    out += static_cast<char>(b.get<int>());
  }
  return out;
}
std::int32_t read_id(const json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > INT32_MAX)
    throw InputError(where + ": expected a token id, got " + dump(v));
  return v.get<std::int32_t>();
}
const json& need(const json& o, const char* key, const std::string& where) {
  if (!o.is_object()) throw InputError(where + ": expected an object, got " + std::string(o.type_name()));
  auto it = o.find(key);
  if (it == o.end()) throw InputError(where + ": missing field '" + key + "'");
  return *it;
}
const json& need_array(const json& o, const char* key, const std::string& where) {
  const json& v = need(o, key, where);
  if (!v.is_array()) throw InputError(path_join(where, key) + ": expected an array, got " + std::string(v.type_name()));
  return v;
}

// One token object of llama.cpp / OpenAI chat: {id?, token, bytes?}.
RawToken token_of(const json& e, const std::string& w) {
  RawToken t;
  t.where = w;
  if (auto it = e.find("id"); it != e.end()) t.id = read_id(*it, w + ".id");
  if (auto it = e.find("bytes"); it != e.end() && !it->is_null()) t.bytes = read_bytes(*it, w + ".bytes");
  if (auto it = e.find("token"); it != e.end()) {
    if (!it->is_string()) throw InputError(w + ".token: expected a string, got " + dump(*it));
    t.text = it->get<std::string>();
  }
  if (!t.id && !t.bytes && !t.text) throw InputError(w + ": no id, bytes or token");
  return t;
}

// llama.cpp's entry (raw or post) and OpenAI's chat entry: the same fields.
RawEntry chat_entry(const json& e, const std::string& w, bool post) {
  RawEntry r;
  r.where = w;
  if (!e.is_object()) throw InputError(w + ": expected an object, got " + std::string(e.type_name()));
  r.tok = token_of(e, w);
  if (post) r.value = read_prob(need(e, "prob", w), w + ".prob");
  else r.value = read_logprob(need(e, "logprob", w), w + ".logprob", true);
  const char* key = post ? "top_probs" : "top_logprobs";
  if (e.contains(key) && !e[key].is_null()) {
    const json& top = need_array(e, key, w);
    r.has_top = true;
    r.top_at = w + "." + key;
    for (std::size_t i = 0; i < top.size(); ++i) {
      const std::string q = w + "." + key + "[" + std::to_string(i) + "]";
      json t_kept;
      const json& t = item(top, i, t_kept);
      if (!t.is_object()) throw InputError(q + ": expected an object, got " + std::string(t.type_name()));
      RawCandidate c;
      c.tok = token_of(t, q);
      c.value = post ? read_prob(need(t, "prob", q), q + ".prob") : read_logprob(need(t, "logprob", q), q + ".logprob", false);
      slim(c);
      r.top.push_back(std::move(c));
    }
  }
  return r;
}

// Which dialect one JSON object (a response or an SSE chunk) speaks; "" when it carries no logprobs
// (a role-only chunk, the final chunk), "?" when it is nothing known.
std::string dialect_of(const json& j) {
  if (!j.is_object()) return "?";
  if (auto cp = j.find("completion_probabilities"); cp != j.end()) {
    if (!cp->is_array()) return "?";
    if (cp->empty()) return "";
    json e_kept;
    const json& e = item(*cp, 0, e_kept);
    if (e.contains("probs")) return "llamacpp-old";
    if (e.contains("top_probs") || e.contains("prob")) return "llamacpp-post";
    return "llamacpp-completion";
  }
  if (j.contains("token") && j["token"].is_object()) return "tgi";
  if (j.contains("details") && j["details"].is_object() && j["details"].contains("tokens")) return "tgi";
  if (j.contains("generated_text")) return "";  // TGI's last event without details
  if (j.contains("stop") && j.contains("content")) return "";  // llama.cpp /completion's last stream event
  if (auto ch = j.find("choices"); ch != j.end() && ch->is_array()) {
    if (ch->empty()) return "";
    json c_kept;
    const json& c = item(*ch, 0, c_kept);
    if (!c.is_object()) return "?";
    if (c.contains("prompt_logprobs") && !c["prompt_logprobs"].is_null()) return "vllm";
    auto lp = c.find("logprobs");
    if (lp == c.end() || lp->is_null()) return "";
    if (!lp->is_object()) return "?";
    if (lp->contains("tokens")) return "openai-legacy";
    if (auto content = lp->find("content"); content != lp->end() && content->is_array()) {
      if (content->empty()) return "";
      json e_kept;
      const json& e = item(*content, 0, e_kept);
      return e.is_object() && (e.contains("prob") || e.contains("top_probs")) ? "openai-chat-post" : "openai-chat";
    }
    return "?";
  }
  return "?";
}

std::string distribution_of(const std::string& dialect) {
  if (dialect == "llamacpp-post" || dialect == "llamacpp-old" || dialect == "openai-chat-post") return "post";
  if (dialect == "hf-npy") return "logits";
  return "raw";
}

// llamacpp-old: completion_probabilities[i] = {content, probs: [{tok_str, prob}, ...]}, post-sampling.
void llamacpp_old_entries(const json& j, const std::string& w, Parsed& out) {
  const json& cp = need_array(j, "completion_probabilities", w);
  for (std::size_t i = 0; i < cp.size(); ++i) {
    const std::string q = w + ": completion_probabilities[" + std::to_string(i) + "]";
    RawEntry r;
    r.where = q;
    json e_kept;
    const json& e = item(cp, i, e_kept);
    const json& content = need(e, "content", q);
    if (!content.is_string()) throw InputError(q + ".content: expected a string, got " + dump(content));
    r.tok.text = content.get<std::string>();
    r.tok.where = q + ".content";
    const json& probs = need_array(e, "probs", q);
    r.has_top = true;
    r.top_at = q + ".probs", r.top_then = ".tok_str";
    for (std::size_t k = 0; k < probs.size(); ++k) {
      const std::string p = q + ".probs[" + std::to_string(k) + "]";
      RawCandidate c;
      json pk_kept;
      const json& pk = item(probs, k, pk_kept);
      const json& ts = need(pk, "tok_str", p);
      if (!ts.is_string()) throw InputError(p + ".tok_str: expected a string, got " + dump(ts));
      c.tok.text = ts.get<std::string>();
      c.tok.where = p + ".tok_str";
      c.value = read_prob(need(pk, "prob", p), p + ".prob");
      slim(c);
      r.top.push_back(std::move(c));
    }
    add(out, std::move(r));
  }
}

// vllm's prompt_logprobs: [null, {"id": {logprob, rank, decoded_token}}, ...]: the actual prompt token comes
// first in each dict, so the keys give the prompt's ids (the first, not predicted, is BOS). Read and
// checked, and said in a note; not compared. `c` is choices[0], at cw.
void check_vllm_prompt(const json& c, const std::string& cw, Parsed& out) {
  const json& pl = need_array(c, "prompt_logprobs", cw);
  if (pl.empty() || !pl[0].is_null()) throw InputError(cw + ".prompt_logprobs[0]: expected null (nothing predicts the first prompt token)");
  std::vector<std::int32_t> ids;
  for (std::size_t i = 1; i < pl.size(); ++i) {
    const std::string q = cw + ".prompt_logprobs[" + std::to_string(i) + "]";
    json pi_kept;
    const json& pi = item(pl, i, pi_kept);
    if (!pi.is_object() || pi.empty()) throw InputError(q + ": expected an object of {token id: {logprob, rank, decoded_token}}");
    for (const auto& [key, v] : pi.items()) {
      char* end = nullptr;
      const long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end || id < 0) throw InputError(q + ": key '" + key + "' is not a token id");
      read_logprob(need(v, "logprob", q + "." + key), q + "." + key + ".logprob", false);
    }
  }
  out.notes.push_back("vllm: prompt_logprobs of " + std::to_string(pl.size() - 1) +
                      " prompt positions read and checked; not compared (a trace's steps start at the prompt's last position)");
}

// openai-legacy and vllm: choices[0].logprobs = {tokens, token_logprobs, top_logprobs: [{token: logprob}, ...]},
// lists of one entry per token. `c` is choices[0], at cw.
void legacy_logprobs_entries(const json& c, const std::string& cw, Parsed& out) {
  const json& lp = need(c, "logprobs", cw);
  const std::string lw = cw + ".logprobs";
  const json& tokens = need_array(lp, "tokens", lw);
  const json& tlp = need_array(lp, "token_logprobs", lw);
  const json* top = lp.contains("top_logprobs") && !lp["top_logprobs"].is_null() ? &need_array(lp, "top_logprobs", lw) : nullptr;
  if (tlp.size() != tokens.size())
    throw InputError(lw + ".token_logprobs: " + std::to_string(tlp.size()) + " values for " + std::to_string(tokens.size()) + " tokens");
  if (top && top->size() != tokens.size())
    throw InputError(lw + ".top_logprobs: " + std::to_string(top->size()) + " lists for " + std::to_string(tokens.size()) + " tokens");
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string q = lw + ".tokens[" + std::to_string(i) + "]";
    RawEntry r;
    r.where = lw + ": token " + std::to_string(i);
    json ti_kept;
    const json& ti = item(tokens, i, ti_kept);
    if (!ti.is_string()) throw InputError(q + ": expected a string, got " + dump(ti));
    r.tok.text = ti.get<std::string>();
    r.tok.where = q;
    r.value = read_logprob(item(tlp, i), lw + ".token_logprobs[" + std::to_string(i) + "]", true);
    if (top) {
      json d_kept;
      const json& d = item(*top, i, d_kept);
      const std::string p = lw + ".top_logprobs[" + std::to_string(i) + "]";
      if (!d.is_object()) throw InputError(p + ": expected an object {token: logprob}, got " + std::string(d.type_name()));
      r.has_top = true;
      r.top_at = p, r.top_by_key = true;
      for (const auto& [key, v] : d.items()) {
        RawCandidate cand;
        cand.tok.text = key;
        cand.tok.where = p + "[" + show(key) + "]";
        cand.value = read_logprob(v, cand.tok.where, false);
        slim(cand);
        r.top.push_back(std::move(cand));
      }
    }
    add(out, std::move(r));
  }
}

// TGI's token {id, text, logprob, special} at q: an entry without its alternatives.
RawEntry tgi_token(const json& t, const std::string& q) {
  RawEntry r;
  r.where = q;
  r.tok.id = read_id(need(t, "id", q), q + ".id");
  if (t.contains("text") && t["text"].is_string()) r.tok.text = t["text"].get<std::string>();
  r.tok.where = q;
  r.value = read_logprob(need(t, "logprob", q), q + ".logprob", true);
  return r;
}

// TGI's top_tokens list at q: r's alternatives.
void tgi_top(RawEntry& r, const json& list, const std::string& q) {
  if (!list.is_array()) throw InputError(q + ": expected an array, got " + std::string(list.type_name()));
  r.has_top = true;
  r.top_at = q;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const std::string p = q + "[" + std::to_string(k) + "]";
    RawCandidate c;
    json lk_kept;
    const json& lk = item(list, k, lk_kept);
    c.tok.id = read_id(need(lk, "id", p), p + ".id");
    c.tok.where = p;
    c.value = read_logprob(need(lk, "logprob", p), p + ".logprob", false);
    slim(c);
    r.top.push_back(std::move(c));
  }
}

// TGI: streamed, {"token": {id, text, logprob, special}, "top_tokens": [...]}; whole, {"details": {"tokens": [...],
// "top_tokens": [[...]]}}.
void tgi_entries(const json& j, const std::string& w, Parsed& out) {
  if (j.contains("token")) {
    RawEntry r = tgi_token(j["token"], w + ": token");
    if (j.contains("top_tokens") && !j["top_tokens"].is_null()) tgi_top(r, j["top_tokens"], w + ": top_tokens");
    add(out, std::move(r));
    return;
  }
  const json& d = need(j, "details", w);  // (const operator[] on a missing key is undefined)
  const json& toks = need_array(d, "tokens", w + ": details");
  const json* tops = d.contains("top_tokens") && !d["top_tokens"].is_null() ? &need_array(d, "top_tokens", w + ": details") : nullptr;
  for (std::size_t i = 0; i < toks.size(); ++i) {
    RawEntry r = tgi_token(item(toks, i), w + ": details.tokens[" + std::to_string(i) + "]");
    if (tops && i < tops->size()) tgi_top(r, item(*tops, i), w + ": details.top_tokens[" + std::to_string(i) + "]");
    add(out, std::move(r));
  }
}

// The entries one JSON object holds, in its dialect. `w` is "FILE:LINE" or "FILE".
void entries_of(const json& j, const std::string& dialect, const std::string& w, Parsed& out) {
  if (dialect == "llamacpp-completion" || dialect == "llamacpp-post") {
    const json& cp = need_array(j, "completion_probabilities", w);
    for (std::size_t i = 0; i < cp.size(); ++i)
      add(out, chat_entry(item(cp, i), w + ": completion_probabilities[" + std::to_string(i) + "]", dialect == "llamacpp-post"));
    return;
  }
  if (dialect == "llamacpp-old") return llamacpp_old_entries(j, w, out);
  if (dialect == "openai-chat" || dialect == "openai-chat-post") {
    json c_kept;
    const json& c = item(need_array(j, "choices", w), 0, c_kept);
    const json& content = need_array(need(c, "logprobs", w + ": choices[0]"), "content", w + ": choices[0].logprobs");
    for (std::size_t i = 0; i < content.size(); ++i)
      add(out, chat_entry(item(content, i), w + ": choices[0].logprobs.content[" + std::to_string(i) + "]", dialect == "openai-chat-post"));
    return;
  }
  if (dialect == "openai-legacy" || dialect == "vllm") {
    json c_kept;
    const json& c = item(need_array(j, "choices", w), 0, c_kept);
    const std::string cw = w + ": choices[0]";
    if (dialect == "vllm") check_vllm_prompt(c, cw, out);
    return legacy_logprobs_entries(c, cw, out);
  }
  if (dialect == "tgi") return tgi_entries(j, w, out);
  throw InputError(w + ": unknown dialect " + dialect);
}

// llama.cpp's `tokens` (every generated id with return_tokens) and the prompt where a response has them.
void extras_of(const json& j, Parsed& out, bool stream) {
  if (!stream && j.contains("tokens") && j["tokens"].is_array() && !j["tokens"].empty()) {
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i < j["tokens"].size(); ++i) ids.push_back(read_id(item(j["tokens"], i), "tokens[" + std::to_string(i) + "]"));
    out.tokens = std::move(ids);
  }
}

// ---------------------------------------------------------------- containers

struct Line {
  int number;
  std::string_view text;  // (a view of the file's text: no copy of a 20 MB capture per line list)
};
std::vector<Line> split_lines(const std::string& text) {
  std::vector<Line> out;
  std::size_t start = 0;
  int n = 0;
  while (start <= text.size()) {
    const std::size_t nl = text.find('\n', start);
    std::string_view line = std::string_view(text).substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    ++n;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back({n, line});
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

bool looks_sse(const std::string& text) {
  for (const auto& l : split_lines(text)) {
    if (l.text.empty()) continue;
    return l.text.rfind("data:", 0) == 0 || l.text[0] == ':' || l.text.rfind("event:", 0) == 0 || l.text.rfind("id:", 0) == 0;
  }
  return false;
}

// A saved text/event-stream: every `data:` event of one response, in order. The stream must end the way its
// dialect ends one (`[DONE]`, llama.cpp's `stop: true`, a finish_reason, TGI's generated_text), else it was cut.
void read_sse(const std::string& text, const std::string& file, const std::string& from, Parsed& out) {
  bool done = false, finished = false;
  int last_line = 0;
  const auto lines = split_lines(text);
  if (!text.empty() && text.back() != '\n')
    throw InputError(file + ":" + std::to_string(lines.size()) + ": the stream stops in the middle of a line (truncated SSE stream)");
  for (const auto& l : lines) {
    if (l.text.empty() || l.text[0] == ':' || l.text.rfind("event:", 0) == 0 || l.text.rfind("id:", 0) == 0 ||
        l.text.rfind("retry:", 0) == 0)
      continue;
    const std::string w = file + ":" + std::to_string(l.number);
    if (l.text.rfind("data:", 0) != 0) throw InputError(w + ": expected an SSE field (data: ...), got " + show(std::string(l.text.substr(0, 40))));
    std::string_view data = l.text.substr(5);
    if (!data.empty() && data[0] == ' ') data.remove_prefix(1);
    if (done) throw InputError(w + ": an event after data: [DONE]");
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    const json j = parse_capture(data, w);
    std::string d = from.empty() ? dialect_of(j) : (dialect_of(j).empty() ? "" : from);
    if (d == "?") throw InputError(w + ": an event in no known logprob dialect (keys: " + [&] {
      std::string k;
      if (j.is_object()) for (const auto& [key, v] : j.items()) k += (k.empty() ? "" : ", ") + key;
      return k;
    }() + ")");
    if (j.is_object()) {
      if (j.value("stop", false) == true) finished = true;  // llama.cpp /completion's last event
      if (j.contains("generated_text") && !j["generated_text"].is_null()) finished = true;  // TGI's last event
      if (auto ch = j.find("choices"); ch != j.end() && ch->is_array() && !ch->empty()) {
        json c_kept;
        const json& c = item(*ch, 0, c_kept);
        if (c.is_object() && c.contains("finish_reason") && !c["finish_reason"].is_null()) finished = true;
      }
    }
    if (d.empty()) continue;
    if (out.dialect.empty()) out.dialect = d;
    else if (d != out.dialect)
      throw InputError(w + ": an event in dialect " + d + " in a stream of " + out.dialect + " events (mixed dialects)");
    const std::size_t before = out.entries.size();
    entries_of(j, d, w, out);
    if (out.entries.size() == before + 1 && j.is_object() && j.contains("tokens_predicted") && j["tokens_predicted"].is_number_integer())
      out.entries.back().predicted = j["tokens_predicted"].get<long>();
    last_line = l.number;
  }
  if (!finished && !done)
    throw InputError(file + ":" + std::to_string(lines.size()) + ": truncated SSE stream: it ends after line " +
                     std::to_string(last_line) + " without its final event (no data: [DONE], finish_reason or stop: true)");
  if (out.dialect.empty()) throw InputError(file + ": no event of the stream carries logprobs");
}

// NumPy .npy, format 1.0/2.0/3.0 (numpy.lib.format): magic, version, header length, a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (rows, vocab), }, then the data. Only what a logits
// array can be is accepted: little-endian float32 (or float64), C order, two dimensions.
void read_npy(const std::string& bytes, const std::string& file, int vocab, Parsed& out) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw InputError(file + ": not a NumPy .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t hlen = 0, off = 0;
  if (major == 1) hlen = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8, off = 10;
  else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw InputError(file + ": truncated .npy header");
    for (int i = 3; i >= 0; --i) hlen = hlen << 8 | static_cast<unsigned char>(bytes[8 + i]);
    off = 12;
  } else throw InputError(file + ": .npy format version " + std::to_string(major) + " (expected 1, 2 or 3)");
  if (off + hlen > bytes.size() || hlen > 65536) throw InputError(file + ": .npy header of " + std::to_string(hlen) + " bytes runs past the file");
  const std::string h = bytes.substr(off, hlen);
  auto value_of = [&](const std::string& key) {
    const auto k = h.find("'" + key + "'");
    if (k == std::string::npos) throw InputError(file + ": .npy header has no '" + key + "': " + h);
    auto c = h.find(':', k);
    if (c == std::string::npos) throw InputError(file + ": .npy header: no value for '" + key + "'");
    ++c;
    while (c < h.size() && h[c] == ' ') ++c;
    return c;
  };
  std::size_t p = value_of("descr");
  if (h[p] != '\'') throw InputError(file + ": .npy header 'descr' is not a string: " + h);
  const std::string descr = h.substr(p + 1, h.find('\'', p + 1) - p - 1);
  std::size_t width = 0;
  if (descr == "<f4" || descr == "f4" || (descr == "=f4")) width = 4;
  else if (descr == "<f8" || descr == "=f8") width = 8;
  else
    throw InputError(file + ": .npy dtype '" + descr + "' (expected little-endian float32 '<f4' or float64 '<f8': logits)");
  p = value_of("fortran_order");
  if (h.compare(p, 5, "False") != 0) throw InputError(file + ": .npy array in Fortran order (expected C order, fortran_order: False)");
  p = value_of("shape");
  if (h[p] != '(') throw InputError(file + ": .npy header 'shape' is not a tuple: " + h);
  const std::size_t close = h.find(')', p);
  std::vector<std::uint64_t> shape;
  std::stringstream ss(h.substr(p + 1, close - p - 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) continue;
    // (digits only, and few enough that the value fits: a 30-digit entry is an error here, not an exception of stoull's)
    if (item.find_first_not_of("0123456789") != std::string::npos || item.size() > 12)
      throw InputError(file + ": .npy shape entry " + show(item.substr(0, 40)) + " is not a size (expected a number below 10^12)");
    shape.push_back(std::stoull(item));
  }
  if (shape.size() == 3 && shape[1] == 1) shape = {shape[0], shape[2]};  // [steps, batch 1, vocab]
  if (shape.size() != 2)
    throw InputError(file + ": .npy shape has " + std::to_string(shape.size()) + " dimensions (expected [generated steps, vocab])");
  if (shape[1] != static_cast<std::uint64_t>(vocab))
    throw InputError(file + ": .npy shape [" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + "]: rows of " +
                     std::to_string(shape[1]) + " logits but the model's vocabulary has " + std::to_string(vocab) + " tokens");
  if (shape[0] == 0 || shape[0] > (1u << 20)) throw InputError(file + ": .npy shape [" + std::to_string(shape[0]) + ", ...]: no rows, or absurdly many");
  const std::uint64_t need_bytes = shape[0] * shape[1] * width;
  if (bytes.size() - off - hlen != need_bytes)
    throw InputError(file + ": .npy data is " + std::to_string(bytes.size() - off - hlen) + " bytes, shape and dtype say " + std::to_string(need_bytes));
  const char* data = bytes.data() + off + hlen;
  for (std::uint64_t r = 0; r < shape[0]; ++r) {
    RawEntry e;  // every logit of the row as (id, logit); the caller moves them into the step's logits
    e.where = e.tok.where = file + ": row " + std::to_string(r);
    e.has_top = true;
    for (std::uint64_t i = 0; i < shape[1]; ++i) {
      double v;
      if (width == 4) {
        float f;
        std::memcpy(&f, data + (r * shape[1] + i) * 4, 4);
        v = f;
      } else std::memcpy(&v, data + (r * shape[1] + i) * 8, 8);
      if (!std::isfinite(v))
        throw InputError(file + ": row " + std::to_string(r) + ", logit " + std::to_string(i) + " is " + std::to_string(v) +
                         " (expected a finite raw logit; HF's output_scores, with -inf for removed tokens, are not logits)");
      e.top.push_back({RawToken{static_cast<std::int32_t>(i), {}, {}, {}}, v});
    }
    out.entries.push_back(std::move(e));
  }
}

// llama-perplexity --kl-divergence-base (examples/perplexity/perplexity.cpp at c392e50): "_logits_", n_ctx,
// n_vocab, n_chunk, the tokens, then per chunk n_ctx-1-n_ctx/2 rows of u16 [scale f32, min_log_prob f32,
// q[n_vocab]] padded to an even count; log p = scale·q + min_log_prob where q > 0 (q = 0: at most that).
struct KldFile {
  std::uint32_t n_ctx = 0;
  std::int32_t n_vocab = 0, n_chunk = 0;
  std::vector<std::int32_t> tokens;
  std::size_t rows_at = 0, row_u16 = 0;
};

}  // namespace

const std::vector<std::string>& import_dialects() {
  static const std::vector<std::string> d = {"llamacpp-completion", "llamacpp-post", "llamacpp-old", "openai-chat", "openai-chat-post",
                                             "openai-legacy", "vllm", "tgi", "hf-npy", "llamacpp-kld"};
  return d;
}

bool is_engine_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char head[8] = {};
  f.read(head, 8);
  if (f.gcount() >= 6 && std::memcmp(head, "\x93NUMPY", 6) == 0) return true;
  if (f.gcount() == 8 && std::memcmp(head, "_logits_", 8) == 0) return true;
  f.clear();
  f.seekg(0);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line == "\r") continue;
    if (line.rfind("data:", 0) == 0 || line[0] == ':' || line.rfind("event:", 0) == 0) return true;
    // A golden JSONL line has "steps"; anything else in JSON is another engine's response.
    // A glassbox trace ("schema": "glassbox.trace/N", any version) is refused by the golden path with its own message.
    if (line[0] == '{' || line[0] == '[')
      return line.find("\"steps\"") == std::string::npos && line.find("glassbox.trace/") == std::string::npos;
    return false;
  }
  return false;
}

// One engine file read into an ImportedRun: the dialect's reader (a NumPy array, a llama.cpp KL-divergence
// base file, an SSE stream, or JSON/JSONL responses), each entry's candidates aligned to the vocabulary, then
// the entries placed on the generated tokens' steps.
class EngineFileReader {
 public:
  EngineFileReader(const std::string& path, const std::string& from, int index, const Tokenizer& tok)
      : path(path), from(from), index(index), tok(tok), vocab(tok), V(vocab.size()) {}
  ImportedRun read();

 private:
  // Each entry's distribution, aligned.
  struct Aligned {
    std::optional<std::int32_t> id;     // the emitted token, when known by itself
    std::string prefix;                 // held-back bytes reported with it (llama.cpp), when they can be told
    std::optional<double> value;
    std::vector<ImportedCandidate> top;
    std::optional<double> unlisted;
    std::string where;
  };

  // ---- every token to an id ----
  std::optional<std::int32_t> resolve(const RawToken& t) const;
  std::string describe(const RawToken& t) const;
  // An entry's candidates onto ids, their mass checked (post: probabilities, else logprobs).
  AlignedTop align_top(const RawEntry& r, bool post) const;
  void read_npy_file(const std::string& text);   // hf-npy, with its sidecar NAME.json
  void read_kld_file(const std::string& text);   // llamacpp-kld: one chunk's rows
  void read_json_file(const std::string& text);  // one JSON response or a JSONL of them (--prompt-index)
  std::vector<Aligned> aligned_entries(bool post);
  void place_steps(std::vector<Aligned>& al);    // entries onto steps: run.steps

  const std::string& path;
  const std::string& from;
  const int index;
  const Tokenizer& tok;
  const Vocab vocab;
  const int V;
  Parsed p;
  ImportedRun run;
  std::vector<std::vector<float>> full_rows;  // npy / kld: every value of each reported row
  std::vector<double> kld_floor;              // kld: log p of every unlisted token is at most this
};

std::optional<std::int32_t> EngineFileReader::resolve(const RawToken& t) const {
  if (t.id) {
    if (*t.id >= V) throw InputError(t.where + ": token id " + std::to_string(*t.id) + " is outside the model's vocabulary of " + std::to_string(V));
    return *t.id;
  }
  if (t.bytes) {
    if (auto id = vocab.by_bytes(*t.bytes)) return id;
    if (t.bytes->empty()) return std::nullopt;
  }
  if (t.text) return vocab.by_text(*t.text);
  return std::nullopt;
}

std::string EngineFileReader::describe(const RawToken& t) const {
  std::string s = t.text ? show(*t.text) : std::string("a token");
  if (t.bytes) {
    s += " (bytes";
    for (unsigned char c : *t.bytes) s += " " + std::to_string(c);
    s += ")";
  }
  return s;
}

AlignedTop EngineFileReader::align_top(const RawEntry& r, bool post) const {
  AlignedTop out;
  if (r.top.size() > static_cast<std::size_t>(V))
    throw InputError(r.where + ": a top list of " + std::to_string(r.top.size()) + " candidates, more than the model's vocabulary of " + std::to_string(V));
  int dropped = 0;
  std::vector<bool> seen(static_cast<std::size_t>(V));
  double listed = 0;
  for (std::size_t k = 0; k < r.top.size(); ++k) {
    const RawCandidate& c = r.top[k];
    if (c.tok.id && *c.tok.id >= V && !r.top_at.empty())
      throw InputError(r.candidate_where(k) + ": token id " + std::to_string(*c.tok.id) + " is outside the model's vocabulary of " + std::to_string(V));
    auto id = resolve(c.tok);
    if (!id) {
      ++dropped;  // an alternative this vocabulary cannot name (an empty string: a control token or held-back byte)
      continue;
    }
    if (seen[static_cast<std::size_t>(*id)]) continue;  // two strings for one id (e.g. "<s>" and ""): keep the first
    seen[static_cast<std::size_t>(*id)] = true;
    out.top.push_back({*id, c.value});
  }
  if (dropped > 0 && dropped == static_cast<int>(r.top.size()) && !r.top.empty())
    throw InputError((r.top_at.empty() ? r.top[0].tok.where : r.candidate_where(0)) + ": token " + describe(r.top[0].tok) + " matches no entry of the model's vocabulary (" + std::to_string(V) +
                     " tokens): another model?");
  for (const auto& c : out.top) listed += post ? c.value : std::exp(c.value);
  // One distribution's entries: their probabilities cannot sum past 1 (beyond the rounding of the engine).
  if (listed > 1 + traces::kProbabilityMassTolerance) {
    char buf[200];
    std::snprintf(buf, sizeof buf, ": the %zu listed %s sum to a probability of %.6g, more than 1 (+%g): not one distribution", out.top.size(),
                  post ? "probabilities" : "logprobs", listed, traces::kProbabilityMassTolerance);
    throw InputError(r.where + buf);
  }
  if (r.has_top) out.unlisted = std::max(0.0, 1 - listed);
  return out;
}

void EngineFileReader::read_npy_file(const std::string& text) {
  p.dialect = "hf-npy";
  read_npy(text, path, V, p);
  for (auto& e : p.entries) {
    std::vector<float> row(static_cast<std::size_t>(V));
    for (std::size_t i = 0; i < e.top.size(); ++i) row[i] = static_cast<float>(e.top[i].value);
    full_rows.push_back(std::move(row));
    e.top.clear();
    e.has_top = false;
  }
  // The sidecar (NAME.json beside NAME.npy) has what the array does not: the prompt's and the generated ids.
  std::string side = path.substr(0, path.size() - (path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0 ? 4 : 0)) + ".json";
  std::string why;
  if (auto t = read_structured_file(side, why)) {
    const json j = parse_json_input<InputError>(*t, side);
    auto ids_of = [&](const char* key) -> std::optional<std::vector<std::int32_t>> {
      if (!j.is_object() || !j.contains(key)) return std::nullopt;
      const json& a = need_array(j, key, side);
      std::vector<std::int32_t> ids;
      for (std::size_t i = 0; i < a.size(); ++i) ids.push_back(read_id(a[i], side + ": " + key + "[" + std::to_string(i) + "]"));
      return ids;
    };
    p.prompt_ids = ids_of("prompt_ids");
    p.tokens = ids_of("generated_ids");
    if (j.is_object() && j.contains("prompt") && j["prompt"].is_string()) p.prompt = j["prompt"].get<std::string>();
    run.notes.push_back("read the prompt and the generated ids from " + side);
  } else {
    run.notes.push_back(side + " not found: the generated ids are each row's argmax (a greedy run)");
  }
  if (!p.tokens) {
    std::vector<std::int32_t> ids;
    for (const auto& row : full_rows) ids.push_back(static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    p.tokens = ids;
  }
  if (p.tokens->size() != full_rows.size())
    throw InputError(side + ": generated_ids has " + std::to_string(p.tokens->size()) + " ids but " + path + " has " +
                     std::to_string(full_rows.size()) + " rows (row k is the distribution that chose generated token k)");
  for (std::size_t i = 0; i < p.entries.size(); ++i) p.entries[i].tok.id = (*p.tokens)[i];
}

void EngineFileReader::read_kld_file(const std::string& text) {
  p.dialect = "llamacpp-kld";
  auto rd = [&](std::size_t off, void* dst, std::size_t n, const char* what) {
    if (off + n > text.size()) throw InputError(path + ": truncated KL-divergence base file: " + what + " at byte " + std::to_string(off) + " runs past the end");
    std::memcpy(dst, text.data() + off, n);
  };
  KldFile k;
  if (text.compare(0, 8, "_logits_") != 0) throw InputError(path + ": not a llama.cpp KL-divergence base file (no _logits_ magic)");
  rd(8, &k.n_ctx, 4, "n_ctx");
  rd(12, &k.n_vocab, 4, "n_vocab");
  rd(16, &k.n_chunk, 4, "n_chunk");
  if (k.n_vocab != V) throw InputError(path + ": n_vocab " + std::to_string(k.n_vocab) + " but the model's vocabulary has " + std::to_string(V) + " tokens");
  if (k.n_ctx < 4 || k.n_ctx > (1u << 20) || k.n_chunk < 1 || k.n_chunk > (1 << 20))
    throw InputError(path + ": n_ctx " + std::to_string(k.n_ctx) + ", n_chunk " + std::to_string(k.n_chunk) + " are not sizes");
  // The size the header implies, checked against the file before anything is sized by it (a 20-byte file
  // must not allocate the 4 GiB of tokens its header claims). n_ctx and n_chunk are below 2^20: no overflow.
  const std::size_t ntok = static_cast<std::size_t>(k.n_ctx) * static_cast<std::size_t>(k.n_chunk);
  k.rows_at = 20 + 4 * ntok;
  k.row_u16 = 2 * ((static_cast<std::size_t>(k.n_vocab) + 1) / 2) + 4;
  const std::size_t rows_per_chunk = k.n_ctx - 1 - k.n_ctx / 2;
  const std::size_t expect = k.rows_at + static_cast<std::size_t>(k.n_chunk) * rows_per_chunk * k.row_u16 * 2;
  if (text.size() != expect)
    throw InputError(path + ": " + std::to_string(text.size()) + " bytes, but n_ctx " + std::to_string(k.n_ctx) + ", n_vocab " +
                     std::to_string(k.n_vocab) + ", n_chunk " + std::to_string(k.n_chunk) + " mean " + std::to_string(expect));
  k.tokens.resize(ntok);
  rd(20, k.tokens.data(), 4 * ntok, "the tokens");
  const int chunk = std::max(index, 0);
  if (chunk >= k.n_chunk)
    throw InputError(path + ": --prompt-index " + std::to_string(chunk) + " but the file holds " + std::to_string(k.n_chunk) + " chunks");
  if (index < 0 && k.n_chunk > 1)
    run.notes.push_back(path + " holds " + std::to_string(k.n_chunk) + " chunks of " + std::to_string(k.n_ctx) + " tokens; importing chunk 0 (--prompt-index picks another)");
  const std::size_t base = static_cast<std::size_t>(chunk) * k.n_ctx;
  for (std::size_t i = 0; i < k.n_ctx; ++i)
    if (k.tokens[base + i] < 0 || k.tokens[base + i] >= V) throw InputError(path + ": token " + std::to_string(base + i) + " is " + std::to_string(k.tokens[base + i]) + ", outside the vocabulary");
  // The tool evaluates each chunk with BOS in place of its first token; rows follow positions n_ctx/2 .. n_ctx-2.
  std::vector<std::int32_t> prompt(k.tokens.begin() + static_cast<std::ptrdiff_t>(base), k.tokens.begin() + static_cast<std::ptrdiff_t>(base + k.n_ctx / 2 + 1));
  if (tok.bos_id() >= 0) prompt[0] = tok.bos_id();
  p.prompt_ids = prompt;
  std::vector<std::int32_t> gen;
  for (std::size_t r = 0; r < rows_per_chunk; ++r) {
    const std::size_t off = k.rows_at + (static_cast<std::size_t>(chunk) * rows_per_chunk + r) * k.row_u16 * 2;
    float scale, minlp;
    rd(off, &scale, 4, "a row's scale");
    rd(off + 4, &minlp, 4, "a row's min_log_prob");
    const std::string w = path + ": chunk " + std::to_string(chunk) + ", row " + std::to_string(r);
    if (!std::isfinite(scale) || scale <= 0 || !std::isfinite(minlp) || minlp > 0)
      throw InputError(w + ": scale " + std::to_string(scale) + ", min_log_prob " + std::to_string(minlp) + " (expected scale > 0, min_log_prob <= 0)");
    std::vector<float> row(static_cast<std::size_t>(V));
    for (int i = 0; i < V; ++i) {
      std::uint16_t q;
      rd(off + 8 + 2 * static_cast<std::size_t>(i), &q, 2, "a row's values");
      row[static_cast<std::size_t>(i)] = q > 0 ? scale * q + minlp : -HUGE_VALF;  // q = 0: below the row's floor
    }
    const std::int32_t next = k.tokens[base + k.n_ctx / 2 + 1 + r];
    gen.push_back(next);
    RawEntry e;
    e.where = w;
    e.tok.id = next;
    e.has_top = true;
    for (int i = 0; i < V; ++i)
      if (std::isfinite(row[static_cast<std::size_t>(i)])) e.top.push_back({RawToken{i, {}, {}, {}}, row[static_cast<std::size_t>(i)]});
    std::sort(e.top.begin(), e.top.end(), [](const RawCandidate& a, const RawCandidate& b) { return a.value > b.value || (a.value == b.value && *a.tok.id < *b.tok.id); });
    if (std::isfinite(row[static_cast<std::size_t>(next)])) e.value = row[static_cast<std::size_t>(next)];
    kld_floor.push_back(minlp);
    p.entries.push_back(std::move(e));
  }
  p.tokens = gen;
  run.notes.push_back("chunk " + std::to_string(chunk) + ": " + std::to_string(rows_per_chunk) + " rows (positions " + std::to_string(k.n_ctx / 2) + ".." +
                      std::to_string(k.n_ctx - 2) + "), each listing the tokens within 16 of the best logit (u16-quantized, ±1.3e-4)");
}

void EngineFileReader::read_json_file(const std::string& text) {
  // One JSON response, or a JSONL of responses (one per line; --prompt-index picks one).
  const auto lines = split_lines(text);
  std::vector<Line> objects;
  for (const auto& l : lines)
    if (!l.text.empty()) objects.push_back(l);
  bool jsonl = false;
  if (objects.size() > 1) {
    // (a whole object on the first line; accept() builds no tree)
    const auto first = objects[0].text.find_first_not_of(" \t\r");
    jsonl = first != std::string_view::npos && objects[0].text[first] == '{' && json::accept(objects[0].text);
  }
  std::vector<std::pair<json, std::string>> docs;
  std::vector<std::string_view> sources;  // each document's text (vLLM's key order needs a second, ordered parse)
  if (jsonl) {
    for (const auto& l : objects) {
      docs.emplace_back(parse_capture(l.text, path + ":" + std::to_string(l.number)), path + ":" + std::to_string(l.number));
      sources.push_back(l.text);
    }
  } else {
    docs.emplace_back(parse_capture(text, path), path);
    sources.push_back(text);
    if (docs[0].first.is_array() && docs[0].first.size() == 1) docs[0].first = item(docs[0].first, 0);  // TGI's [{...}]
  }
  std::string first;
  for (const auto& [j, w] : docs) {
    const std::string d = from.empty() ? dialect_of(j) : from;
    if (d == "?" || d.empty()) {
      std::string keys;
      if (j.is_object()) for (const auto& [key, v] : j.items()) keys += (keys.empty() ? "" : ", ") + key;
      throw InputError(w + ": a response in no known logprob dialect (keys: " + keys + "); --from names one of: llamacpp-completion, " +
                       "llamacpp-post, llamacpp-old, openai-chat, openai-legacy, vllm, tgi, hf-npy, llamacpp-kld");
    }
    if (first.empty()) first = d;
    else if (d != first) throw InputError(w + ": a " + d + " response in a JSONL whose first response is " + first + " (mixed dialects)");
  }
  if (index >= static_cast<int>(docs.size()))
    throw InputError(path + ": --prompt-index " + std::to_string(index) + " but the file holds " + std::to_string(docs.size()) + " responses");
  if (docs.size() > 1 && index < 0)
    run.notes.push_back(path + " holds " + std::to_string(docs.size()) + " responses; importing the first (--prompt-index picks another)");
  const auto& [j, w] = docs[static_cast<std::size_t>(std::max(index, 0))];
  p.dialect = first;
  entries_of(j, first, w, p);
  if (first.rfind("llamacpp", 0) == 0) extras_of(j, p, false);
  if (first == "vllm") {
    // The prompt's ids: each prompt_logprobs dict lists the actual prompt token first (then the top-N), and
    // nlohmann::json sorts keys, so read the order again with ordered_json (the limits were checked above).
    auto oj = parse_capture<nlohmann::ordered_json>(sources[static_cast<std::size_t>(std::max(index, 0))], w);
    if (oj.is_array() && oj.size() == 1) oj = item(oj, 0);
    // (checked again here: a const operator[] on a missing key is undefined, and stol throws its own type)
    const auto& ch = oj.is_object() && oj.contains("choices") ? oj.at("choices") : oj;
    const auto c0 = ch.is_array() && !ch.empty() ? item(ch, 0) : nlohmann::ordered_json();
    if (!c0.is_object() || !c0.contains("prompt_logprobs") || !c0.at("prompt_logprobs").is_array())
      throw InputError(w + ": choices[0].prompt_logprobs: expected an array");
    const auto& pl = c0.at("prompt_logprobs");
    std::vector<std::int32_t> ids = {tok.bos_id() >= 0 ? tok.bos_id() : 0};
    for (std::size_t i = 1; i < pl.size(); ++i) {
      const std::string q = w + ": choices[0].prompt_logprobs[" + std::to_string(i) + "]";
      nlohmann::ordered_json pi_kept;
      const auto& pi = item(pl, i, pi_kept);
      if (!pi.is_object() || pi.empty()) throw InputError(q + ": expected an object of candidates");
      const std::string& key = pi.begin().key();
      if (key.empty() || key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos)
        throw InputError(q + ": key '" + key + "' is not a token id");
      ids.push_back(static_cast<std::int32_t>(std::stol(key)));
    }
    if (tok.bos_id() < 0) ids.erase(ids.begin());
    p.prompt_ids = ids;
  }
}

std::vector<EngineFileReader::Aligned> EngineFileReader::aligned_entries(bool post) {
  std::vector<Aligned> al;
  for (std::size_t e = 0; e < p.entries.size(); ++e) {
    RawEntry& r = p.entries[e];
    Aligned a;
    a.where = r.where;
    a.value = r.value;
    AlignedTop t = r.aligned ? std::move(*r.aligned) : align_top(r, post);
    a.top = std::move(t.top);
    a.unlisted = t.unlisted;
    // The emitted token: by id, else by its bytes/text, else as held-back bytes + a token that ends it.
    if (r.tok.id || run.distribution == "logits") {
      a.id = resolve(r.tok);
    } else if (auto id = resolve(r.tok)) {
      a.id = id;
    } else if (run.dialect.rfind("llamacpp", 0) == 0) {
      const std::string b = r.tok.bytes ? *r.tok.bytes : r.tok.text.value_or("");
      // llama.cpp's merged entry: held-back bytes that left the text inside a UTF-8 character, then the
      // token's own piece: the longest suffix that is one token after such a head. Not where the text
      // shows U+FFFD instead of the bytes (the old shape's `content`): those bytes are not known.
      if (b.find("\xEF\xBF\xBD") == std::string::npos || r.tok.bytes)
        for (std::size_t cut = 1; cut < b.size() && !a.id; ++cut) {
          const std::string head = b.substr(0, cut), tail = b.substr(cut);
          if (std::any_of(head.begin(), head.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) break;
          if (!ends_incomplete(head)) continue;
          if (auto id = vocab.by_bytes(tail)) a.id = id, a.prefix = head;
        }
    }
    if (r.tok.id && r.tok.bytes && a.id) {
      const std::string& own = vocab.bytes(*a.id);
      const std::string& b = *r.tok.bytes;
      if (b.size() > own.size() && b.compare(b.size() - own.size(), own.size(), own) == 0) a.prefix = b.substr(0, b.size() - own.size());
    }
    al.push_back(std::move(a));
  }

  return al;
}

void EngineFileReader::place_steps(std::vector<Aligned>& al) {
  // ---- entries onto steps ----
  std::vector<std::int32_t> tokens;
  std::vector<int> entry_of;  // step -> entry index, -1 none
  if (p.tokens && p.tokens->size() >= al.size()) {
    // Every generated id is known: walk them, giving the next entry to each token that leaves the text
    // complete UTF-8 (llama.cpp holds back a token ending inside a character; the next one carries it).
    tokens = *p.tokens;
    std::string acc;
    std::size_t e = 0;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] >= V) throw InputError(path + ": tokens[" + std::to_string(i) + "] = " + std::to_string(tokens[i]) + " is outside the vocabulary");
      acc += vocab.bytes(tokens[i]);
      if (run.dialect != "hf-npy" && run.dialect != "llamacpp-kld" && ends_incomplete(acc)) {
        entry_of.push_back(-1);
        continue;
      }
      acc.clear();
      if (e < al.size()) {
        if (p.entries[e].tok.id && al[e].id && *al[e].id != tokens[i])
          throw InputError(al[e].where + ": the entry is token " + std::to_string(*al[e].id) + " but the response's tokens[" + std::to_string(i) +
                           "] is " + std::to_string(tokens[i]) + " (cannot align the entries with the generated ids)");
        entry_of.push_back(static_cast<int>(e++));
      } else {
        entry_of.push_back(-1);  // trimmed by a stop word
      }
    }
    if (e < al.size()) throw InputError(al[e].where + ": more probability entries than generated tokens");
    const int held = static_cast<int>(std::count(entry_of.begin(), entry_of.end(), -1));
    if (held) run.notes.push_back(std::to_string(held) + " of " + std::to_string(tokens.size()) + " steps have no reported distribution (held back for incomplete UTF-8, or trimmed by a stop word)");
  } else {
    int rebuilt = 0, zero_byte = 0;
    long predicted = 0;
    for (std::size_t e = 0; e < al.size(); ++e) {
      if (!al[e].id) {
        const RawToken& t = p.entries[e].tok;
        throw InputError(t.where + ": token " + describe(t) + " matches no entry of the model's vocabulary (" + std::to_string(V) +
                         " tokens), not even as held-back bytes before one: another model or tokenizer?");
      }
      // Held-back bytes given with the entry: their byte-fallback tokens (a zero-byte token such as a BOS
      // between them cannot be seen and is lost).
      // llama.cpp's stream counts every token (tokens_predicted): more than the bytes account for means
      // zero-byte tokens among the held-back ones. A token generated while the text is complete is
      // emitted at once, so they follow the first held-back byte; of the tokens without bytes only a
      // control token can be one (EOS would have ended the run), taken as BOS and said so.
      long hidden = 0;
      if (p.entries[e].predicted) {
        hidden = *p.entries[e].predicted - predicted - static_cast<long>(al[e].prefix.size()) - 1;
        predicted = *p.entries[e].predicted;
        if (hidden < 0) hidden = 0;
      }
      for (std::size_t i = 0; i < al[e].prefix.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(al[e].prefix[i]);
        const std::int32_t b = vocab.byte_token(c);
        if (b < 0) throw InputError(al[e].where + ": held-back byte " + std::to_string(c) + " has no byte-fallback token in this vocabulary");
        tokens.push_back(b);
        entry_of.push_back(-1);
        ++rebuilt;
        for (; i == 0 && hidden > 0 && tok.bos_id() >= 0; --hidden, ++zero_byte) {
          tokens.push_back(tok.bos_id());
          entry_of.push_back(-1);
        }
      }
      tokens.push_back(*al[e].id);
      entry_of.push_back(static_cast<int>(e));
    }
    if (zero_byte)
      run.notes.push_back(std::to_string(zero_byte) + " held-back token(s) without bytes (tokens_predicted counts them, the bytes do not): taken as BOS, "
                          "after the first held-back byte");
    if (rebuilt)
      run.notes.push_back(std::to_string(rebuilt) + " held-back tokens rebuilt from the entries' bytes as byte tokens (the stream does not list them; a token without bytes between them would be missed)");
  }

  for (std::size_t i = 0; i < tokens.size(); ++i) {
    ImportedStep s;
    s.token = tokens[i];
    const int e = entry_of[i];
    if (e >= 0) {
      Aligned& a = al[static_cast<std::size_t>(e)];
      s.reported = true;
      s.where = a.where;
      s.top = std::move(a.top);
      s.unlisted = a.unlisted;
      s.chosen = a.value;
      if (!s.chosen)
        for (const auto& c : s.top)
          if (c.id == s.token) s.chosen = c.value;
      if (!full_rows.empty()) s.logits = full_rows[static_cast<std::size_t>(e)];
      if (!kld_floor.empty() && !s.chosen) s.chosen = kld_floor[static_cast<std::size_t>(e)];  // below the row's floor: at most this
    }
    run.steps.push_back(std::move(s));
  }
}

ImportedRun EngineFileReader::read() {
  if (!from.empty() && std::find(import_dialects().begin(), import_dialects().end(), from) == import_dialects().end()) {
    std::string all;
    for (const auto& d : import_dialects()) all += (all.empty() ? "" : ", ") + d;
    throw ConfigError("--from '" + from + "': unknown dialect (expected one of " + all + ")");
  }
  if (auto why = not_a_regular_file(path)) throw InputError(path + ": " + *why);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw InputError(path + ": cannot read: " + std::strerror(errno));
  const auto size = static_cast<std::uint64_t>(in.tellg());
  if (size > kMaxStructuredInputBytes) throw InputError(path + ": " + std::to_string(size) + " bytes, more than an engine capture may hold");
  in.seekg(0);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (!in) throw InputError(path + ": read failed");

  // The entries of a response or a stream are aligned as they are read: its candidates are not all held.
  p.on_entry = [this](RawEntry& r) {
    r.aligned = align_top(r, distribution_of(p.dialect) == "post");
    std::vector<RawCandidate>().swap(r.top);
  };
  const bool npy = text.compare(0, 6, "\x93NUMPY") == 0;
  const bool kld = text.compare(0, 8, "_logits_") == 0;
  if ((npy && !from.empty() && from != "hf-npy") || (kld && !from.empty() && from != "llamacpp-kld"))
    throw InputError(path + ": --from " + from + " but the file is a " + (npy ? "NumPy .npy array" : "llama.cpp KL-divergence base file"));
  if (npy || from == "hf-npy") {
    read_npy_file(text);
  } else if (kld || from == "llamacpp-kld") {
    read_kld_file(text);
  } else if (looks_sse(text)) {
    read_sse(text, path, from, p);
  } else {
    read_json_file(text);
  }
  run.dialect = p.dialect;
  run.distribution = distribution_of(p.dialect);
  run.prompt = p.prompt;
  run.prompt_ids = p.prompt_ids;
  for (auto& n : p.notes) run.notes.push_back(std::move(n));
  if (p.entries.empty()) throw InputError(path + ": the " + p.dialect + " response reports no token");
  const bool post = run.distribution == "post";

  std::vector<Aligned> al = aligned_entries(post);
  place_steps(al);
  return run;
}

ImportedRun read_engine_file(const std::string& path, const std::string& from, int index, const Tokenizer& tok) {
  return EngineFileReader(path, from, index, tok).read();
}

}  // namespace glassbox::cli
