// Trace reader and validator: the checks of docs/trace.schema.json, by hand, plus the sequence rules.
#include "glassbox/traces/reader.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/traces/writer.hpp"

namespace glassbox::traces {

using nlohmann::json;

namespace {

// Field checks that name where they failed: "t.jsonl:3: step.top[2].prob: expected a number, got string".
class Check {
 public:
  explicit Check(const std::string& where) : where_(where) {}

  [[noreturn]] void fail(const std::string& msg) const { throw TraceError(where_ + ": " + msg); }

  const json& field(const json& obj, const char* key, const std::string& path) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail("missing field " + join(path, key));
    return *it;
  }
  const json& object(const json& obj, const char* key, const std::string& path) const {
    const json& v = field(obj, key, path);
    if (!v.is_object()) fail(join(path, key) + ": expected an object, got " + v.type_name());
    return v;
  }
  const json& array(const json& obj, const char* key, const std::string& path) const {
    const json& v = field(obj, key, path);
    if (!v.is_array()) fail(join(path, key) + ": expected an array, got " + v.type_name());
    return v;
  }
  std::string string(const json& obj, const char* key, const std::string& path) const {
    const json& v = field(obj, key, path);
    if (!v.is_string()) fail(join(path, key) + ": expected a string, got " + v.type_name());
    return v.get<std::string>();
  }
  bool boolean(const json& obj, const char* key, const std::string& path) const {
    const json& v = field(obj, key, path);
    if (!v.is_boolean()) fail(join(path, key) + ": expected true or false, got " + v.type_name());
    return v.get<bool>();
  }
  std::int64_t integer(const json& v, const std::string& name, std::int64_t min, std::int64_t max) const {
    if (!v.is_number_integer()) fail(name + ": expected an integer, got " + v.type_name());
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail(name + ": " + v.dump() + " is too large");
    const auto x = v.get<std::int64_t>();
    if (x < min || x > max)
      fail(name + ": " + std::to_string(x) + " is outside [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return x;
  }
  std::int64_t integer(const json& obj, const char* key, const std::string& path, std::int64_t min = 0,
                       std::int64_t max = INT64_MAX) const {
    return integer(field(obj, key, path), join(path, key), min, max);
  }
  double number(const json& v, const std::string& name, double min = -HUGE_VAL, double max = HUGE_VAL) const {
    if (!v.is_number()) fail(name + ": expected a number, got " + v.type_name());
    const double x = v.get<double>();
    if (!(x >= min && x <= max))
      fail(name + ": " + v.dump() + " is outside [" + fmt(min) + ", " + fmt(max) + "]");
    return x;
  }
  double number(const json& obj, const char* key, const std::string& path, double min = -HUGE_VAL,
                double max = HUGE_VAL) const {
    return number(field(obj, key, path), join(path, key), min, max);
  }
  double prob(const json& obj, const char* key, const std::string& path) const {
    return number(obj, key, path, 0.0, kProbMax);
  }
  void params(const json& obj, const std::string& path) const {
    const json& p = object(obj, "params", path);
    for (const auto& [k, v] : p.items())
      if (!v.is_number() && !v.is_string() && !v.is_boolean())
        fail(join(path, "params") + "." + k + ": expected a number, string or bool, got " + v.type_name());
  }
  void plugin(const json& p, const std::string& path) const {
    if (!p.is_object()) fail(path + ": expected an object {name, params}, got " + p.type_name());
    if (string(p, "name", path).empty()) fail(path + ".name: empty");
    params(p, path);
  }

  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }
  static std::string fmt(double x) {
    if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
    std::ostringstream s;
    s << x;
    return s.str();
  }
  static constexpr double kProbMax = 1.000001;  // float rounding may put a probability a hair above 1

 private:
  const std::string& where_;
};

std::string where(const std::string& name, int line) { return name + ":" + std::to_string(line); }

}  // namespace

