// glassbox.trace lines (versions 1 and 2) <-> typed structs: the checks of docs/trace.schema.json, by hand, as each field converts.
#include "glassbox/traces/schema.hpp"

#include "glassbox/traces/mass.hpp"
#include "glassbox/structured_input.hpp"


#include <bit>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "glassbox/codec.hpp"
#include "glassbox/error.hpp"
#include "glassbox/traces/writer.hpp"
#include "step_text.hpp"

namespace glassbox::traces {

using nlohmann::json;

namespace {

// Field checks that name where they failed: "t.jsonl:3: step.top[2].prob: expected a number, got string".
class Check {
 public:
  explicit Check(const std::string& where) : where_(where) {}

  [[noreturn]] void fail(const std::string& msg) const { throw TraceError(where_ + ": " + msg); }

  const json& field(const json& obj, const char* key, const std::string& path) const {
    if (!obj.is_object()) fail("missing field " + join(path, key));
    auto it = obj.find(key);
    if (it == obj.end()) fail("missing field " + join(path, key));
    return *it;
  }
  const json* optional(const json& obj, const char* key) const {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
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
  std::string string(const json& v, const std::string& name) const {
    if (!v.is_string()) fail(name + ": expected a string, got " + v.type_name());
    return v.get<std::string>();
  }
  std::string string(const json& obj, const char* key, const std::string& path) const {
    return string(field(obj, key, path), join(path, key));
  }
  std::optional<std::string> opt_string(const json& obj, const char* key, const std::string& path) const {
    if (const json* v = optional(obj, key)) return string(*v, join(path, key));
    return std::nullopt;
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
  int int32(const json& obj, const char* key, const std::string& path, std::int64_t min = 0) const {
    return static_cast<int>(integer(obj, key, path, min, INT32_MAX));
  }
  std::optional<std::int64_t> opt_integer(const json& obj, const char* key, const std::string& path,
                                          std::int64_t min = 0, std::int64_t max = INT64_MAX) const {
    if (const json* v = optional(obj, key)) return integer(*v, join(path, key), min, max);
    return std::nullopt;
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
  // A token id in [0, vocab): ids index the vocabulary (int32, as the engine holds them).
  std::int32_t id(const json& v, const std::string& name, int vocab) const {
    return static_cast<std::int32_t>(integer(v, name, 0, vocab - 1));
  }
  std::vector<std::int32_t> ids(const json& a, const std::string& name, int vocab) const {
    std::vector<std::int32_t> out;
    out.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) out.push_back(id(a[i], name + "[" + std::to_string(i) + "]", vocab));
    return out;
  }
  Params param_object(const json& p, const std::string& name) const {
    if (!p.is_object()) fail(name + ": expected an object, got " + p.type_name());
    Params out;
    for (const auto& kv : p.items()) {
      const json& v = kv.value();
      const std::string n = name + "." + kv.key();
      if (v.is_boolean()) out.set(kv.key(), ParamValue(std::in_place_type<bool>, v.get<bool>()));
      else if (v.is_string()) out.set(kv.key(), ParamValue(std::in_place_type<std::string>, v.get<std::string>()));
      else if (v.is_number_integer()) out.set(kv.key(), ParamValue(std::in_place_type<std::int64_t>, integer(v, n, INT64_MIN, INT64_MAX)));
      else if (v.is_number()) out.set(kv.key(), ParamValue(std::in_place_type<double>, v.get<double>()));
      else fail(n + ": expected a number, string or bool, got " + v.type_name());
    }
    return out;
  }
  Params params(const json& obj, const std::string& path) const {
    return param_object(field(obj, "params", path), join(path, "params"));
  }
  TracePlugin plugin(const json& p, const std::string& path) const {
    if (!p.is_object()) fail(path + ": expected an object {name, params}, got " + p.type_name());
    TracePlugin out;
    out.name = string(p, "name", path);
    if (out.name.empty()) fail(path + ".name: empty");
    out.params = params(p, path);
    return out;
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

// Nesting and size are checked before parsing, by the rule every JSON input follows (structured_input.hpp).
void check_depth(const std::string& text, const std::string& w) {
  if (auto why = structured_text_problem(text, Syntax::Json)) throw TraceError(w + ": JSON " + *why);
}

// float32 bytes in little-endian order whatever the host's (memcpy where that is already the order).
void float32_le_bytes(std::span<const float> v, unsigned char* out) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(out, v.data(), v.size() * 4);
  } else {
    for (std::size_t i = 0; i < v.size(); ++i) {
      const auto u = std::bit_cast<std::uint32_t>(v[i]);
      for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<unsigned char>(u >> (8 * b));
    }
  }
}

// Times vary from run to run and nothing compares them; goldens store them zeroed, as the integer 0. A whole
// number of milliseconds is written as an integer so that such a trace reads and writes back unchanged.
json time_json(double x) {
  if (x == std::floor(x) && std::abs(x) < 1e15) return static_cast<std::int64_t>(x);
  return x;
}

}  // namespace

int schema_version(std::string_view schema) {
  for (std::size_t i = 0; i < kReadableSchemas.size(); ++i)
    if (schema == kReadableSchemas[i]) return static_cast<int>(i) + 1;
  return 0;
}

std::string readable_schemas_text() {
  std::string out;
  for (std::size_t i = 0; i < kReadableSchemas.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == kReadableSchemas.size() ? " or " : ", ") + kReadableSchemas[i];
  return out;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_trace_line(const std::string& text, const std::string& w) {
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
    for (const auto& kv : j.items()) keys += (keys.empty() ? "" : ", ") + kv.key();
    throw TraceError(w + ": not a glassbox trace (no field type; its fields: " + (keys.empty() ? "none" : keys) +
                     "); `glassbox trace import` converts other engines' logits into one");
  }
  if (!t->is_string()) throw TraceError(w + ": type: expected a string, got " + std::string(t->type_name()));
  return j;
}

std::string line_type(const json& line) { return line.at("type").get<std::string>(); }

TraceHeader parse_header(const json& j, const std::string& w) {
  Check c(w);
  TraceHeader h;
  if (!j.is_object()) c.fail("expected a JSON object, got " + std::string(j.type_name()));
  const std::string schema = c.string(j, "schema", "header");
  if (schema_version(schema) == 0)
    c.fail("unknown schema '" + schema + "' (this glassbox reads " + readable_schemas_text() + ")");
  h.written.schema = schema;
  if (c.string(j, "type", "header") != "header") c.fail("header.type: expected \"header\"");
  const json& model = c.object(j, "model", "header");
  h.model.path = c.string(model, "path", "header.model");
  h.model.sha256 = c.string(model, "sha256", "header.model");
  const std::string& sha = h.model.sha256;
  if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos)
    c.fail("header.model.sha256: expected 64 lowercase hex digits, got '" + sha + "'");
  const json& cfg = c.object(model, "config", "header.model");
  const std::string cp = "header.model.config";
  TraceModelConfig& m = h.model.config;
  m.dim = c.int32(cfg, "dim", cp, 1);
  m.hidden_dim = c.int32(cfg, "hidden_dim", cp, 1);
  m.n_layers = c.int32(cfg, "n_layers", cp, 1);
  m.n_heads = c.int32(cfg, "n_heads", cp, 1);
  m.n_kv_heads = c.int32(cfg, "n_kv_heads", cp, 1);
  m.vocab_size = c.int32(cfg, "vocab_size", cp, 1);
  m.seq_len = c.int32(cfg, "seq_len", cp, 1);
  m.shared_classifier = c.boolean(cfg, "shared_classifier", cp);
  m.format_version = c.int32(cfg, "format_version", cp, 0);
  m.rope_theta = c.number(cfg, "rope_theta", cp);
  if (m.rope_theta <= 0) c.fail("header.model.config.rope_theta: must be > 0");
  h.tokenizer_path = c.string(c.object(j, "tokenizer", "header"), "path", "header.tokenizer");
  const json& plugins = c.object(j, "plugins", "header");
  h.tokenizer = c.plugin(c.field(plugins, "tokenizer", "header.plugins"), "header.plugins.tokenizer");
  h.attention = c.plugin(c.field(plugins, "attention", "header.plugins"), "header.plugins.attention");
  const json& samplers = c.array(plugins, "sampler", "header.plugins");
  if (samplers.empty()) c.fail("header.plugins.sampler: empty chain");
  for (std::size_t i = 0; i < samplers.size(); ++i)
    h.samplers.push_back(c.plugin(samplers[i], "header.plugins.sampler[" + std::to_string(i) + "]"));
  const json& seed = c.field(j, "seed", "header");
  if (!seed.is_number_integer() || (!seed.is_number_unsigned() && seed.get<std::int64_t>() < 0))
    c.fail("header.seed: expected an unsigned integer, got " + seed.dump());
  h.seed = seed.get<std::uint64_t>();
  h.rng = c.string(j, "rng", "header");
  h.prompt = c.string(j, "prompt", "header");
  const json& ids = c.array(j, "prompt_ids", "header");
  if (ids.empty()) c.fail("header.prompt_ids: empty (the encoding starts with BOS)");
  h.prompt_ids = c.ids(ids, "header.prompt_ids", m.vocab_size);
  h.max_tokens = c.int32(j, "max_tokens", "header");
  const std::string level = c.string(j, "trace_level", "header");
  if (level != "basic" && level != "full") c.fail("header.trace_level: '" + level + "' (expected basic or full)");
  h.level = level == "full" ? TraceLevel::Full : TraceLevel::Basic;
  // Fields newer writers add (checked last: the required ones above are what a bad header most often lacks).
  h.model.format = c.opt_string(model, "format", "header.model");
  h.model.architecture = c.opt_string(model, "architecture", "header.model");
  h.model.weight_types = c.opt_string(model, "weight_types", "header.model");
  if (const json* arch = c.optional(model, "arch")) {
    if (!arch->is_object()) c.fail("header.model.arch: expected an object of strings, got " + std::string(arch->type_name()));
    std::map<std::string, std::string> pairs;
    for (const auto& [key, value] : arch->items()) {
      if (!value.is_string()) c.fail("header.model.arch." + key + ": expected a string, got " + std::string(value.type_name()));
      pairs.emplace(key, value.get<std::string>());
    }
    h.model.arch = std::move(pairs);
  }
  if (h.model.format && *h.model.format != "llama2c" && *h.model.format != "gguf")
    c.fail("header.model.format: '" + *h.model.format + "' (expected llama2c or gguf)");
  if (const json* e = c.optional(cfg, "norm_eps")) {
    m.norm_eps = c.number(*e, cp + ".norm_eps");
    if (*m.norm_eps <= 0) c.fail("header.model.config.norm_eps: must be > 0");
  }
  h.kernels = c.opt_string(j, "kernels", "header");
  if (auto t = c.opt_integer(j, "threads", "header", 1, INT32_MAX)) h.threads = static_cast<int>(*t);
  if (const json* im = c.optional(j, "imported")) {
    if (!im->is_object()) c.fail("header.imported: expected an object, got " + std::string(im->type_name()));
    TraceImport x;
    x.dialect = c.string(*im, "dialect", "header.imported");
    x.file = c.string(*im, "file", "header.imported");
    x.distribution = c.string(*im, "distribution", "header.imported");
    if (x.distribution != "raw" && x.distribution != "post" && x.distribution != "logits")
      c.fail("header.imported.distribution: '" + x.distribution + "' (expected raw, post or logits)");
    h.imported = std::move(x);
  }
  if (const json* sp = c.optional(j, "speculative")) {
    if (!sp->is_object()) c.fail("header.speculative: expected an object, got " + std::string(sp->type_name()));
    TraceSpeculativeSetup x;
    x.draft_model = c.string(*sp, "draft_model", "header.speculative");
    x.draft_tokenizer = c.opt_string(*sp, "draft_tokenizer", "header.speculative");
    x.k = static_cast<int>(c.integer(*sp, "k", "header.speculative", 1, 1024));
    h.speculative = std::move(x);
  }
  return h;
}

// One listed candidate's id and text (`p` names it in messages); the caller reads its prob and logit.
static TraceCandidate candidate_at(Check& c, const json& j, const std::string& p, int vocab) {
  if (!j.is_object()) c.fail(p + ": expected an object, got " + j.type_name());
  TraceCandidate t;
  t.id = c.id(c.field(j, "id", p), p + ".id", vocab);
  t.text = c.string(j, "text", p);
  return t;
}

// A list of candidates each with its logit, sorted by logit (a step's raw top, a lens point's top).
static std::vector<TraceCandidate> ranked_candidates(Check& c, const json& list, const std::string& path, int vocab) {
  std::vector<TraceCandidate> out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    TraceCandidate t = candidate_at(c, list[i], p, vocab);
    t.logit = c.number(list[i], "logit", p);
    t.prob = c.prob(list[i], "prob", p);
    if (i > 0 && *t.logit > *out.back().logit)
      c.fail(p + ".logit: " + list[i]["logit"].dump() + " is above the previous candidate's (top is sorted by logit)");
    out.push_back(std::move(t));
  }
  return out;
}

// step.beams / summary.beam.after[i]: one beam-search step's record. Entry lists are checked on their own
// here (ids, signs, order); the reader checks parents against the previous step.
static TraceBeams parse_beams(Check& c, const json& b, const std::string& path, int vocab) {
  if (!b.is_object()) c.fail(path + ": expected an object, got " + b.type_name());
  TraceBeams r;
  r.width = static_cast<int>(c.integer(b, "width", path, 1, vocab));
  auto list = [&](const char* key, std::vector<TraceBeamEntry>& out, bool finished) {
    const std::string lp = path + "." + key;
    const json& a = c.array(b, key, path);
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string p = lp + "[" + std::to_string(i) + "]";
      if (!a[i].is_object()) c.fail(p + ": expected an object, got " + a[i].type_name());
      TraceBeamEntry e;
      e.parent = c.int32(a[i], "parent", p);
      e.token = c.id(c.field(a[i], "token", p), p + ".token", vocab);
      e.text = c.string(a[i], "text", p);
      e.logprob = c.number(a[i], "logprob", p, -HUGE_VAL, 0.0);
      e.score = c.number(a[i], "score", p, -HUGE_VAL, 0.0);
      if (e.score > e.logprob + 1e-9)
        c.fail(p + ".score: " + std::to_string(e.score) + " above its own logprob " + std::to_string(e.logprob) +
               " (a score sums log-probabilities, each <= 0)");
      if (finished) {
        e.length = static_cast<int>(c.integer(a[i], "length", p, 1, INT32_MAX));
        e.normalized = c.number(a[i], "normalized", p);
      } else if (a[i].contains("length") || a[i].contains("normalized")) {
        c.fail(p + ": length and normalized belong to finished hypotheses only");
      }
      if (i > 0 && e.score > out.back().score)
        c.fail(p + ".score: " + std::to_string(e.score) + " above the previous entry's (" + key + " is sorted by score)");
      out.push_back(std::move(e));
    }
  };
  list("live", r.live, false);
  list("finished", r.finished, true);
  list("pruned", r.pruned, false);
  if (static_cast<int>(r.live.size()) > r.width)
    c.fail(path + ".live: " + std::to_string(r.live.size()) + " beams, more than width " + std::to_string(r.width));
  if (static_cast<int>(r.finished.size()) > r.width)
    c.fail(path + ".finished: " + std::to_string(r.finished.size()) + " hypotheses, more than width " + std::to_string(r.width));
  return r;
}

