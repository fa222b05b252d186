// JSON Lines trace writer: one header line, one line per engine step, one summary line.
#include "glassbox/traces/writer.hpp"

#include <pthread.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <nlohmann/detail/conversions/to_chars.hpp>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"

namespace glassbox::traces {

using nlohmann::json;

double json_float(float f) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  double d = 0;
  std::from_chars(buf, end, d);
  return d;
}

namespace {
TracePlugin plugin_record(const PluginRecord& r) { return {r.name, r.params}; }
const char* verdict_name(SpecProposal::Verdict v) {
  return v == SpecProposal::Accepted ? "accepted" : v == SpecProposal::Rejected ? "rejected" : "unchecked";
}
std::vector<double> floats(std::span<const float> xs) {
  std::vector<double> out;
  out.reserve(xs.size());
  for (float x : xs) out.push_back(json_float(x));
  return out;
}
}  // namespace

TraceHeader header_record(const RunHeader& h) {
  const Config& c = h.config;
  TraceHeader r;
  r.model.path = h.model_path;
  r.model.sha256 = h.model_sha256;
  r.model.format = c.format;
  r.model.architecture = c.architecture;
  r.model.weight_types = h.weight_types;
  const auto arch = describe_config(c);
  r.model.arch.emplace(arch.begin(), arch.end());
  // (rope_theta and norm_eps widen as they always have: the float's exact value, not its shortest text)
  r.model.config = {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len,
                    c.shared_classifier, c.format_version, static_cast<double>(c.rope_theta),
                    static_cast<double>(c.norm_eps)};
  r.tokenizer_path = h.tokenizer_path;
  for (const auto& p : h.plugins) {
    if (p.kind == "sampler") r.samplers.push_back(plugin_record(p));
    else if (p.kind == "tokenizer") r.tokenizer = plugin_record(p);
    else if (p.kind == "attention") r.attention = plugin_record(p);
  }
  r.seed = h.seed;
  r.rng = h.rng;
  r.prompt = h.prompt;
  r.prompt_ids = h.prompt_ids;
  r.max_tokens = h.max_tokens;
  r.level = h.level;
  // Where the numbers came from: the summation order (last bits of the logits) depends on the kernel set.
  if (!h.kernels.empty()) r.kernels = h.kernels;
  if (h.threads > 0) r.threads = h.threads;
  if (h.speculative) {
    r.speculative = TraceSpeculativeSetup{h.speculative->draft_model, std::nullopt, h.speculative->k};
    if (!h.speculative->draft_tokenizer.empty()) r.speculative->draft_tokenizer = h.speculative->draft_tokenizer;
  }
  return r;
}

namespace {
// A beam search's step record (beam_search.hpp) in the trace's types.
TraceBeams beams_record(const BeamStep& b) {
  TraceBeams r;
  r.width = b.width;
  auto list = [](const std::vector<BeamEntry>& from, std::vector<TraceBeamEntry>& to, bool finished) {
    to.reserve(from.size());
    for (const auto& e : from) {
      TraceBeamEntry t{e.parent, e.token, e.text, e.logprob, e.score, std::nullopt, std::nullopt};
      if (finished) t.length = e.length, t.normalized = e.normalized;
      to.push_back(std::move(t));
    }
  };
  list(b.live, r.live, false);
  list(b.finished, r.finished, true);
  list(b.pruned, r.pruned, false);
  return r;
}
}  // namespace

TraceStep step_record(const StepEvent& e, const Tokenizer& tok) {
  const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
  TraceStep r;
  r.phase = std::string_view(e.phase) == "prefill" ? TracePhase::Prefill : TracePhase::Decode;
  r.step = e.step;
  r.pos = e.pos;
  r.input_ids.assign(e.input_ids.begin(), e.input_ids.end());
  r.token = e.token;
  r.token_text = std::string(e.token_text);
  r.prob = json_float(e.prob);
  r.logprob = json_float(e.logprob);
  r.entropy = json_float(e.entropy);
  // A candidate as a list records it: id, text, probability, and its logit in lists that carry one
  // (the raw distribution's top, a lens point's) but not in those that do not (a stage's, the residual).
  auto candidate = [&](const TokenProb& t, bool with_logit) {
    return TraceCandidate{t.id, std::string(tok.decode(prev, t.id)),
                          with_logit ? std::optional<double>(json_float(t.logit)) : std::nullopt, json_float(t.prob)};
  };
  r.top.reserve(e.top.size());
  for (const auto& t : e.top) r.top.push_back(candidate(t, true));
  r.stages.reserve(e.stages.size());
  for (const auto& s : e.stages) {
    TraceStage st{s.name, s.params ? *s.params : Params{}, s.kept, json_float(s.mass), json_float(s.entropy), {}, std::nullopt};
    if (s.u >= 0) st.u = json_float(s.u);
    st.top.reserve(s.top.size());
    for (const auto& t : s.top) st.top.push_back(candidate(t, false));
    r.stages.push_back(std::move(st));
  }
  if (e.draw_u >= 0) r.draw.u = json_float(e.draw_u);
  r.draw.selected = e.sampled >= 0 ? e.sampled : e.token;
  r.draw.prob = json_float(e.chain_prob);
  if (e.kv) r.kv = kv_record(*e.kv);
  r.attention_dots = e.attention_dots;
  if (!e.attention.empty()) {
    r.attention.emplace();
    for (const auto& a : e.attention) r.attention->push_back({a.layer, a.head, a.pos, a.first_pos, floats(a.weights)});
  }
  if (!e.lens.empty()) {
    r.lens.emplace();
    for (const auto& l : e.lens) {
      TraceLens t{l.layer, l.attn, json_float(l.entropy), {}};
      for (const auto& c : l.top) t.top.push_back(candidate(c, true));
      r.lens->push_back(std::move(t));
    }
  }
  if (e.speculative) {
    const SpeculativeStep& sp = *e.speculative;
    auto proposal = [&](const SpecProposal& x) {
      TraceProposal t{x.id, std::string(tok.decode(prev, x.id)), json_float(x.q), std::nullopt, std::nullopt, verdict_name(x.verdict)};
      if (x.p >= 0) t.p = json_float(x.p);
      if (x.u >= 0) t.u = json_float(x.u);
      return t;
    };
    TraceSpeculative t;
    t.round = sp.round;
    t.index = sp.index;
    t.outcome = sp.outcome;
    if (sp.draft) t.draft = proposal(*sp.draft);
    if (sp.last) {
      t.proposals.emplace();
      for (const auto& x : sp.proposals) t.proposals->push_back(proposal(x));
      t.accepted = sp.accepted;
    }
    if (!sp.residual.empty()) {
      t.residual.emplace();
      for (const auto& c : sp.residual) t.residual->push_back(candidate(c, false));
    }
    r.speculative = std::move(t);
  }
  r.ms = e.ms;
  r.logits = floats(e.logits);
  r.forced = e.forced;  // replay: token is the golden's, draw.selected the chain's own pick
  if (e.beams) r.beams = beams_record(*e.beams);
  return r;
}