void check_header(const json& j, const std::string& w) {
  Check c(w);
  if (!j.is_object()) c.fail("expected a JSON object, got " + std::string(j.type_name()));
  const std::string schema = c.string(j, "schema", "header");
  if (schema != kSchema)
    c.fail("unknown schema '" + schema + "' (this glassbox reads " + kSchema + ")");
  if (c.string(j, "type", "header") != "header") c.fail("header.type: expected \"header\"");
  const json& model = c.object(j, "model", "header");
  c.string(model, "path", "header.model");
  const std::string sha = c.string(model, "sha256", "header.model");
  if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos)
    c.fail("header.model.sha256: expected 64 lowercase hex digits, got '" + sha + "'");
  const json& cfg = c.object(model, "config", "header.model");
  for (const char* k : {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"})
    c.integer(cfg, k, "header.model.config", 1, INT32_MAX);
  c.boolean(cfg, "shared_classifier", "header.model.config");
  c.integer(cfg, "format_version", "header.model.config", 0, INT32_MAX);
  if (c.number(cfg, "rope_theta", "header.model.config") <= 0) c.fail("header.model.config.rope_theta: must be > 0");
  c.string(c.object(j, "tokenizer", "header"), "path", "header.tokenizer");
  const json& plugins = c.object(j, "plugins", "header");
  c.plugin(c.field(plugins, "tokenizer", "header.plugins"), "header.plugins.tokenizer");
  c.plugin(c.field(plugins, "attention", "header.plugins"), "header.plugins.attention");
  const json& samplers = c.array(plugins, "sampler", "header.plugins");
  if (samplers.empty()) c.fail("header.plugins.sampler: empty chain");
  for (std::size_t i = 0; i < samplers.size(); ++i)
    c.plugin(samplers[i], "header.plugins.sampler[" + std::to_string(i) + "]");
  const json& seed = c.field(j, "seed", "header");
  if (!seed.is_number_integer() || (seed.is_number_integer() && !seed.is_number_unsigned() && seed.get<std::int64_t>() < 0))
    c.fail("header.seed: expected an unsigned integer, got " + seed.dump());
  c.string(j, "rng", "header");
  c.string(j, "prompt", "header");
  const auto vocab = c.integer(cfg, "vocab_size", "header.model.config", 1, INT32_MAX);
  const json& ids = c.array(j, "prompt_ids", "header");
  if (ids.empty()) c.fail("header.prompt_ids: empty (the encoding starts with BOS)");
  for (std::size_t i = 0; i < ids.size(); ++i) c.integer(ids[i], "header.prompt_ids[" + std::to_string(i) + "]", 0, vocab - 1);
  c.integer(j, "max_tokens", "header", 0, INT32_MAX);
  const std::string level = c.string(j, "trace_level", "header");
  if (level != "basic" && level != "full") c.fail("header.trace_level: '" + level + "' (expected basic or full)");
}

void check_step(const json& j, const std::string& w, int vocab, bool full) {
  Check c(w);
  if (!j.is_object()) c.fail("expected a JSON object, got " + std::string(j.type_name()));
  const std::string phase = c.string(j, "phase", "step");
  if (phase != "prefill" && phase != "decode") c.fail("step.phase: '" + phase + "' (expected prefill or decode)");
  c.integer(j, "step", "step", 0, INT32_MAX);
  c.integer(j, "pos", "step", 0, INT32_MAX);
  const json& in = c.array(j, "input_ids", "step");
  if (in.empty()) c.fail("step.input_ids: empty");
  for (std::size_t i = 0; i < in.size(); ++i) c.integer(in[i], "step.input_ids[" + std::to_string(i) + "]", 0, vocab - 1);
  const json& tok = c.object(j, "token", "step");
  c.integer(tok, "id", "step.token", 0, vocab - 1);
  c.string(tok, "text", "step.token");
  c.prob(j, "prob", "step");
  c.number(j, "logprob", "step", -HUGE_VAL, 0.0);
  c.number(j, "entropy", "step", 0.0);
  const json& top = c.array(j, "top", "step");
  for (std::size_t i = 0; i < top.size(); ++i) {
    const std::string p = "step.top[" + std::to_string(i) + "]";
    if (!top[i].is_object()) c.fail(p + ": expected an object, got " + top[i].type_name());
    c.integer(top[i], "id", p, 0, vocab - 1);
    c.string(top[i], "text", p);
    const double l = c.number(top[i], "logit", p);
    c.prob(top[i], "prob", p);
    if (i > 0 && l > top[i - 1]["logit"].get<double>())
      c.fail(p + ".logit: " + top[i]["logit"].dump() + " is above the previous candidate's (top is sorted by logit)");
  }
  const json& stages = c.array(j, "stages", "step");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const std::string p = "step.stages[" + std::to_string(i) + "]";
    const json& s = stages[i];
    if (!s.is_object()) c.fail(p + ": expected an object, got " + s.type_name());
    if (c.string(s, "name", p).empty()) c.fail(p + ".name: empty");
    c.params(s, p);
    c.integer(s, "kept", p, 1, vocab);
    c.number(s, "mass", p, 0.0, Check::kProbMax);
    c.number(s, "entropy", p, 0.0);
    const json& st = c.array(s, "top", p);
    for (std::size_t k = 0; k < st.size(); ++k) {
      const std::string q = p + ".top[" + std::to_string(k) + "]";
      if (!st[k].is_object()) c.fail(q + ": expected an object, got " + st[k].type_name());
      c.integer(st[k], "id", q, 0, vocab - 1);
      c.string(st[k], "text", q);
      c.prob(st[k], "prob", q);
    }
  }
  const json& draw = c.object(j, "draw", "step");
  const json& u = c.field(draw, "u", "step.draw");
  if (!u.is_null()) c.number(u, "step.draw.u", 0.0, 1.0);
  c.integer(draw, "selected", "step.draw", 0, vocab - 1);
  c.prob(draw, "prob", "step.draw");
  const json& kv = c.object(j, "kv", "step");
  for (const char* k : {"tokens", "capacity", "bytes"}) c.integer(kv, k, "step.kv");
  if (kv.contains("block_size")) {  // a paged module's blocks
    for (const char* k : {"block_size", "blocks_used", "blocks_free", "last_block_unused"}) c.integer(kv, k, "step.kv");
    c.array(kv, "block_table", "step.kv");
  }
  if (j.contains("attention_dots")) c.integer(j, "attention_dots", "step", 0, INT64_MAX);
  if (j.contains("attention")) {
    const json& rows = c.array(j, "attention", "step");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::string p = "step.attention[" + std::to_string(i) + "]";
      for (const char* k : {"layer", "head", "pos", "first_pos"}) c.integer(rows[i], k, p, 0, INT32_MAX);
      const json& w = c.array(rows[i], "weights", p);
      for (std::size_t x = 0; x < w.size(); ++x) c.number(w[x], p + ".weights[" + std::to_string(x) + "]", 0.0, 1.000001);
    }
  }
  c.number(j, "ms", "step", 0.0);
  auto logits = j.find("logits");
  if (full) {
    if (logits == j.end()) c.fail("missing field step.logits (the header says trace_level full)");
  } else if (logits != j.end()) {
    c.fail("step.logits present but the header says trace_level basic");
  }
  if (logits != j.end()) {
    if (!logits->is_array()) c.fail("step.logits: expected an array, got " + std::string(logits->type_name()));
    if (static_cast<int>(logits->size()) != vocab)
      c.fail("step.logits: " + std::to_string(logits->size()) + " values, expected vocab_size = " + std::to_string(vocab));
    for (std::size_t i = 0; i < logits->size(); ++i)
      if (!(*logits)[i].is_number()) c.fail("step.logits[" + std::to_string(i) + "]: expected a number, got " + (*logits)[i].type_name());
  }
  auto forced = j.find("forced");
  if (forced != j.end() && *forced != true) c.fail("step.forced: expected true (or no field), got " + forced->dump());
  if (forced == j.end() && draw["selected"] != tok["id"])
    c.fail("step.draw.selected " + draw["selected"].dump() + " differs from step.token.id " + tok["id"].dump() +
           " on a step that was not forced");
}

