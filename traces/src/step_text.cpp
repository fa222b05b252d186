// The one serializer of a trace step (write_step: TraceStep -> its JSON line) and the float text it uses.
#include "step_text.hpp"

#include "glassbox/traces/writer.hpp"

namespace glassbox::traces {

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

void append_json_float(std::string& out, float f) {
  char buf[kMaxFloatText];
  out.append(buf, write_json_float(buf, f));
}


namespace {
// Keys in the order nlohmann::json's std::map writes them (sorted): a new field goes in its place here.
class StepWriter {
 public:
  StepWriter(StepLine& L, const TraceStep& s) : L(L), float32_(s.written.float32) {}

  // A number that came from the engine as a float (a probability, a logit, an entropy): the float's
  // shortest text for the writer's copy of an engine step, else the double as nlohmann-json prints it.
  void real(double d) {
    if (float32_) L.real(static_cast<float>(d));
    else L.number(d);
  }
  void reals(const std::vector<double>& v) {
    if (float32_) return L.reals(v);
    L.raw("[");
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) L.raw(",");
      L.number(v[i]);
    }
    L.raw("]");
  }
  // Times vary from run to run and nothing compares them; goldens store them zeroed, as the integer 0. A
  // whole number of milliseconds is written as an integer so that such a trace reads and writes back unchanged.
  void time(double x) {
    if (x == std::floor(x) && std::abs(x) < 1e15) L.integer(static_cast<std::int64_t>(x));
    else L.number(x);
  }
  // A list of candidates: id, logit (in lists that carry one: a step's raw top, a lens point's), prob, text.
  void candidates(const std::vector<TraceCandidate>& list) {
    L.raw("[");
    for (std::size_t j = 0; j < list.size(); ++j) {
      const auto& t = list[j];
      L.raw(j ? ",{" : "{");
      L.key("id"), L.integer(t.id);
      if (t.logit) L.key("logit"), real(*t.logit);
      L.key("prob"), real(t.prob);
      L.key("text"), L.string(t.text);
      L.raw("}");
    }
    L.raw("]");
  }
  void kv(const TraceKv& kv) {
    L.raw("{");
    if (kv.blocks) {
      L.key("block_size"), L.integer(kv.blocks->block_size);
      L.key("block_table"), L.integers(kv.blocks->block_table);
      L.key("blocks_free"), L.integer(kv.blocks->blocks_free);
      L.key("blocks_used"), L.integer(kv.blocks->blocks_used);
    }
    L.key("bytes"), L.integer(kv.bytes);
    L.key("capacity"), L.integer(kv.capacity);
    if (kv.evicted) L.key("evicted"), L.integer(*kv.evicted);
    if (kv.first_pos) L.key("first_pos"), L.integer(*kv.first_pos);
    if (kv.blocks) L.key("last_block_unused"), L.integer(kv.blocks->last_block_unused);
    if (kv.module) L.key("module"), L.string(*kv.module);
    if (kv.params) L.key("params"), L.params(*kv.params);
    L.key("tokens"), L.integer(kv.tokens);
    L.raw("}");
  }
  void proposal(const TraceProposal& x) {
    L.raw("{");
    L.key("id"), L.integer(x.id);
    if (x.p) L.key("p"), real(*x.p);
    L.key("q"), real(x.q);
    L.key("text"), L.string(x.text);
    if (x.u) L.key("u"), real(*x.u);
    L.key("verdict"), L.string(x.verdict);
    L.raw("}");
  }
  void speculative(const TraceSpeculative& sp) {
    L.raw("{");
    if (sp.accepted) L.key("accepted"), L.integer(*sp.accepted);
    if (sp.draft) L.key("draft"), proposal(*sp.draft);
    L.key("index"), L.integer(sp.index);
    L.key("outcome"), L.string(sp.outcome);
    if (sp.proposals) {
      L.key("proposals"), L.raw("[");
      for (std::size_t j = 0; j < sp.proposals->size(); ++j) {
        if (j) L.raw(",");
        proposal((*sp.proposals)[j]);
      }
      L.raw("]");
    }
    if (sp.residual) L.key("residual"), candidates(*sp.residual);
    L.key("round"), L.integer(sp.round);
    L.raw("}");
  }