TraceKv kv_record(const KvState& kv) {
  TraceKv r;
  r.tokens = kv.tokens;
  r.capacity = kv.capacity;
  r.bytes = kv.bytes;
  if (!kv.module.empty()) r.module = kv.module;
  r.params = kv.params;
  r.first_pos = kv.first_pos;
  r.evicted = kv.evicted;
  if (kv.block_size > 0)
    r.blocks = TraceKv::Blocks{kv.block_size, kv.blocks_used, kv.blocks_free, kv.last_block_unused,
                               std::vector<std::int64_t>(kv.block_table.begin(), kv.block_table.end())};
  return r;
}

TraceContext context_record(const PolicyEvent& e, const Tokenizer& tok) {
  std::string text;
  std::int32_t prev = -1;
  for (auto id : e.dropped_ids) {
    text += tok.decode(prev, id);
    prev = id;
  }
  TraceContext c{e.policy, e.step, e.limit, e.dropped_from, e.dropped_to, e.dropped_ids, std::move(text), e.kept, e.detail, {}, {}};
  if (e.policy == "prune-turns") c.turns = e.turns;
  if (e.summary) c.summary = TraceContext::Summary{e.summary->text, e.summary->ids};
  return c;
}

TraceSummary summary_record(const Summary& s) {
  TraceSummary t{s.generated, s.stop_reason, s.ttft_ms, s.prefill_tok_s, s.decode_tok_s, s.policy_firings, {}, {}, {}, {}};
  if (s.speculative) {
    const SpeculativeSummary& x = *s.speculative;
    t.speculative = TraceSummary::Speculative{x.k, x.rounds, x.draft_forwards, x.proposed, x.accepted, x.tokens,
                                              x.acceptance_rate(), x.tokens_per_target_forward()};
  }
  if (s.stop_token >= 0) {
    t.stop_token = s.stop_token;
    t.stop_token_text = s.stop_token_text;
  }
  if (s.beam) {
    const BeamSummary& b = *s.beam;
    TraceBeamSummary r{b.width, b.length_penalty, b.early_stopping, b.search_steps, b.forwards, b.kv_copies, {}, {}};
    for (const auto& h : b.hypotheses) r.hypotheses.push_back({h.tokens, h.text, h.score, h.normalized, h.length, h.step, h.ended});
    for (const auto& a : b.after) r.after.push_back(beams_record(a));
    t.beam = std::move(r);
  }
  return t;
}

json header_json(const RunHeader& h) { return to_json(header_record(h)); }
json step_json(const StepEvent& e, const Tokenizer& tok) { return to_json(step_record(e, tok)); }
json kv_json(const KvState& kv) { return to_json(kv_record(kv)); }
json context_json(const PolicyEvent& e, const Tokenizer& tok) { return to_json(context_record(e, tok)); }
json summary_json(const Summary& s) { return to_json(summary_record(s)); }