// step.speculative: the fields and their values; the rules across a round's steps are the reader's.
static TraceProposal parse_proposal(Check& c, const json& o, const std::string& p, int vocab) {
  if (!o.is_object()) c.fail(p + ": expected an object, got " + o.type_name());
  TraceProposal x;
  x.id = c.id(c.field(o, "id", p), p + ".id", vocab);
  x.text = c.string(o, "text", p);
  x.q = c.prob(o, "q", p);
  if (c.optional(o, "p")) x.p = c.prob(o, "p", p);
  if (c.optional(o, "u")) x.u = c.prob(o, "u", p);
  x.verdict = c.string(o, "verdict", p);
  if (x.verdict != "accepted" && x.verdict != "rejected" && x.verdict != "unchecked")
    c.fail(p + ".verdict: '" + x.verdict + "' (expected accepted, rejected or unchecked)");
  if ((x.verdict == "unchecked") == x.p.has_value())
    c.fail(p + ".p: " + std::string(x.p ? "present on an unchecked proposal" : "missing on a checked proposal"));
  if (x.q <= 0) c.fail(p + ".q: 0 (the draft proposed a token it gives no probability)");
  return x;
}

static TraceSpeculative parse_speculative(Check& c, const json& o, int vocab) {
  const std::string p = "step.speculative";
  if (!o.is_object()) c.fail(p + ": expected an object, got " + o.type_name());
  TraceSpeculative s;
  s.round = c.int32(o, "round", p);
  s.index = c.int32(o, "index", p);
  s.outcome = c.string(o, "outcome", p);
  if (s.outcome != "accepted" && s.outcome != "resampled" && s.outcome != "bonus")
    c.fail(p + ".outcome: '" + s.outcome + "' (expected accepted, resampled or bonus)");
  if (const json* d = c.optional(o, "draft")) s.draft = parse_proposal(c, *d, p + ".draft", vocab);
  if ((s.outcome == "bonus") == s.draft.has_value())
    c.fail(p + ".draft: " + std::string(s.draft ? "present on a bonus token (which no proposal precedes)" : "missing"));
  if (s.draft && s.draft->verdict != (s.outcome == "accepted" ? "accepted" : "rejected"))
    c.fail(p + ".draft.verdict: '" + s.draft->verdict + "' on a step whose outcome is " + s.outcome);
  if (const json* list = c.optional(o, "proposals")) {
    if (!list->is_array()) c.fail(p + ".proposals: expected an array, got " + list->type_name());
    s.proposals.emplace();
    for (std::size_t i = 0; i < list->size(); ++i)
      s.proposals->push_back(parse_proposal(c, (*list)[i], p + ".proposals[" + std::to_string(i) + "]", vocab));
    s.accepted = c.int32(o, "accepted", p);
    int n = 0;
    for (const auto& x : *s.proposals) n += x.verdict == "accepted";
    if (n != *s.accepted)
      c.fail(p + ".accepted: " + std::to_string(*s.accepted) + " but " + std::to_string(n) + " proposals say accepted");
  } else if (o.contains("accepted")) {
    c.fail(p + ".accepted: present without proposals (both belong to a round's last step)");
  }
  if (const json* r = c.optional(o, "residual")) {
    if (s.outcome != "resampled") c.fail(p + ".residual: present on a step whose outcome is " + s.outcome);
    if (!r->is_array()) c.fail(p + ".residual: expected an array, got " + r->type_name());
    s.residual.emplace();
    for (std::size_t i = 0; i < r->size(); ++i) {
      const std::string q = p + ".residual[" + std::to_string(i) + "]";
      const json& e = (*r)[i];
      if (!e.is_object()) c.fail(q + ": expected an object, got " + e.type_name());
      TraceCandidate t;
      t.id = c.id(c.field(e, "id", q), q + ".id", vocab);
      t.text = c.string(e, "text", q);
      t.prob = c.prob(e, "prob", q);
      if (i > 0 && t.prob > s.residual->back().prob) c.fail(q + ".prob: above the previous entry's (residual is sorted by prob)");
      s.residual->push_back(std::move(t));
    }
  }
  return s;
}