void check_context(const json& j, const std::string& w) {
  Check c{w};
  const std::string policy = c.string(j, "policy", "context");
  if (policy != "truncate-left" && policy != "shift" && policy != "prune-turns")
    c.fail("context.policy: '" + policy + "' (expected truncate-left, shift or prune-turns)");
  c.integer(j, "step", "context", 0, INT32_MAX);
  c.integer(j, "limit", "context", 1, INT32_MAX);
  const json& d = c.object(j, "dropped", "context");
  const auto from = c.integer(d, "from", "context.dropped", 0, INT32_MAX), to = c.integer(d, "to", "context.dropped", 0, INT32_MAX);
  if (to < from) c.fail("context.dropped: to " + std::to_string(to) + " before from " + std::to_string(from));
  const json& ids = c.array(d, "ids", "context.dropped");
  if (static_cast<std::int64_t>(ids.size()) != to - from)
    c.fail("context.dropped.ids: " + std::to_string(ids.size()) + " ids for positions " + std::to_string(from) + ".." + std::to_string(to));
  c.integer(j, "kept", "context", 0, INT32_MAX);
  if (policy == "prune-turns") {
    c.integer(j, "turns", "context", 1, INT32_MAX);
    if (j["step"] != 0) c.fail("context: a prune-turns line belongs before the prefill (step 0), not step " + j["step"].dump());
  }
}