namespace {
// Writes the text of append_json_float at p (at most kMaxFloatText bytes); returns its end.
constexpr std::size_t kMaxFloatText = 24;
char* write_json_float(char* p, float f) {
  if (!std::isfinite(f)) {
    std::memcpy(p, "null", 4);
    return p + 4;
  }
  if (std::signbit(f)) {
    *p++ = '-';
    f = -f;
  }
  if (f == 0) {
    std::memcpy(p, "0.0", 3);
    return p + 3;
  }
  // The shortest digits d1 d2 ... dk and exponent E of f = d1.d2...dk × 10^E, then nlohmann-json's layout
  // of them (nlohmann/detail/conversions/to_chars.hpp, format_buffer with min_exp -4, max_exp 15).
  char sci[32];
  const auto r = std::to_chars(sci, sci + sizeof sci, f, std::chars_format::scientific);
  char dg[16];
  int k = 0;
  const char* q = sci;
  for (; q < r.ptr && *q != 'e'; ++q)
    if (*q != '.') dg[k++] = *q;
  int e = 0;
  bool neg = false;
  if (q < r.ptr) {
    ++q;
    if (*q == '-' || *q == '+') neg = *q++ == '-';
    for (; q < r.ptr; ++q) e = e * 10 + (*q - '0');
  }
  const int n = (neg ? -e : e) + 1;  // where the decimal point goes, counted from the first digit
  if (k < n && n <= k + (k > 1) + 4) {
    // An integer above the shortest digits' reach, short enough that plain to_chars writes it in fixed
    // notation: json_float wrote its exact value (34089789440.0, not 34089790000.0); so does this.
    const auto r2 = std::to_chars(p, p + 16, static_cast<std::uint64_t>(f));
    p = r2.ptr;
    *p++ = '.';
    *p++ = '0';
  } else if (k <= n && n <= 15) {    // digits[000].0
    std::memcpy(p, dg, k);
    p += k;
    std::memset(p, '0', n - k);
    p += n - k;
    *p++ = '.';
    *p++ = '0';
  } else if (0 < n && n <= 15) {     // dig.its
    std::memcpy(p, dg, n);
    p += n;
    *p++ = '.';
    std::memcpy(p, dg + n, k - n);
    p += k - n;
  } else if (-4 < n && n <= 0) {     // 0.[000]digits
    *p++ = '0';
    *p++ = '.';
    std::memset(p, '0', -n);
    p += -n;
    std::memcpy(p, dg, k);
    p += k;
  } else {                           // d.igitse+XX
    *p++ = dg[0];
    if (k > 1) {
      *p++ = '.';
      std::memcpy(p, dg + 1, k - 1);
      p += k - 1;
    }
    *p++ = 'e';
    int x = n - 1;
    *p++ = x < 0 ? '-' : '+';
    x = std::abs(x);
    if (x >= 100) *p++ = static_cast<char>('0' + x / 100);
    *p++ = static_cast<char>('0' + x / 10 % 10);
    *p++ = static_cast<char>('0' + x % 10);
  }
  return p;
}
}  // namespace

void append_json_float(std::string& out, float f) {
  char buf[kMaxFloatText];
  out.append(buf, write_json_float(buf, f));
}

// A step line under construction: its text with the floats left out, and the floats with where each run
// of them goes. Filling it costs copies and integer formatting only; finish() formats the floats, which
// for a full-logit trace is most of the work, on whichever thread runs it.
struct StepLine {
  struct Gap {
    std::size_t at;       // offset in text
    std::size_t count;    // floats written there, comma-separated ...
    bool base64 = false;  // ... or as one base64 string of their float32 bytes
  };
  std::string text;
  std::vector<float> floats;
  std::vector<Gap> gaps;

  void clear() {
    text.clear();
    floats.clear();
    gaps.clear();
  }
  void raw(std::string_view s) { text += s; }
  void key(std::string_view k) {  // ,"k": (no comma before the first key of an object)
    if (text.back() != '{') text += ',';
    text += '"';
    text += k;
    text += "\":";
  }
  template <class Int>
  void integer(Int v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    text.append(buf, r.ptr);
  }
  template <class Ints>
  void integers(const Ints& v) {
    text += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) text += ',';
      integer(v[i]);
    }
    text += ']';
  }
  void boolean(bool b) { text += b ? "true" : "false"; }
  void number(double d) {  // a double (times, parameters): nlohmann-json's own printer, so the same text
    if (!std::isfinite(d)) {
      text += "null";
      return;
    }
    char buf[64];
    text.append(buf, nlohmann::detail::to_chars(buf, buf + sizeof buf, d));
  }
  void real(float f) {
    gaps.push_back({text.size(), 1});
    floats.push_back(f);
  }
  void reals(std::span<const float> v) {
    text += '[';
    gaps.push_back({text.size(), v.size()});
    floats.insert(floats.end(), v.begin(), v.end());
    text += ']';
  }
  void reals_base64(std::span<const float> v) {
    gaps.push_back({text.size(), v.size(), true});
    floats.insert(floats.end(), v.begin(), v.end());
  }
  void string(std::string_view s) {
    // Printable ASCII without quote or backslash is its own JSON text; anything else (controls, UTF-8,
    // half a character) goes through nlohmann-json's escaping so the text is the same as dump()'s.
    bool plain = true;
    for (unsigned char c : s) plain = plain && c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
    if (plain) {
      text += '"';
      text += s;
      text += '"';
    } else {
      text += dump(json(std::string(s)));
    }
  }
  void params(const Params& p) {
    text += '{';
    for (const auto& kv : p.values()) {  // std::map: sorted by key, as nlohmann::json's objects
      key(kv.first);
      std::visit([&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) string(x);
        else if constexpr (std::is_same_v<T, bool>) boolean(x);
        else if constexpr (std::is_same_v<T, double>) number(x);
        else integer(x);
      }, kv.second);
    }
    text += '}';
  }

  // The finished line (with its newline), written into `buf` from offset `at` (grown, never shrunk: no
  // allocation once large enough); returns where it ends.
  // At most the finished line's length.
  std::size_t bound() const { return text.size() + floats.size() * (kMaxFloatText + 1) + 2 * gaps.size() + 1; }
  std::size_t finish(std::string& buf, std::size_t at) const {
    const std::size_t need = at + bound();
    if (buf.size() < need) buf.resize(need);
    char* const start = buf.data();
    char* p = start + at;
    std::size_t pos = 0, fi = 0;
    for (const auto& g : gaps) {
      std::memcpy(p, text.data() + pos, g.at - pos);
      p += g.at - pos;
      pos = g.at;
      if (g.base64) {  // 16/3 characters a float: within the kMaxFloatText + 1 reserved for it
        *p++ = '"';
        p = write_float32_base64(p, {floats.data() + fi, g.count});
        *p++ = '"';
        fi += g.count;
        continue;
      }
      for (std::size_t i = 0; i < g.count; ++i) {
        if (i) *p++ = ',';
        p = write_json_float(p, floats[fi++]);
      }
    }
    std::memcpy(p, text.data() + pos, text.size() - pos);
    p += text.size() - pos;
    *p++ = '\n';
    return static_cast<std::size_t>(p - start);
  }
  std::string_view finish(std::string& buf) const {
    const std::size_t end = finish(buf, 0);  // (may grow buf: its data() is read after)
    return {buf.data(), end};
  }
};