// step.stages[i] (at p): one sampler stage, its parameters, what it kept and its top candidates.
static TraceStage parse_stage(Check& c, const json& sj, const std::string& p, int vocab) {
  if (!sj.is_object()) c.fail(p + ": expected an object, got " + sj.type_name());
  TraceStage st;
  st.name = c.string(sj, "name", p);
  if (st.name.empty()) c.fail(p + ".name: empty");
  st.params = c.params(sj, p);
  st.kept = static_cast<int>(c.integer(sj, "kept", p, 1, vocab));
  st.mass = c.number(sj, "mass", p, 0.0, Check::kProbMax);
  st.entropy = c.number(sj, "entropy", p, 0.0);
  const json& tj = c.array(sj, "top", p);
  st.top.reserve(tj.size());
  for (std::size_t k = 0; k < tj.size(); ++k) {
    const std::string q = p + ".top[" + std::to_string(k) + "]";
    TraceCandidate t = candidate_at(c, tj[k], q, vocab);
    t.prob = c.prob(tj[k], "prob", q);
    st.top.push_back(std::move(t));
  }
  if (sj.contains("u")) st.u = c.prob(sj, "u", p);  // optional: a non-selecting stage's draw (xtc)
  return st;
}

// step.kv: the store's occupancy and module, and a paged module's blocks.
static TraceKv parse_kv(Check& c, const json& kv) {
  TraceKv out;
  out.tokens = c.integer(kv, "tokens", "step.kv");
  out.capacity = c.integer(kv, "capacity", "step.kv");
  out.bytes = c.integer(kv, "bytes", "step.kv");
  out.module = c.opt_string(kv, "module", "step.kv");
  if (const json* p = c.optional(kv, "params")) out.params = c.param_object(*p, "step.kv.params");
  out.first_pos = c.opt_integer(kv, "first_pos", "step.kv");
  out.evicted = c.opt_integer(kv, "evicted", "step.kv");
  if (kv.contains("block_size")) {  // a paged module's blocks
    TraceKv::Blocks b;
    b.block_size = c.integer(kv, "block_size", "step.kv");
    b.blocks_used = c.integer(kv, "blocks_used", "step.kv");
    b.blocks_free = c.integer(kv, "blocks_free", "step.kv");
    b.last_block_unused = c.integer(kv, "last_block_unused", "step.kv");
    const json& bt = c.array(kv, "block_table", "step.kv");
    b.block_table.reserve(bt.size());
    for (std::size_t i = 0; i < bt.size(); ++i)
      b.block_table.push_back(c.integer(bt[i], "step.kv.block_table[" + std::to_string(i) + "]", 0, INT32_MAX));
    out.blocks = std::move(b);
  }
  return out;
}