void check_summary(const json& j, const std::string& w) {
  Check c(w);
  if (!j.is_object()) c.fail("expected a JSON object, got " + std::string(j.type_name()));
  c.integer(j, "generated", "summary", 0, INT32_MAX);
  const std::string r = c.string(j, "stop_reason", "summary");
  if (r != "stop_token" && r != "max_tokens" && r != "context_full" && r != "stop_text")
    c.fail("summary.stop_reason: '" + r + "' (expected stop_token, max_tokens, context_full or stop_text)");
  c.number(j, "ttft_ms", "summary", 0.0);
  c.number(j, "prefill_tok_s", "summary", 0.0);
  c.number(j, "decode_tok_s", "summary", 0.0);
}

namespace {

// Nesting deeper than kMaxTraceJsonDepth is refused before parsing: nlohmann's parser and every
// consumer (dump, the HTML page) recurse once per level.
void check_depth(const std::string& text, const std::string& w) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > kMaxTraceJsonDepth)
        throw TraceError(w + ": JSON nested deeper than " + std::to_string(kMaxTraceJsonDepth) + " levels");
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
}

// One line, at most kMaxTraceLineBytes. False at the end of the input.
bool read_line(std::istream& in, std::string& out, const std::string& name, int line) {
  out.clear();
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  for (;;) {
    const int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return any;
    }
    any = true;
    if (c == '\n') return true;
    if (out.size() >= kMaxTraceLineBytes)
      throw TraceError(where(name, line) + ": line longer than " + std::to_string(kMaxTraceLineBytes >> 20) +
                       " MiB (not a glassbox trace?)");
    out.push_back(static_cast<char>(c));
  }
}

// Opens a trace file for reading: regular files only (a FIFO or /dev/zero would block or never end).
std::ifstream open_trace(const std::string& path) {
  if (auto why = not_a_regular_file(path)) throw TraceError(path + ": " + *why + " (expected a trace file)");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw TraceError(path + ": cannot read trace file: " + std::strerror(errno));
  return f;
}

json parse_line(const std::string& text, const std::string& w) {
  check_depth(text, w);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..." -> keep the useful part
    if (auto p = msg.find("column"); p != std::string::npos) msg = msg.substr(p);
    throw TraceError(w + ": not valid JSON (" + msg + ")");
  } catch (const json::exception& e) {
    // e.g. a number beyond double range: "[json.exception.out_of_range.406] number overflow parsing '1e999'"
    std::string msg = e.what();
    if (auto p = msg.find("] "); p != std::string::npos) msg = msg.substr(p + 2);
    throw TraceError(w + ": not usable JSON (" + msg + ")");
  }
  if (!j.is_object()) throw TraceError(w + ": expected a JSON object, got " + std::string(j.type_name()));
  auto t = j.find("type");
  if (t == j.end()) {
    // Most often another engine's output (a llama2.c / llama.cpp golden): say so, and how to convert it.
    std::string keys;
    for (const auto& [k, v] : j.items()) keys += (keys.empty() ? "" : ", ") + k;
    throw TraceError(w + ": not a glassbox trace (no field type; its fields: " + (keys.empty() ? "none" : keys) +
                     "); `glassbox trace import` converts other engines' logits into one");
  }
  if (!t->is_string()) throw TraceError(w + ": type: expected a string, got " + std::string(t->type_name()));
  return j;
}

}  // namespace