namespace {
// Calls f(prev, id) for each token a step line names with its text, in the line's order: each lens
// point's top entries, each stage's, then the raw distribution's.
template <class F>
void named_tokens(const StepEvent& e, F&& f) {
  const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
  for (const auto& l : e.lens)
    for (const auto& t : l.top) f(prev, t.id);
  if (const SpeculativeStep* sp = e.speculative) {  // keys: draft, proposals, residual
    if (sp->draft) f(prev, sp->draft->id);
    if (sp->last)
      for (const auto& x : sp->proposals) f(prev, x.id);
    for (const auto& t : sp->residual) f(prev, t.id);
  }
  for (const auto& st : e.stages)
    for (const auto& t : st.top) f(prev, t.id);
  for (const auto& t : e.top) f(prev, t.id);
}

// Keys in the order nlohmann::json's std::map writes them (sorted), so that the text matches step_json's.
// `text(prev, id)` gives the text of each token of named_tokens(e), asked for in that order.
template <class Text>
void fill_line(StepLine& L, const StepEvent& e, Text&& text, LogitsEncoding logits) {
  const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
  // A list of candidates with their logits (the raw distribution's top, a lens point's top).
  auto ranked = [&](std::span<const TokenProb> list) {
    L.raw("[");
    for (std::size_t j = 0; j < list.size(); ++j) {
      const auto& t = list[j];
      L.raw(j ? ",{" : "{");
      L.key("id"), L.integer(t.id);
      L.key("logit"), L.real(t.logit);
      L.key("prob"), L.real(t.prob);
      L.key("text"), L.string(text(prev, t.id));
      L.raw("}");
    }
    L.raw("]");
  };
  // A list of candidates with their probabilities alone (a stage's top, the speculative residual).
  auto probs = [&](std::span<const TokenProb> list) {
    L.raw("[");
    for (std::size_t j = 0; j < list.size(); ++j) {
      const auto& t = list[j];
      L.raw(j ? ",{" : "{");
      L.key("id"), L.integer(t.id);
      L.key("prob"), L.real(t.prob);
      L.key("text"), L.string(text(prev, t.id));
      L.raw("}");
    }
    L.raw("]");
  };
  L.clear();
  L.raw("{");
  if (!e.attention.empty()) {
    L.key("attention");
    L.raw("[");
    for (std::size_t i = 0; i < e.attention.size(); ++i) {
      const auto& r = e.attention[i];
      L.raw(i ? ",{" : "{");
      L.key("first_pos"), L.integer(r.first_pos);
      L.key("head"), L.integer(r.head);
      L.key("layer"), L.integer(r.layer);
      L.key("pos"), L.integer(r.pos);
      L.key("weights"), L.reals(r.weights);
      L.raw("}");
    }
    L.raw("]");
  }
  L.key("attention_dots"), L.integer(e.attention_dots);
  // Beam search's record (rare, small next to a search's forwards): through the typed path, as step_json writes it.
  if (e.beams) L.key("beams"), L.raw(dump(to_json(beams_record(*e.beams))));
  L.key("draw"), L.raw("{");
  L.key("prob"), L.real(e.chain_prob);
  L.key("selected"), L.integer(e.sampled >= 0 ? e.sampled : e.token);
  L.key("u");
  if (e.draw_u < 0) L.raw("null");
  else L.real(e.draw_u);
  L.raw("}");
  L.key("entropy"), L.real(e.entropy);
  if (e.forced) L.key("forced"), L.raw("true");
  L.key("input_ids"), L.integers(e.input_ids);
  L.key("kv"), L.raw("{");
  if (!e.kv) {
    L.raw("\"bytes\":0,\"capacity\":0,\"tokens\":0");
  } else {
    const KvState& kv = *e.kv;
    if (kv.block_size > 0) {
      L.key("block_size"), L.integer(kv.block_size);
      L.key("block_table"), L.integers(kv.block_table);
      L.key("blocks_free"), L.integer(kv.blocks_free);
      L.key("blocks_used"), L.integer(kv.blocks_used);
    }
    L.key("bytes"), L.integer(kv.bytes);
    L.key("capacity"), L.integer(kv.capacity);
    L.key("evicted"), L.integer(kv.evicted);
    L.key("first_pos"), L.integer(kv.first_pos);
    if (kv.block_size > 0) L.key("last_block_unused"), L.integer(kv.last_block_unused);
    if (!kv.module.empty()) L.key("module"), L.string(kv.module);
    L.key("params"), L.params(kv.params);
    L.key("tokens"), L.integer(kv.tokens);
  }
  L.raw("}");
  if (!e.lens.empty()) {
    L.key("lens"), L.raw("[");
    for (std::size_t i = 0; i < e.lens.size(); ++i) {
      const auto& l = e.lens[i];
      L.raw(i ? ",{" : "{");
      L.key("entropy"), L.real(l.entropy);
      L.key("layer"), L.integer(l.layer);
      if (l.attn) L.key("point"), L.raw("\"attn\"");
      L.key("top"), ranked(l.top);
      L.raw("}");
    }
    L.raw("]");
  }
  if (!e.logits.empty()) {
    L.key("logits");
    if (logits == LogitsEncoding::Base64) L.reals_base64(e.logits);
    else L.reals(e.logits);
  }
  L.key("logprob"), L.real(e.logprob);
  L.key("ms"), L.number(e.ms);
  L.key("phase"), L.string(e.phase);
  L.key("pos"), L.integer(e.pos);
  L.key("prob"), L.real(e.prob);
  if (const SpeculativeStep* sp = e.speculative) {
    auto proposal = [&](const SpecProposal& x) {
      L.raw("{");
      L.key("id"), L.integer(x.id);
      if (x.p >= 0) L.key("p"), L.real(x.p);
      L.key("q"), L.real(x.q);
      L.key("text"), L.string(text(prev, x.id));
      if (x.u >= 0) L.key("u"), L.real(x.u);
      L.key("verdict"), L.string(verdict_name(x.verdict));
      L.raw("}");
    };
    L.key("speculative"), L.raw("{");
    if (sp->last) L.key("accepted"), L.integer(sp->accepted);
    if (sp->draft) L.key("draft"), proposal(*sp->draft);
    L.key("index"), L.integer(sp->index);
    L.key("outcome"), L.string(sp->outcome);
    if (sp->last) {
      L.key("proposals"), L.raw("[");
      for (std::size_t j = 0; j < sp->proposals.size(); ++j) {
        if (j) L.raw(",");
        proposal(sp->proposals[j]);
      }
      L.raw("]");
    }
    if (!sp->residual.empty()) L.key("residual"), probs(sp->residual);
    L.key("round"), L.integer(sp->round);
    L.raw("}");
  }
  L.key("stages"), L.raw("[");
  for (std::size_t i = 0; i < e.stages.size(); ++i) {
    const auto& st = e.stages[i];
    L.raw(i ? ",{" : "{");
    L.key("entropy"), L.real(st.entropy);
    L.key("kept"), L.integer(st.kept);
    L.key("mass"), L.real(st.mass);
    L.key("name"), L.string(st.name);
    L.key("params");
    if (st.params) L.params(*st.params);
    else L.raw("{}");
    L.key("top"), probs(st.top);
    if (st.u >= 0) L.key("u"), L.real(st.u);  // keys in order: "u" after "top"
    L.raw("}");
  }
  L.raw("]");
  L.key("step"), L.integer(e.step);
  L.key("token"), L.raw("{");
  L.key("id"), L.integer(e.token);
  L.key("text"), L.string(e.token_text);
  L.raw("}");
  L.key("top"), ranked(e.top);
  L.key("type"), L.raw("\"step\"}");
}

void fill_step(StepLine& L, const StepEvent& e, const Tokenizer& tok, LogitsEncoding logits) {
  fill_line(L, e, [&](std::int32_t prev, std::int32_t id) { return tok.decode(prev, id); }, logits);
}

template <class T>
void assign(std::vector<T>& to, std::span<const T> from) {
  to.assign(from.begin(), from.end());
}

}  // namespace