// step.attention: the recorded rows of attention weights (--trace-attention).
static std::vector<TraceAttentionRow> parse_attention(Check& c, const json& rows) {
  std::vector<TraceAttentionRow> out;
  out.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string p = "step.attention[" + std::to_string(i) + "]";
    TraceAttentionRow r;
    r.layer = c.int32(rows[i], "layer", p);
    r.head = c.int32(rows[i], "head", p);
    r.pos = c.int32(rows[i], "pos", p);
    r.first_pos = c.int32(rows[i], "first_pos", p);
    const json& wj = c.array(rows[i], "weights", p);
    r.weights.reserve(wj.size());
    for (std::size_t x = 0; x < wj.size(); ++x)
      r.weights.push_back(c.number(wj[x], p + ".weights[" + std::to_string(x) + "]", 0.0, 1.000001));
    out.push_back(std::move(r));
  }
  return out;
}

// step.lens: the logit lens's points, each with its layer, its point in the block and its top tokens.
static std::vector<TraceLens> parse_lens(Check& c, const json& points, int vocab) {
  std::vector<TraceLens> out;
  out.reserve(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string p = "step.lens[" + std::to_string(i) + "]";
    if (!points[i].is_object()) c.fail(p + ": expected an object, got " + points[i].type_name());
    TraceLens l;
    l.layer = static_cast<int>(c.integer(points[i], "layer", p, 1, INT32_MAX));
    if (const auto point = c.opt_string(points[i], "point", p)) {
      if (*point != "attn" && *point != "block") c.fail(p + ".point: '" + *point + "' (expected attn or block)");
      l.attn = *point == "attn";
    }
    l.entropy = c.number(points[i], "entropy", p, 0.0);
    l.top = ranked_candidates(c, c.array(points[i], "top", p), p + ".top", vocab);
    out.push_back(std::move(l));
  }
  return out;
}