Trace parse_trace(std::istream& in, const std::string& name, const ReadOptions& opt) {
  Trace t;
  t.path = name;
  std::string text;
  int line = 0;
  int last_step_line = 0;
  bool ended = false;  // summary seen
  int vocab = 0;
  bool full = false;
  json context;      // a context line not yet followed by its step
  json pruned_then;  // the engine's context line after a chat's prune-turns line, both before step 0
  while (read_line(in, text, name, line + 1)) {
    ++line;
    const std::string w = where(name, line);
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (ended) throw TraceError(w + ": line after the summary (the summary is the last line)");
    if (text.empty()) throw TraceError(w + ": empty line (JSON Lines has one object per line)");
    json j = parse_line(text, w);
    const std::string type = j["type"].get<std::string>();
    if (type == "error" || type == "interrupted") {
      auto m = j.find("message");
      const std::string msg = m != j.end() && m->is_string() ? m->get<std::string>() : std::string("(no message)");
      if (line == 1) throw TraceError(w + ": the run failed before it started: " + msg);
      if (opt.require_summary)
        throw TraceError(w + ": cut short: the run " +
                         (type == "error" ? std::string("stopped with an error") : "was " + msg) + " after " +
                         std::to_string(t.steps.size()) + " steps" + (type == "error" ? ": " + msg : std::string()));
      // tolerated: the trace ends here, summary stays null
      if (read_line(in, text, name, line + 1)) throw TraceError(where(name, line + 1) + ": line after the " + type + " line");
      t.end_type = type;
      t.end_message = msg;
      return t;
    }
    if (line == 1) {
      if (type != "header") throw TraceError(w + ": expected the header first, got a " + type + " line");
      check_header(j, w);
      vocab = j["model"]["config"]["vocab_size"].get<int>();
      full = j["trace_level"] == "full";
      t.header = std::move(j);
      continue;
    }
    if (type == "header") throw TraceError(w + ": a second header (a trace holds one run)");
    if (type == "step") {
      check_step(j, w, vocab, full);
      const int k = j["step"].get<int>();
      const int expect = static_cast<int>(t.steps.size());
      if (k != expect)
        throw TraceError(w + ": step " + std::to_string(k) + " out of order (expected step " + std::to_string(expect) +
                         (expect > 0 ? " after step " + std::to_string(expect - 1) + " on line " + std::to_string(last_step_line) : std::string()) + ")");
      const std::string phase = j["phase"].get<std::string>();
      if ((k == 0) != (phase == "prefill"))
        throw TraceError(w + ": step " + std::to_string(k) + " has phase " + phase + " (step 0 is the prefill, later steps decode)");
      json ids = t.header["prompt_ids"];
      const int pos = j["pos"].get<int>();
      int expect_pos = k == 0 ? static_cast<int>(ids.size()) - 1 : t.steps.back()["pos"].get<int>() + 1;
      if (!context.is_null() && context["policy"] == "prune-turns") {
        // The chat dropped turns before encoding: the header's prompt is what the prefill holds.
        if (context["kept"] != static_cast<int>(ids.size()))
          throw TraceError(w + ": the prune-turns line before it keeps " + context["kept"].dump() + " tokens but the header's prompt_ids hold " +
                           std::to_string(ids.size()));
        context = pruned_then.is_null() ? json() : pruned_then;
        pruned_then = nullptr;
      }
      if (!context.is_null()) {  // a context policy dropped tokens just before this step
        const int kept = context["kept"].get<int>();
        if (k == 0) {
          const int from = context["dropped"]["from"].get<int>(), to = context["dropped"]["to"].get<int>();
          if (to > static_cast<int>(ids.size()))
            throw TraceError(w + ": the context line before it drops positions up to " + std::to_string(to) + " of a " +
                             std::to_string(ids.size()) + "-token prompt");
          ids.erase(ids.begin() + from, ids.begin() + to);
          expect_pos = kept - 1;
        } else {
          expect_pos = kept;
        }
        context = nullptr;
      }
      if (pos != expect_pos)
        throw TraceError(w + ": step " + std::to_string(k) + " at pos " + std::to_string(pos) + ", expected pos " + std::to_string(expect_pos));
      const json expect_in = k == 0 ? ids : json::array({t.steps.back()["token"]["id"]});
      if (j["input_ids"] != expect_in)
        throw TraceError(w + ": step " + std::to_string(k) + " input_ids " + j["input_ids"].dump() + ", expected " +
                         (k == 0 ? "the header's prompt_ids " : "the previous step's token ") + expect_in.dump());
      t.steps.push_back(std::move(j));
      t.step_lines.push_back(line);
      last_step_line = line;
      continue;
    }
    if (type == "context") {
      check_context(j, w);
      const int k = j["step"].get<int>();
      if (k != static_cast<int>(t.steps.size()))
        throw TraceError(w + ": context line for step " + std::to_string(k) + " (expected step " + std::to_string(t.steps.size()) +
                         ", the next one)");
      // A chat's prune-turns line may be followed by the engine's own cut of a prompt still too long.
      if (!context.is_null() && context["policy"] == "prune-turns" && j["policy"] != "prune-turns" && pruned_then.is_null()) {
        pruned_then = j;
        t.context.push_back(std::move(j));
        continue;
      }
      if (!context.is_null()) throw TraceError(w + ": two context lines without a step between them");
      context = j;
      t.context.push_back(std::move(j));
      continue;
    }
    if (type == "summary") {
      check_summary(j, w);
      const int gen = j["generated"].get<int>();
      const std::string reason = j["stop_reason"].get<std::string>();
      // stop_token / stop_text: the last step chose the token that ended the run, not counted.
      const int expect = reason == "stop_token" || reason == "stop_text" ? gen + 1 : gen;
      if (static_cast<int>(t.steps.size()) != expect)
        throw TraceError(w + ": summary says " + std::to_string(gen) + " generated (stop: " + reason + "), which means " +
                         std::to_string(expect) + " steps, but the trace has " + std::to_string(t.steps.size()));
      const int max_tokens = t.header["max_tokens"].get<int>();
      if (gen > max_tokens)
        throw TraceError(w + ": summary says " + std::to_string(gen) + " generated, more than max_tokens " + std::to_string(max_tokens));
      t.summary = std::move(j);
      t.summary_line = line;
      ended = true;
      continue;
    }
    throw TraceError(w + ": unknown line type '" + type + "' (expected header, step, summary, error or interrupted)");
  }
  if (in.bad()) throw TraceError(name + ": read failed");
  if (line == 0) throw TraceError(name + ":1: empty file (expected a glassbox.trace/1 header)");
  if (!ended && opt.require_summary)
    throw TraceError(where(name, line) + ": cut short: the trace ends after " +
                     (t.steps.empty() ? std::string("the header") : "step " + std::to_string(t.steps.size() - 1)) +
                     " on line " + std::to_string(line) + " without its summary line (the run did not complete)");
  return t;
}