// A step event copied with all it refers to, the texts of the tokens it names included (decoded here,
// on the caller's thread: a tokenizer module is only ever called from there), so that the writer
// thread can build the line after step() has returned. The copies reuse their buffers: after the first
// steps, copying allocates nothing.
struct StepCopy {
  StepEvent e;  // its spans and pointers lead into the members below
  std::string phase, token_text;
  std::vector<std::int32_t> input_ids;
  std::vector<TokenProb> top;
  std::vector<float> logits;
  std::vector<StageRecord> stages;
  std::vector<Params> stage_params;  // (stages) what each record's params point to
  KvState kv;
  std::vector<AttentionRow> attention;
  std::vector<LensRecord> lens;
  BeamStep beams;                    // beam search's record, when the step has one
  SpeculativeStep spec;              // what e.speculative points to, with its lists
  SpecProposal spec_draft;
  std::vector<SpecProposal> spec_proposals;
  std::vector<TokenProb> spec_residual;
  std::string texts;                 // the texts of named_tokens(e), one after another ...
  std::vector<std::size_t> text_end; // ... each ending here

  void copy(const StepEvent& from, const Tokenizer& tok) {
    e = from;
    phase = from.phase;
    e.phase = phase.c_str();
    token_text = from.token_text;
    e.token_text = token_text;
    assign(input_ids, from.input_ids);
    e.input_ids = input_ids;
    assign(top, from.top);
    e.top = top;
    assign(logits, from.logits);
    e.logits = logits;
    // (Copy-assigning a vector of records copies over the existing ones: their names and top entries
    // keep their capacity.)
    stages.assign(from.stages.begin(), from.stages.end());
    stage_params.resize(stages.size());
    for (std::size_t i = 0; i < stages.size(); ++i) {
      StageRecord& c = stages[i];
      if (!c.params) continue;
      // A stage's parameters rarely change: compared, and copied (allocating map nodes) only when they do.
      if (stage_params[i].values() != c.params->values()) stage_params[i] = *c.params;
      c.params = &stage_params[i];
    }
    e.stages = stages;
    if (from.kv) {
      // Field by field, so that the module's parameters are copied only when they change (a new field
      // of KvState goes here too; the same-file test compares with the line built from the event).
      const KvState& k = *from.kv;
      kv.module = k.module;
      if (kv.params.values() != k.params.values()) kv.params = k.params;
      kv.tokens = k.tokens;
      kv.capacity = k.capacity;
      kv.bytes = k.bytes;
      kv.first_pos = k.first_pos;
      kv.evicted = k.evicted;
      kv.block_size = k.block_size;
      kv.blocks_used = k.blocks_used;
      kv.blocks_free = k.blocks_free;
      kv.last_block_unused = k.last_block_unused;
      assign(kv.block_table, std::span<const int>(k.block_table));
      e.kv = &kv;
    }
    attention.assign(from.attention.begin(), from.attention.end());
    e.attention = attention;
    lens.assign(from.lens.begin(), from.lens.end());
    e.lens = lens;
    if (from.beams) {
      beams = *from.beams;
      e.beams = &beams;
    }
    if (from.speculative) {
      spec = *from.speculative;
      if (spec.draft) spec_draft = *spec.draft, spec.draft = &spec_draft;
      assign(spec_proposals, spec.proposals);
      spec.proposals = spec_proposals;
      assign(spec_residual, spec.residual);
      spec.residual = spec_residual;
      e.speculative = &spec;
    }
    texts.clear();
    text_end.clear();
    named_tokens(from, [&](std::int32_t prev, std::int32_t id) {
      texts += tok.decode(prev, id);
      text_end.push_back(texts.size());
    });
  }