// step.logits (a full trace's, and only its): every logit, as base64 float32s or decimal numbers, into
// s.logits, and which way they were written.
static void parse_logits(Check& c, const json& j, bool full, int vocab, TraceStep& s) {
  auto logits = j.find("logits");
  if (full) {
    if (logits == j.end()) c.fail("missing field step.logits (the header says trace_level full)");
  } else if (logits != j.end()) {
    c.fail("step.logits present but the header says trace_level basic");
  }
  if (logits != j.end() && logits->is_string()) {
    // base64 of vocab_size little-endian float32s; read as the decimal form would give them (json_float),
    // so that a trace means the same numbers whichever way it was written
    std::vector<float> f;
    const std::string& text = logits->get_ref<const std::string&>();
    if (!read_float32_base64(text, static_cast<std::size_t>(vocab), f))
      c.fail("step.logits: a string of " + std::to_string(text.size()) + " characters, expected the base64 of vocab_size = " +
             std::to_string(vocab) + " float32 values (" + std::to_string(float32_base64_size(vocab)) + " characters)");
    s.logits.reserve(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (!std::isfinite(f[i])) c.fail("step.logits[" + std::to_string(i) + "]: expected a finite number, got " + std::to_string(f[i]));
      s.logits.push_back(json_float(f[i]));
    }
    s.written.logits = LogitsEncoding::Base64;
  } else if (logits != j.end()) {
    if (!logits->is_array()) c.fail("step.logits: expected an array or a base64 string, got " + std::string(logits->type_name()));
    if (static_cast<int>(logits->size()) != vocab)
      c.fail("step.logits: " + std::to_string(logits->size()) + " values, expected vocab_size = " + std::to_string(vocab));
    s.logits.reserve(logits->size());
    for (std::size_t i = 0; i < logits->size(); ++i) {
      const json& x = (*logits)[i];
      if (!x.is_number()) c.fail("step.logits[" + std::to_string(i) + "]: expected a number, got " + x.type_name());
      s.logits.push_back(x.get<double>());
    }
  }
}

// The listed probabilities (step.top, and step.unlisted if any) are one distribution: they sum to at most 1.
static void check_listed_mass(Check& c, const TraceStep& s) {
  double mass = s.unlisted.value_or(0.0);
  for (const auto& t : s.top) mass += t.prob;
  if (mass > 1 + kProbabilityMassTolerance) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "step.top: the listed probabilities%s sum to %.6g, more than 1 (+%g): not one distribution",
                  s.unlisted ? " and step.unlisted" : "", mass, kProbabilityMassTolerance);
    c.fail(buf);
  }
}

// One step line: its fields, checked, and the rules within the line (the rules across lines are the reader's).
TraceStep parse_step(const json& j, const std::string& w, int vocab, bool full) {
  Check c(w);
  TraceStep s;
  if (!j.is_object()) c.fail("expected a JSON object, got " + std::string(j.type_name()));
  const std::string phase = c.string(j, "phase", "step");
  if (phase != "prefill" && phase != "decode") c.fail("step.phase: '" + phase + "' (expected prefill or decode)");
  s.phase = phase == "prefill" ? TracePhase::Prefill : TracePhase::Decode;
  s.step = c.int32(j, "step", "step");
  s.pos = c.int32(j, "pos", "step");
  const json& in = c.array(j, "input_ids", "step");
  if (in.empty()) c.fail("step.input_ids: empty");
  s.input_ids = c.ids(in, "step.input_ids", vocab);
  const json& tok = c.object(j, "token", "step");
  s.token = c.id(c.field(tok, "id", "step.token"), "step.token.id", vocab);
  s.token_text = c.string(tok, "text", "step.token");
  s.prob = c.prob(j, "prob", "step");
  s.logprob = c.number(j, "logprob", "step", -HUGE_VAL, 0.0);
  s.entropy = c.number(j, "entropy", "step", 0.0);
  s.top = ranked_candidates(c, c.array(j, "top", "step"), "step.top", vocab);
  const json& stages = c.array(j, "stages", "step");
  s.stages.reserve(stages.size());
  for (std::size_t i = 0; i < stages.size(); ++i)
    s.stages.push_back(parse_stage(c, stages[i], "step.stages[" + std::to_string(i) + "]", vocab));
  const json& draw = c.object(j, "draw", "step");
  const json& u = c.field(draw, "u", "step.draw");
  if (!u.is_null()) s.draw.u = c.number(u, "step.draw.u", 0.0, 1.0);
  s.draw.selected = c.id(c.field(draw, "selected", "step.draw"), "step.draw.selected", vocab);
  s.draw.prob = c.prob(draw, "prob", "step.draw");
  s.kv = parse_kv(c, c.object(j, "kv", "step"));
  s.attention_dots = c.opt_integer(j, "attention_dots", "step");
  s.batch = c.opt_integer(j, "batch", "step");
  s.prefix_reused = c.opt_integer(j, "prefix_reused", "step");
  if (j.contains("attention")) s.attention = parse_attention(c, c.array(j, "attention", "step"));
  if (j.contains("lens")) s.lens = parse_lens(c, c.array(j, "lens", "step"), vocab);
  if (const json* sp = c.optional(j, "speculative")) s.speculative = parse_speculative(c, *sp, vocab);
  s.ms = c.number(j, "ms", "step", 0.0);
  parse_logits(c, j, full, vocab, s);
  auto forced = j.find("forced");
  if (forced != j.end() && *forced != true) c.fail("step.forced: expected true (or no field), got " + forced->dump());
  s.forced = forced != j.end();
  if (j.contains("unlisted")) s.unlisted = c.prob(j, "unlisted", "step");  // a partial (imported) distribution
  check_listed_mass(c, s);
  if (const json* b = c.optional(j, "beams")) s.beams = parse_beams(c, *b, "step.beams", vocab);
  if (!s.forced && s.draw.selected != s.token)
    c.fail("step.draw.selected " + std::to_string(s.draw.selected) + " differs from step.token.id " + std::to_string(s.token) +
           " on a step that was not forced");
  return s;
}