  void step(const TraceStep& s, const StepTextOptions& opt) {
    L.clear();
    L.raw("{");
    if (s.attention) {
      L.key("attention"), L.raw("[");
      for (std::size_t i = 0; i < s.attention->size(); ++i) {
        const auto& r = (*s.attention)[i];
        L.raw(i ? ",{" : "{");
        L.key("first_pos"), L.integer(r.first_pos);
        L.key("head"), L.integer(r.head);
        L.key("layer"), L.integer(r.layer);
        L.key("pos"), L.integer(r.pos);
        L.key("weights"), reals(r.weights);
        L.raw("}");
      }
      L.raw("]");
    }
    if (s.attention_dots) L.key("attention_dots"), L.integer(*s.attention_dots);
    if (s.batch) L.key("batch"), L.integer(*s.batch);
    if (s.prefix_reused) L.key("prefix_reused"), L.integer(*s.prefix_reused);
    // Beam search's record (rare, small next to a search's forwards): nlohmann-json's own text of it.
    if (s.beams) L.key("beams"), L.raw(dump(to_json(*s.beams)));
    L.key("draw"), L.raw("{");
    L.key("prob"), real(s.draw.prob);
    L.key("selected"), L.integer(s.draw.selected);
    L.key("u");
    if (s.draw.u) real(*s.draw.u);
    else L.raw("null");
    L.raw("}");
    L.key("entropy"), real(s.entropy);
    if (s.forced) L.key("forced"), L.raw("true");  // replay: token is the golden's, draw.selected the chain's own pick
    L.key("input_ids"), L.integers(s.input_ids);
    L.key("kv"), kv(s.kv);
    if (s.lens) {
      L.key("lens"), L.raw("[");
      for (std::size_t i = 0; i < s.lens->size(); ++i) {
        const auto& l = (*s.lens)[i];
        L.raw(i ? ",{" : "{");
        L.key("entropy"), real(l.entropy);
        L.key("layer"), L.integer(l.layer);
        if (l.attn) L.key("point"), L.raw("\"attn\"");
        L.key("top"), candidates(l.top);
        L.raw("}");
      }
      L.raw("]");
    }
    if (opt.with_logits && !s.logits.empty()) {
      L.key("logits");
      if (opt.logits == LogitsEncoding::Base64) L.reals_base64(s.logits);  // (each the float it was read from)
      else reals(s.logits);
    }
    L.key("logprob"), real(s.logprob);
    L.key("ms"), time(s.ms);
    L.key("phase"), L.raw(s.phase == TracePhase::Prefill ? "\"prefill\"" : "\"decode\"");
    L.key("pos"), L.integer(s.pos);
    L.key("prob"), real(s.prob);
    if (s.speculative) L.key("speculative"), speculative(*s.speculative);
    L.key("stages"), L.raw("[");
    for (std::size_t i = 0; i < s.stages.size(); ++i) {
      const auto& st = s.stages[i];
      L.raw(i ? ",{" : "{");
      L.key("entropy"), real(st.entropy);
      L.key("kept"), L.integer(st.kept);
      L.key("mass"), real(st.mass);
      L.key("name"), L.string(st.name);
      L.key("params"), L.params(st.params);
      L.key("top"), candidates(st.top);
      if (st.u) L.key("u"), real(*st.u);
      L.raw("}");
    }
    L.raw("]");
    L.key("step"), L.integer(s.step);
    L.key("token"), L.raw("{");
    L.key("id"), L.integer(s.token);
    L.key("text"), L.string(s.token_text);
    L.raw("}");
    L.key("top"), candidates(s.top);
    L.key("type"), L.raw("\"step\"");
    if (s.unlisted) L.key("unlisted"), real(*s.unlisted);  // a partial (imported) distribution
    L.raw("}");
  }

 private:
  StepLine& L;
  const bool float32_;
};
}  // namespace

void write_step(StepLine& L, const TraceStep& s, const StepTextOptions& opt) { StepWriter(L, s).step(s, opt); }

}  // namespace glassbox::traces