  // About what the copy holds, in bytes (what a queue of copies is bounded by).
  std::size_t bytes() const {
    std::size_t n = sizeof(*this) + texts.size() + text_end.size() * sizeof(std::size_t) + input_ids.size() * 4 +
                    top.size() * sizeof(TokenProb) + logits.size() * 4 + kv.block_table.size() * sizeof(int);
    for (const auto& r : stages) n += sizeof(r) + r.name.size() + r.top.size() * sizeof(TokenProb);
    for (const auto& a : attention) n += sizeof(a) + a.weights.size() * 4;
    for (const auto& l : lens) n += sizeof(l) + l.top.size() * sizeof(TokenProb);
    return n;
  }

  // Fills `L` from the copy (on the writer thread).
  void fill(StepLine& L, LogitsEncoding logits) const {
    std::size_t k = 0;
    fill_line(L, e, [&](std::int32_t, std::int32_t) {
      const std::size_t begin = k ? text_end[k - 1] : 0;
      return std::string_view(texts).substr(begin, text_end[k++] - begin);
    }, logits);
  }
};

StepCopies::StepCopies() = default;
StepCopies::~StepCopies() = default;

std::string step_line(const StepEvent& e, const Tokenizer& tok, LogitsEncoding logits) {
  StepLine L;
  fill_step(L, e, tok, logits);
  std::string buf;
  const std::string_view line = L.finish(buf);
  return std::string(line.substr(0, line.size() - 1));  // without the newline
}

// The writer thread and the queue of step copies between it and step(): step n is copied into a free
// copy, the one the thread freed last (the warmest in the caches), and queued at queue[n % depth]. Only
// as many copies as are ever queued at once are used, so their buffers are all that grows; once they
// have grown, nothing is allocated (a copy's buffers keep their capacity).
struct JsonlWriter::Pipe {
  // When the thread builds and writes what step() handed over:
  //  - EveryLine (full traces, attention weights): step() wakes it for every line (a full line takes
  //    far longer to build than the wake-up).
  //  - Batched: the thread wakes itself while steps come and writes what waits; step() wakes it when
  //    it sleeps (idle) or half the ring waits (a futex call on the decode thread, ~40 µs on a virtual
  //    machine). It polls every 2 ms while a core is spare (kernels::spare_core: fewer compute threads
  //    than cores, or the pool's workers asleep, as for stories260K, whose products stay on one
  //    thread), every 16 ms while none is. Into a device or FIFO (someone may read it live) a poll
  //    writes what waits; into a regular file (a temporary file, renamed into place at the summary:
  //    nobody reads its lines before the end) only while a core is spare: else the lines wait for
  //    half the ring or a flush. A basic line is cheap once the thread runs (~10 µs, warm), but a
  //    wake-up that writes takes a core from a matrix product, whose other thread then waits at the
  //    product's end, and starts cold, since every decode step streams the weights through the
  //    caches (~35 µs a line). Synthetic stories15M at 2 threads: its forward pass took ~5-10% longer
  //    with the lines written every 2 ms than untraced, as long with none written during the run
  //    (docs/performance.md, "Round ten").
  static constexpr std::size_t kDepth = 1024;       // Batched into a file: at most this many copies ...
  static constexpr std::size_t kQueueBytes = 8 << 20;  // ... and about this much held in them
  static constexpr std::size_t kLiveDepth = 64;
  static constexpr std::chrono::milliseconds kPollSpare{2}, kPollBusy{16};
  // After this long with nothing handed over (a chat waiting for its user) a polling thread sleeps
  // until step() wakes it; EveryLine's thread also writes a line that waited this long.
  static constexpr std::chrono::milliseconds kLatency{20};
  // The thread gathers lines into one write() up to this much text (a longer line is written alone).
  static constexpr std::size_t kWriteBytes = 1 << 16;