TraceContext parse_context(const json& j, const std::string& w) {
  Check c{w};
  TraceContext x;
  x.policy = c.string(j, "policy", "context");
  if (x.policy != "truncate-left" && x.policy != "shift" && x.policy != "prune-turns")
    c.fail("context.policy: '" + x.policy + "' (expected truncate-left, shift or prune-turns)");
  x.step = c.int32(j, "step", "context");
  x.limit = c.int32(j, "limit", "context", 1);
  const json& d = c.object(j, "dropped", "context");
  x.dropped_from = c.int32(d, "from", "context.dropped");
  x.dropped_to = c.int32(d, "to", "context.dropped");
  if (x.dropped_to < x.dropped_from)
    c.fail("context.dropped: to " + std::to_string(x.dropped_to) + " before from " + std::to_string(x.dropped_from));
  const json& ids = c.array(d, "ids", "context.dropped");
  if (static_cast<std::int64_t>(ids.size()) != x.dropped_to - x.dropped_from)
    c.fail("context.dropped.ids: " + std::to_string(ids.size()) + " ids for positions " + std::to_string(x.dropped_from) +
           ".." + std::to_string(x.dropped_to));
  // The ids are not bounded by the vocabulary here: a context line may come before any step names it.
  x.dropped_ids.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i)
    x.dropped_ids.push_back(static_cast<std::int32_t>(c.integer(ids[i], "context.dropped.ids[" + std::to_string(i) + "]", 0, INT32_MAX)));
  x.dropped_text = c.opt_string(d, "text", "context.dropped");
  x.kept = c.int32(j, "kept", "context");
  x.detail = c.opt_string(j, "detail", "context");
  if (x.policy == "prune-turns") {
    x.turns = c.int32(j, "turns", "context", 1);
    if (x.step != 0) c.fail("context: a prune-turns line belongs before the prefill (step 0), not step " + std::to_string(x.step));
  }
  if (c.optional(j, "summary")) {
    const json& s = c.object(j, "summary", "context");
    // chat's summarize policy: what took the dropped messages' place (only a chat drops messages)
    if (x.policy != "prune-turns") c.fail("context.summary: only a prune-turns line has one (a chat's summarize policy), not " + x.policy);
    TraceContext::Summary r;
    r.text = c.string(s, "text", "context.summary");
    const json& sids = c.array(s, "ids", "context.summary");
    for (std::size_t i = 0; i < sids.size(); ++i)
      r.ids.push_back(static_cast<std::int32_t>(c.integer(sids[i], "context.summary.ids[" + std::to_string(i) + "]", 0, INT32_MAX)));
    if (x.dropped_from + static_cast<std::int64_t>(r.ids.size()) > x.kept)
      c.fail("context.summary: " + std::to_string(r.ids.size()) + " ids at position " + std::to_string(x.dropped_from) +
             " do not fit the " + std::to_string(x.kept) + " tokens kept");
    x.summary = std::move(r);
  }
  return x;
}

TraceSummary parse_summary(const json& j, const std::string& w) {
  Check c(w);
  TraceSummary s;
  if (!j.is_object()) c.fail("expected a JSON object, got " + std::string(j.type_name()));
  s.generated = c.int32(j, "generated", "summary");
  s.stop_reason = c.string(j, "stop_reason", "summary");
  const std::string& r = s.stop_reason;
  if (r != "stop_token" && r != "max_tokens" && r != "context_full" && r != "stop_text")
    c.fail("summary.stop_reason: '" + r + "' (expected stop_token, max_tokens, context_full or stop_text)");
  s.ttft_ms = c.number(j, "ttft_ms", "summary", 0.0);
  s.prefill_tok_s = c.number(j, "prefill_tok_s", "summary", 0.0);
  s.decode_tok_s = c.number(j, "decode_tok_s", "summary", 0.0);
  if (auto f = c.opt_integer(j, "policy_firings", "summary", 0, INT32_MAX)) s.policy_firings = static_cast<int>(*f);
  if (auto t = c.opt_integer(j, "stop_token", "summary", 0, INT32_MAX)) s.stop_token = static_cast<std::int32_t>(*t);
  s.stop_token_text = c.opt_string(j, "stop_token_text", "summary");
  if (const json* b = c.optional(j, "beam")) {
    const std::string p = "summary.beam";
    if (!b->is_object()) c.fail(p + ": expected an object, got " + b->type_name());
    TraceBeamSummary r;
    r.width = static_cast<int>(c.integer(*b, "width", p, 1, INT32_MAX));
    r.length_penalty = c.number(*b, "length_penalty", p, -10.0, 10.0);
    r.early_stopping = c.string(*b, "early_stopping", p);
    if (r.early_stopping != "heuristic") c.fail(p + ".early_stopping: '" + r.early_stopping + "' (expected heuristic)");
    r.search_steps = c.int32(*b, "search_steps", p);
    r.forwards = c.integer(*b, "forwards", p);
    r.kv_copies = c.integer(*b, "kv_copies", p);
    const json& hs = c.array(*b, "hypotheses", p);
    if (static_cast<int>(hs.size()) > r.width)
      c.fail(p + ".hypotheses: " + std::to_string(hs.size()) + ", more than width " + std::to_string(r.width));
    for (std::size_t i = 0; i < hs.size(); ++i) {
      const std::string hp = p + ".hypotheses[" + std::to_string(i) + "]";
      if (!hs[i].is_object()) c.fail(hp + ": expected an object, got " + hs[i].type_name());
      TraceBeamHypothesis h;
      const json& toks = c.array(hs[i], "tokens", hp);
      h.tokens = c.ids(toks, hp + ".tokens", INT32_MAX);
      h.text = c.string(hs[i], "text", hp);
      h.score = c.number(hs[i], "score", hp, -HUGE_VAL, 0.0);
      h.normalized = c.number(hs[i], "normalized", hp);
      h.length = c.int32(hs[i], "length", hp, 1);
      h.step = c.int32(hs[i], "step", hp);
      h.ended = c.string(hs[i], "ended", hp);
      if (h.ended != "stop_token" && h.ended != "max_tokens" && h.ended != "context_full")
        c.fail(hp + ".ended: '" + h.ended + "' (expected stop_token, max_tokens or context_full)");
      if (h.length != static_cast<int>(h.tokens.size()))
        c.fail(hp + ".length: " + std::to_string(h.length) + " but it holds " + std::to_string(h.tokens.size()) + " tokens");
      if (i > 0 && h.normalized > r.hypotheses.back().normalized)
        c.fail(hp + ".normalized: above the previous hypothesis's (hypotheses are sorted best first)");
      r.hypotheses.push_back(std::move(h));
    }
    const json& after = c.array(*b, "after", p);
    for (std::size_t i = 0; i < after.size(); ++i)
      r.after.push_back(parse_beams(c, after[i], p + ".after[" + std::to_string(i) + "]", INT32_MAX));
    if (r.hypotheses.empty() && s.generated > 0) c.fail(p + ".hypotheses: empty, but the run generated tokens");
    s.beam = std::move(r);
  }
  if (const json* sp = c.optional(j, "speculative")) {
    const std::string p = "summary.speculative";
    if (!sp->is_object()) c.fail(p + ": expected an object, got " + std::string(sp->type_name()));
    TraceSummary::Speculative x;
    x.k = static_cast<int>(c.integer(*sp, "k", p, 1, 1024));
    x.rounds = c.int32(*sp, "rounds", p);
    x.draft_forwards = c.int32(*sp, "draft_forwards", p);
    x.proposed = c.int32(*sp, "proposed", p);
    x.accepted = c.int32(*sp, "accepted", p);
    x.tokens = c.int32(*sp, "tokens", p);
    x.acceptance_rate = c.number(*sp, "acceptance_rate", p, 0.0, 1.0);
    x.tokens_per_target_forward = c.number(*sp, "tokens_per_target_forward", p, 0.0);
    if (x.accepted > x.proposed) c.fail(p + ".accepted: " + std::to_string(x.accepted) + " of " + std::to_string(x.proposed) + " proposed");
    if (x.proposed > static_cast<long long>(x.k) * x.rounds)
      c.fail(p + ".proposed: " + std::to_string(x.proposed) + " in " + std::to_string(x.rounds) + " rounds of at most k = " + std::to_string(x.k));
    if (x.tokens < x.rounds || x.tokens > x.rounds + x.accepted)
      c.fail(p + ".tokens: " + std::to_string(x.tokens) + " (expected rounds ≤ tokens ≤ rounds + accepted)");
    const double rate = x.proposed > 0 ? static_cast<double>(x.accepted) / x.proposed : 0;
    const double tpf = x.rounds > 0 ? static_cast<double>(x.tokens) / x.rounds : 0;
    if (std::abs(x.acceptance_rate - rate) > 1e-6) c.fail(p + ".acceptance_rate: " + sp->at("acceptance_rate").dump() + " but accepted/proposed is " + std::to_string(rate));
    if (std::abs(x.tokens_per_target_forward - tpf) > 1e-6)
      c.fail(p + ".tokens_per_target_forward: " + sp->at("tokens_per_target_forward").dump() + " but tokens/rounds is " + std::to_string(tpf));
    s.speculative = x;
  }
  return s;
}