Trace read_trace(const std::string& path, const ReadOptions& opt) {
  std::ifstream f = open_trace(path);
  return parse_trace(f, path, opt);
}

json read_trace_header(const std::string& path) {
  std::ifstream f = open_trace(path);
  std::string text;
  if (!read_line(f, text, path, 1)) throw TraceError(path + ":1: empty file (expected a glassbox.trace/1 header)");
  if (!text.empty() && text.back() == '\r') text.pop_back();
  const std::string w = where(path, 1);
  json j = parse_line(text, w);
  if (j["type"] == "error")
    throw TraceError(w + ": the run failed before it started: " + j.value("message", std::string("(no message)")));
  if (j["type"] != "header") throw TraceError(w + ": expected the header first, got a " + j["type"].get<std::string>() + " line");
  check_header(j, w);
  return j;
}

std::vector<std::int32_t> Trace::tokens() const {
  std::vector<std::int32_t> out;
  out.reserve(steps.size());
  for (const auto& s : steps) out.push_back(s["token"]["id"].get<std::int32_t>());
  return out;
}

std::string Trace::sampler_chain() const {
  std::string out;
  for (const auto& s : header["plugins"]["sampler"]) {
    if (!out.empty()) out += " -> ";
    out += s["name"].get<std::string>();
    std::string ps;
    for (const auto& [k, v] : s["params"].items()) {
      if (!ps.empty()) ps += ", ";
      ps += k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    if (!ps.empty()) out += "(" + ps + ")";
  }
  return out;
}

}  // namespace glassbox::traces