  Pipe(bool batched, bool live, StepCopies* reuse)
      : depth(!batched ? 4 : live ? kLiveDepth : kDepth), batch(batched ? depth / 2 : 1),
        batched(batched), lazy(batched && !live) {
    if (reuse) copies = std::move(reuse->copies_);  // the last used first: taken first below
    while (copies.size() < depth) copies.push_back(std::make_unique<StepCopy>());
    queue.resize(depth);
    for (auto it = copies.rbegin(); it != copies.rend(); ++it) free.push_back(it->get());
  }
  // Steps handed over and not yet written, at most (bounds the memory). Set again after the first
  // step from its size, so that a ring of large copies (a long --trace-top) stays near kQueueBytes.
  std::size_t depth;
  std::size_t batch;                     // step() wakes the thread when this many steps wait
  const bool batched;                    // the thread polls (else step() wakes it for each line)
  const bool lazy;                       // a poll writes only while a core is spare ...
  std::function<bool()> spare_core;      // ... by this
  std::vector<std::unique_ptr<StepCopy>> copies;
  std::vector<StepCopy*> queue;  // (depth) queue[n % depth] holds step n, for n in [written, filled)
  std::vector<StepCopy*> free;   // copies not queued, the last freed at the back
  std::mutex m;
  std::condition_variable work, done;
  // Counts of steps since the start: written <= taken <= filled. Steps [taken, filled) wait for the
  // thread, [written, taken) are being written by it.
  std::uint64_t filled = 0, taken = 0, written = 0;
  bool draining = false;          // a caller waits for every queued line: write them now
  bool idle = false;              // the thread sleeps without a timeout: the next step() wakes it
  bool stop = false;
  std::exception_ptr error;       // the thread's failure, thrown by the caller's next call
  std::thread thread;

  // After the first step's copy (under the lock, before the thread may read a copy): as many copies
  // as hold about kQueueBytes of steps like it, at least 8. Copies past the new depth were never used.
  void size_from(const StepCopy& first) {
    if (!lazy) return;
    depth = std::clamp<std::size_t>(kQueueBytes / std::max<std::size_t>(first.bytes(), 1), 8, depth);
    batch = depth / 2;
  }

  // Gives every copy back to `to`, the last freed first (the warmest, taken first by the next writer).
  // After the thread has stopped.
  void give_back(StepCopies& to) {
    std::unordered_map<const StepCopy*, std::size_t> rank;  // 0: the last freed
    for (std::size_t i = 0; i < free.size(); ++i) rank[free[free.size() - 1 - i]] = i;
    auto rank_of = [&](const std::unique_ptr<StepCopy>& c) {
      const auto it = rank.find(c.get());
      return it == rank.end() ? rank.size() : it->second;  // (still queued: the run was cut short)
    };
    std::stable_sort(copies.begin(), copies.end(), [&](const auto& a, const auto& b) { return rank_of(a) < rank_of(b); });
    to.copies_ = std::move(copies);
  }

  // Waits until the thread has written every line handed over; throws its error.
  void drain() {
    std::unique_lock lk(m);
    draining = true;
    work.notify_one();
    done.wait(lk, [&] { return written == filled || error; });
    draining = false;
    if (error) std::rethrow_exception(error);
  }
};