TraceEnd parse_end(const json& j) {
  TraceEnd e;
  e.type = line_type(j);
  auto m = j.find("message");
  e.message = m != j.end() && m->is_string() ? m->get<std::string>() : std::string("(no message)");
  if (auto s = j.find("signal"); s != j.end() && s->is_string()) e.signal = s->get<std::string>();
  return e;
}

// ---- typed -> JSON ----

json to_json(const Params& p) {
  json o = json::object();
  for (const auto& kv : p.values()) {
    // (not a structured binding: clang 14, which builds the fuzzers, cannot capture one)
    const std::string& k = kv.first;
    std::visit([&](const auto& x) {
      using T = std::decay_t<decltype(x)>;
      o[k] = T(x);
    }, kv.second);
  }
  return o;
}

json to_json(const TracePlugin& p) { return {{"name", p.name}, {"params", to_json(p.params)}}; }

json to_json(const TraceModelConfig& c) {
  json j = {{"dim", c.dim}, {"hidden_dim", c.hidden_dim}, {"n_layers", c.n_layers}, {"n_heads", c.n_heads},
            {"n_kv_heads", c.n_kv_heads}, {"vocab_size", c.vocab_size}, {"seq_len", c.seq_len},
            {"shared_classifier", c.shared_classifier}, {"format_version", c.format_version},
            {"rope_theta", c.rope_theta}};
  if (c.norm_eps) j["norm_eps"] = *c.norm_eps;
  return j;
}

json to_json(const TraceHeader& h) {
  json model = {{"path", h.model.path}, {"sha256", h.model.sha256}, {"config", to_json(h.model.config)}};
  if (h.model.format) model["format"] = *h.model.format;
  if (h.model.architecture) model["architecture"] = *h.model.architecture;
  if (h.model.weight_types) model["weight_types"] = *h.model.weight_types;
  if (h.model.arch) {
    json arch = json::object();
    for (const auto& [key, value] : *h.model.arch) arch[key] = value;
    model["arch"] = std::move(arch);
  }
  json samplers = json::array();
  for (const auto& p : h.samplers) samplers.push_back(to_json(p));
  json j = {{"type", "header"},
            {"schema", h.written.schema},  // kSchema, unless read from an older version's file
            {"model", std::move(model)},
            {"tokenizer", {{"path", h.tokenizer_path}}},
            {"plugins", {{"tokenizer", to_json(h.tokenizer)}, {"attention", to_json(h.attention)}, {"sampler", std::move(samplers)}}},
            {"seed", h.seed},
            {"rng", h.rng},
            {"prompt", h.prompt},
            {"prompt_ids", h.prompt_ids},
            {"max_tokens", h.max_tokens},
            {"trace_level", level_name(h.level)}};
  // Where the numbers came from: the summation order (last bits of the logits) depends on the kernel set.
  if (h.kernels) j["kernels"] = *h.kernels;
  if (h.threads) j["threads"] = *h.threads;
  if (h.imported) j["imported"] = {{"dialect", h.imported->dialect}, {"file", h.imported->file}, {"distribution", h.imported->distribution}};
  if (h.speculative) {
    j["speculative"] = {{"draft_model", h.speculative->draft_model}, {"k", h.speculative->k}};
    if (h.speculative->draft_tokenizer) j["speculative"]["draft_tokenizer"] = *h.speculative->draft_tokenizer;
  }
  return j;
}

json to_json(const TraceKv& kv) {
  json j = {{"tokens", kv.tokens}, {"capacity", kv.capacity}, {"bytes", kv.bytes}};
  if (kv.module) j["module"] = *kv.module;
  if (kv.params) j["params"] = to_json(*kv.params);
  if (kv.first_pos) j["first_pos"] = *kv.first_pos;
  if (kv.evicted) j["evicted"] = *kv.evicted;
  if (kv.blocks) {
    j["block_size"] = kv.blocks->block_size;
    j["blocks_used"] = kv.blocks->blocks_used;
    j["blocks_free"] = kv.blocks->blocks_free;
    j["last_block_unused"] = kv.blocks->last_block_unused;
    j["block_table"] = kv.blocks->block_table;
  }
  return j;
}

json to_json(const TraceStep& s, bool with_logits, bool decimal_logits) {
  // The writer's own text of the step (step_text.cpp, the one serializer of a step), as a JSON value.
  StepLine L;
  write_step(L, s, {decimal_logits ? LogitsEncoding::Decimal : s.written.logits, with_logits});
  std::string buf;
  const std::string_view line = L.finish(buf);
  return json::parse(line.substr(0, line.size() - 1));
}

json to_json(const TraceContext& c) {
  json dropped = {{"from", c.dropped_from}, {"to", c.dropped_to}, {"ids", c.dropped_ids}};
  if (c.dropped_text) dropped["text"] = *c.dropped_text;
  json j = {{"type", "context"}, {"policy", c.policy}, {"step", c.step}, {"limit", c.limit},
            {"dropped", std::move(dropped)}, {"kept", c.kept}};
  if (c.detail) j["detail"] = *c.detail;
  if (c.turns) j["turns"] = *c.turns;
  if (c.summary) j["summary"] = {{"text", c.summary->text}, {"ids", c.summary->ids}};
  return j;
}

json to_json(const TraceSummary& s) {
  json j = {{"type", "summary"}, {"generated", s.generated}, {"stop_reason", s.stop_reason},
            {"ttft_ms", time_json(s.ttft_ms)}, {"prefill_tok_s", time_json(s.prefill_tok_s)},
            {"decode_tok_s", time_json(s.decode_tok_s)}};
  if (s.policy_firings) j["policy_firings"] = *s.policy_firings;
  if (s.stop_token) j["stop_token"] = *s.stop_token;
  if (s.stop_token_text) j["stop_token_text"] = *s.stop_token_text;
  if (s.beam) j["beam"] = to_json(*s.beam);
  if (s.speculative) {
    const auto& x = *s.speculative;
    j["speculative"] = {{"k", x.k}, {"rounds", x.rounds}, {"draft_forwards", x.draft_forwards}, {"proposed", x.proposed},
                        {"accepted", x.accepted}, {"tokens", x.tokens}, {"acceptance_rate", x.acceptance_rate},
                        {"tokens_per_target_forward", x.tokens_per_target_forward}};
  }
  return j;
}

json to_json(const TraceBeams& b) {
  auto list = [](const std::vector<TraceBeamEntry>& l) {
    json a = json::array();
    for (const auto& e : l) {
      json o = {{"parent", e.parent}, {"token", e.token}, {"text", e.text}, {"logprob", e.logprob}, {"score", e.score}};
      if (e.length) o["length"] = *e.length;
      if (e.normalized) o["normalized"] = *e.normalized;
      a.push_back(std::move(o));
    }
    return a;
  };
  return {{"width", b.width}, {"live", list(b.live)}, {"finished", list(b.finished)}, {"pruned", list(b.pruned)}};
}

json to_json(const TraceBeamSummary& b) {
  json hs = json::array();
  for (const auto& h : b.hypotheses)
    hs.push_back({{"tokens", h.tokens}, {"text", h.text}, {"score", h.score}, {"normalized", h.normalized},
                  {"length", h.length}, {"step", h.step}, {"ended", h.ended}});
  json after = json::array();
  for (const auto& a : b.after) after.push_back(to_json(a));
  return {{"width", b.width}, {"length_penalty", b.length_penalty}, {"early_stopping", b.early_stopping},
          {"search_steps", b.search_steps}, {"forwards", b.forwards}, {"kv_copies", b.kv_copies},
          {"hypotheses", std::move(hs)}, {"after", std::move(after)}};
}

json to_json(const TraceEnd& e) {
  json j = {{"type", e.type}, {"message", e.message}};
  if (e.signal) j["signal"] = *e.signal;
  return j;
}

// ---- text for messages ----

std::string param_text(const ParamValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return std::visit([](const auto& x) { return json(x).dump(); }, v);
}

std::string plugin_text(const TracePlugin& p) {
  std::string ps;
  for (const auto& kv : p.params.values()) ps += (ps.empty() ? "" : ", ") + kv.first + "=" + param_text(kv.second);
  return ps.empty() ? p.name : p.name + "(" + ps + ")";
}

std::string ids_text(const std::vector<std::int32_t>& ids) { return json(ids).dump(); }

const char* level_name(TraceLevel level) { return level == TraceLevel::Full ? "full" : "basic"; }
const char* phase_name(TracePhase phase) { return phase == TracePhase::Prefill ? "prefill" : "decode"; }

std::size_t float32_base64_size(std::size_t n) { return (4 * n + 2) / 3 * 4; }

char* write_float32_base64(char* out, std::span<const float> v) {
  // No line breaks, padded (glassbox/codec.hpp), in pieces of 3·4096 bytes so that the little-endian copy
  // stays on the stack and every piece but the last needs no padding.
  constexpr std::size_t kFloats = 3 * 1024;
  unsigned char bytes[4 * kFloats];
  char* p = out;
  for (std::size_t i = 0; i < v.size(); i += kFloats) {
    const std::size_t n = std::min(kFloats, v.size() - i);
    float32_le_bytes(v.subspan(i, n), bytes);
    p = base64_encode(bytes, 4 * n, p);
  }
  return p;
}

bool read_float32_base64(std::string_view text, std::size_t n, std::vector<float>& out) {
  if (text.size() != float32_base64_size(n)) return false;
  std::vector<unsigned char> bytes(text.size() / 4 * 3);
  // Strict (no blanks, '=' only at the end); the byte count says the padding is the one 4·n bytes need.
  if (base64_decode(text, bytes.data()) != static_cast<std::ptrdiff_t>(4 * n)) return false;
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u = 0;
    for (int b = 0; b < 4; ++b) u |= static_cast<std::uint32_t>(bytes[4 * i + b]) << (8 * b);
    out[i] = std::bit_cast<float>(u);
  }
  return true;
}

}  // namespace glassbox::traces