JsonlWriter::JsonlWriter(const std::string& path, const Tokenizer& tok, bool keep_partial, WriterThread thread,
                         LogitsEncoding logits, std::function<bool()> spare_core, OutputFile::Live live,
                         StepCopies* reuse)
    : path_(path), out_(path, live), tok_(tok), keep_partial_(keep_partial), logits_(logits), reuse_(reuse) {
  if (thread == WriterThread::None) {
    line_ = std::make_unique<StepLine>();
    return;
  }
  pipe_ = std::make_unique<Pipe>(thread == WriterThread::Batched, out_.in_place(), reuse_);
  pipe_->spare_core = spare_core ? std::move(spare_core) : std::function<bool()>(kernels::spare_core);
  Pipe& p = *pipe_;
  // The thread is started with SIGINT and SIGTERM blocked: they are for the decode thread, which stops
  // after the current step (cli/interrupt.hpp), while this one finishes the lines already handed over.
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  p.thread = std::thread([this] {
    Pipe& p = *pipe_;
    StepLine line;                              // built from each copy in turn
    std::string text(Pipe::kWriteBytes, '\0');  // the taken steps' lines
    std::chrono::milliseconds quiet(0);         // polled with nothing handed over, since the last lines
    // The poll period (Batched: by whether a core is spare, from the last poll).
    std::chrono::milliseconds poll = p.batched ? Pipe::kPollSpare : Pipe::kLatency;
    for (;;) {
      std::uint64_t from, to;
      {
        std::unique_lock lk(p.m);
        // Woken by step() (half the ring waits), a drain or the end, or by its own poll: what was handed
        // over in the last period is written then. After kLatency with nothing handed over, the thread
        // sleeps until step() wakes it.
        while (!(p.filled - p.taken >= p.batch || (p.filled > p.taken && (p.draining || p.stop)))) {
          if (p.stop) return;
          if (p.idle) {
            p.work.wait(lk);
          } else if (p.work.wait_for(lk, poll) == std::cv_status::timeout) {
            const bool spare = p.batched && p.spare_core();
            const auto waited = poll;
            if (p.batched) poll = spare ? Pipe::kPollSpare : Pipe::kPollBusy;
            if (p.filled > p.taken) {
              if (!p.lazy || spare) break;
              continue;
            }
            if ((quiet += waited) >= Pipe::kLatency) p.idle = true;
          }
        }
        quiet = std::chrono::milliseconds(0);
        from = p.taken;
        to = p.taken = p.filled;
      }
      std::exception_ptr err;
      try {
        write_pending_header();
        std::size_t end = 0;
        for (std::uint64_t n = from; n < to; ++n) {
          p.queue[n % p.depth]->fill(line, logits_);
          if (end > 0 && end + line.bound() > text.size()) {
            out_.write({text.data(), end});
            end = 0;
          }
          end = line.finish(text, end);
        }
        out_.write({text.data(), end});
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard lk(p.m);
      if (err && !p.error) {
        p.error = err;
        to = p.taken = p.filled;  // the file is broken: what is still queued is dropped
      }
      for (std::uint64_t n = p.written; n < to; ++n) p.free.push_back(p.queue[n % p.depth]);
      p.written = to;
      p.done.notify_all();
    }
  });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

JsonlWriter::~JsonlWriter() {
  if (!pipe_) return;
  {
    std::lock_guard lk(pipe_->m);
    pipe_->stop = true;
  }
  pipe_->work.notify_all();
  pipe_->thread.join();
  if (reuse_) pipe_->give_back(*reuse_);
}

void JsonlWriter::flush() {
  if (pipe_) pipe_->drain();
}

void JsonlWriter::write(const json& j) {
  // After the queued steps; one write per line, unbuffered: every finished line is in the (temporary) file.
  flush();
  write_pending_header();
  out_.write(dump(j) + '\n');
}

void JsonlWriter::header(const RunHeader& h) {
  if (h.model_sha256.empty() && h.model_sha256_pending) {
    pending_header_ = std::make_unique<TraceHeader>(header_record(h));
    pending_digest_ = h.model_sha256_pending;
    return;
  }
  write(header_json(h));
}

void JsonlWriter::write_pending_header() {
  // Called by the writer thread before a step line, or by the caller's thread once that one is idle
  // (after flush()), so never by both at once.
  if (!pending_header_) return;
  pending_header_->model.sha256 = pending_digest_();
  out_.write(dump(to_json(*pending_header_)) + '\n');
  pending_header_.reset();
  pending_digest_ = nullptr;
}

void JsonlWriter::step(const StepEvent& e) {
  if (!pipe_) {
    fill_step(*line_, e, tok_, logits_);
    write_pending_header();
    out_.write(line_->finish(text_));
    return;
  }
  Pipe& p = *pipe_;
  std::uint64_t n;
  StepCopy* c;
  {
    std::unique_lock lk(p.m);
    if (p.filled - p.written == p.depth) {  // the thread is behind: every line waits or is being written
      p.draining = true;
      p.work.notify_one();
      p.done.wait(lk, [&] { return p.filled - p.written < p.depth || p.error; });
      p.draining = false;
    }
    if (p.error) std::rethrow_exception(p.error);
    n = p.filled;
    c = p.free.back();  // (at most depth - 1 are queued: one is free)
    p.free.pop_back();
  }
  // Copied here, while the event's spans are valid. (The thread reads only steps before `filled`.)
  c->copy(e, tok_);
  bool wake;
  {
    std::lock_guard lk(p.m);
    p.queue[n % p.depth] = c;
    if (n == 0) p.size_from(*c);
    wake = ++p.filled - p.taken == p.batch || p.idle;
    p.idle = false;
  }
  if (wake) p.work.notify_one();
}

void JsonlWriter::summary(const Summary& s) {
  write(summary_json(s));
  out_.commit();
}

void JsonlWriter::policy(const PolicyEvent& e) { write(context_json(e, tok_)); }

std::string JsonlWriter::finish_cut_short() {
  flush();
  if (out_.open()) write_pending_header();
  if (!out_.open()) return path_;
  if (!out_.in_place() && !keep_partial_ && regular_file_exists(path_)) {
    const std::string partial = path_ + ".partial";
    out_.commit_as(partial);
    return partial;
  }
  out_.commit();
  return path_;
}

std::string JsonlWriter::error(const std::string& message) {
  write(to_json(TraceEnd{"error", message, std::nullopt}));
  return finish_cut_short();
}

std::string JsonlWriter::interrupted(const std::string& signal) {
  write(to_json(TraceEnd{"interrupted", "interrupted by " + signal, signal}));
  return finish_cut_short();
}

}  // namespace glassbox::traces
