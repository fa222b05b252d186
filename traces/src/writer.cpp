// JSON Lines trace writer: one header line, one line per engine step, one summary line.
#include "glassbox/traces/writer.hpp"

#include <pthread.h>

#include <charconv>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <nlohmann/detail/conversions/to_chars.hpp>

#include "glassbox/error.hpp"

namespace glassbox::traces {

using nlohmann::json;

double json_float(float f) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  double d = 0;
  std::from_chars(buf, end, d);
  return d;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {
json params_json(const Params& p) {
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
json plugin_json(const PluginRecord& r) { return {{"name", r.name}, {"params", params_json(r.params)}}; }
}  // namespace

json header_json(const RunHeader& h) {
  const Config& c = h.config;
  json plugins = json::object();
  json samplers = json::array();
  for (const auto& p : h.plugins) {
    if (p.kind == "sampler") samplers.push_back(plugin_json(p));
    else plugins[p.kind] = plugin_json(p);
  }
  plugins["sampler"] = samplers;
  json j = {{"type", "header"},
          {"schema", kSchema},
          {"model", {{"path", h.model_path},
                     {"sha256", h.model_sha256},
                     {"format", c.format},
                     {"architecture", c.architecture},
                     {"weight_types", h.weight_types},
                     {"config", {{"dim", c.dim}, {"hidden_dim", c.hidden_dim}, {"n_layers", c.n_layers},
                                 {"n_heads", c.n_heads}, {"n_kv_heads", c.n_kv_heads}, {"vocab_size", c.vocab_size},
                                 {"seq_len", c.seq_len}, {"shared_classifier", c.shared_classifier},
                                 {"format_version", c.format_version}, {"rope_theta", c.rope_theta},
                                 {"norm_eps", c.norm_eps}}}}},
          {"tokenizer", {{"path", h.tokenizer_path}}},
          {"plugins", plugins},
          {"seed", h.seed},
          {"rng", h.rng},
          {"prompt", h.prompt},
          {"prompt_ids", h.prompt_ids},
          {"max_tokens", h.max_tokens},
          {"trace_level", h.level == TraceLevel::Full ? "full" : "basic"}};
  // Where the numbers came from: the summation order (last bits of the logits) depends on the kernel set.
  if (!h.kernels.empty()) j["kernels"] = h.kernels;
  if (h.threads > 0) j["threads"] = h.threads;
  return j;
}

json step_json(const StepEvent& e, const Tokenizer& tok) {
  const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
  json top = json::array();
  for (const auto& t : e.top)
    top.push_back({{"id", t.id}, {"text", std::string(tok.decode(prev, t.id))}, {"logit", json_float(t.logit)}, {"prob", json_float(t.prob)}});
  json stages = json::array();
  for (const auto& s : e.stages) {
    json st = json::array();
    for (const auto& t : s.top) st.push_back({{"id", t.id}, {"text", std::string(tok.decode(prev, t.id))}, {"prob", json_float(t.prob)}});
    stages.push_back({{"name", s.name}, {"params", s.params ? params_json(*s.params) : json::object()},
                      {"kept", s.kept}, {"mass", json_float(s.mass)}, {"entropy", json_float(s.entropy)}, {"top", st}});
  }
  json j = {{"type", "step"},
            {"phase", e.phase},
            {"step", e.step},
            {"pos", e.pos},
            {"input_ids", std::vector<std::int32_t>(e.input_ids.begin(), e.input_ids.end())},
            {"token", {{"id", e.token}, {"text", std::string(e.token_text)}}},
            {"prob", json_float(e.prob)},
            {"logprob", json_float(e.logprob)},
            {"entropy", json_float(e.entropy)},
            {"top", top},
            {"stages", stages},
            {"draw", {{"u", e.draw_u < 0 ? json(nullptr) : json(json_float(e.draw_u))},
                      {"selected", e.sampled >= 0 ? e.sampled : e.token},
                      {"prob", json_float(e.chain_prob)}}},
            {"kv", e.kv ? kv_json(*e.kv) : json{{"tokens", 0}, {"capacity", 0}, {"bytes", 0}}},
            {"attention_dots", e.attention_dots},
            {"ms", e.ms}};
  if (!e.attention.empty()) {
    json rows = json::array();
    for (const auto& r : e.attention) {
      json w = json::array();
      for (float x : r.weights) w.push_back(json_float(x));
      rows.push_back({{"layer", r.layer}, {"head", r.head}, {"pos", r.pos}, {"first_pos", r.first_pos}, {"weights", std::move(w)}});
    }
    j["attention"] = std::move(rows);
  }
  if (e.forced) j["forced"] = true;  // replay: token is the golden's, draw.selected the chain's own pick
  if (!e.logits.empty()) {
    json l = json::array();
    for (float x : e.logits) l.push_back(json_float(x));
    j["logits"] = std::move(l);
  }
  return j;
}

json kv_json(const KvState& kv) {
  json j = {{"tokens", kv.tokens}, {"capacity", kv.capacity}, {"bytes", kv.bytes}};
  if (!kv.module.empty()) j["module"] = kv.module;
  j["params"] = params_json(kv.params);
  j["first_pos"] = kv.first_pos;
  j["evicted"] = kv.evicted;
  if (kv.block_size > 0) {
    j["block_size"] = kv.block_size;
    j["blocks_used"] = kv.blocks_used;
    j["blocks_free"] = kv.blocks_free;
    j["last_block_unused"] = kv.last_block_unused;
    j["block_table"] = kv.block_table;
  }
  return j;
}

json context_json(const PolicyEvent& e, const Tokenizer& tok) {
  std::string text;
  std::int32_t prev = -1;
  for (auto id : e.dropped_ids) {
    text += tok.decode(prev, id);
    prev = id;
  }
  return {{"type", "context"}, {"policy", e.policy}, {"step", e.step}, {"limit", e.limit},
          {"dropped", {{"from", e.dropped_from}, {"to", e.dropped_to}, {"ids", e.dropped_ids}, {"text", text}}},
          {"kept", e.kept}, {"detail", e.detail}};
}

json summary_json(const Summary& s) {
  return {{"type", "summary"}, {"generated", s.generated}, {"stop_reason", s.stop_reason},
          {"ttft_ms", s.ttft_ms}, {"prefill_tok_s", s.prefill_tok_s}, {"decode_tok_s", s.decode_tok_s},
          {"policy_firings", s.policy_firings}};
}


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
    std::size_t at;     // offset in text
    std::size_t count;  // floats written there, comma-separated
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

  // The finished line (with its newline), in `buf` (grown, never shrunk: no allocation once large enough).
  std::string_view finish(std::string& buf) const {
    const std::size_t need = text.size() + floats.size() * (kMaxFloatText + 1) + 1;
    if (buf.size() < need) buf.resize(need);
    char* p = buf.data();
    std::size_t pos = 0, fi = 0;
    for (const auto& g : gaps) {
      std::memcpy(p, text.data() + pos, g.at - pos);
      p += g.at - pos;
      pos = g.at;
      for (std::size_t i = 0; i < g.count; ++i) {
        if (i) *p++ = ',';
        p = write_json_float(p, floats[fi++]);
      }
    }
    std::memcpy(p, text.data() + pos, text.size() - pos);
    p += text.size() - pos;
    *p++ = '\n';
    return {buf.data(), static_cast<std::size_t>(p - buf.data())};
  }
};

namespace {
// Keys in the order nlohmann::json's std::map writes them (sorted), so that the text matches step_json's.
void fill_step(StepLine& L, const StepEvent& e, const Tokenizer& tok) {
  const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
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
  L.key("draw"), L.raw("{");
  L.key("prob"), L.real(e.chain_prob);
  L.key("selected"), L.integer(e.sampled >= 0 ? e.sampled : e.token);
  L.key("u");
  if (e.draw_u < 0) L.raw("null");
  else L.real(e.draw_u);
  L.raw("}");
  L.key("entropy"), L.real(e.entropy);
  if (e.forced) L.key("forced"), L.raw("true");
  L.key("input_ids"), L.raw("[");
  for (std::size_t i = 0; i < e.input_ids.size(); ++i) {
    if (i) L.raw(",");
    L.integer(e.input_ids[i]);
  }
  L.raw("]");
  L.key("kv"), L.raw("{");
  if (!e.kv) {
    L.raw("\"bytes\":0,\"capacity\":0,\"tokens\":0");
  } else {
    const KvState& kv = *e.kv;
    if (kv.block_size > 0) {
      L.key("block_size"), L.integer(kv.block_size);
      L.key("block_table"), L.raw("[");
      for (std::size_t i = 0; i < kv.block_table.size(); ++i) {
        if (i) L.raw(",");
        L.integer(kv.block_table[i]);
      }
      L.raw("]");
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
  if (!e.logits.empty()) L.key("logits"), L.reals(e.logits);
  L.key("logprob"), L.real(e.logprob);
  L.key("ms"), L.number(e.ms);
  L.key("phase"), L.string(e.phase);
  L.key("pos"), L.integer(e.pos);
  L.key("prob"), L.real(e.prob);
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
    L.key("top"), L.raw("[");
    for (std::size_t j = 0; j < st.top.size(); ++j) {
      const auto& t = st.top[j];
      L.raw(j ? ",{" : "{");
      L.key("id"), L.integer(t.id);
      L.key("prob"), L.real(t.prob);
      L.key("text"), L.string(tok.decode(prev, t.id));
      L.raw("}");
    }
    L.raw("]}");
  }
  L.raw("]");
  L.key("step"), L.integer(e.step);
  L.key("token"), L.raw("{");
  L.key("id"), L.integer(e.token);
  L.key("text"), L.string(e.token_text);
  L.raw("}");
  L.key("top"), L.raw("[");
  for (std::size_t j = 0; j < e.top.size(); ++j) {
    const auto& t = e.top[j];
    L.raw(j ? ",{" : "{");
    L.key("id"), L.integer(t.id);
    L.key("logit"), L.real(t.logit);
    L.key("prob"), L.real(t.prob);
    L.key("text"), L.string(tok.decode(prev, t.id));
    L.raw("}");
  }
  L.raw("]");
  L.key("type"), L.raw("\"step\"}");
}
}  // namespace

std::string step_line(const StepEvent& e, const Tokenizer& tok) {
  StepLine L;
  fill_step(L, e, tok);
  std::string buf;
  const std::string_view line = L.finish(buf);
  return std::string(line.substr(0, line.size() - 1));  // without the newline
}

// The writer thread and the queue of lines between it and step(). Lines are recycled, so that after the
// first few steps nothing is allocated: a line's buffers keep their capacity.
struct JsonlWriter::Pipe {
  static constexpr std::size_t kDepth = 4;  // steps that may wait for the thread (bounds the memory)
  std::mutex m;
  std::condition_variable work, done;
  std::vector<std::unique_ptr<StepLine>> lines;
  std::vector<StepLine*> free;    // ready to be filled
  StepLine* queue[kDepth] = {};   // filled, in order: queue[head], queue[head + 1], ... (mod kDepth)
  std::size_t head = 0, count = 0;
  bool busy = false;              // the thread holds a line
  bool stop = false;
  std::exception_ptr error;       // the thread's failure, thrown by the caller's next call
  std::thread thread;

  // Waits until the thread has written everything queued; throws its error.
  void drain() {
    std::unique_lock lk(m);
    done.wait(lk, [&] { return (count == 0 && !busy) || error; });
    if (error) std::rethrow_exception(error);
  }
};


JsonlWriter::JsonlWriter(const std::string& path, const Tokenizer& tok, bool keep_partial, bool background)
    : path_(path), out_(path), tok_(tok), keep_partial_(keep_partial) {
  if (!background) {
    line_ = std::make_unique<StepLine>();
    return;
  }
  pipe_ = std::make_unique<Pipe>();
  Pipe& p = *pipe_;
  for (std::size_t i = 0; i < Pipe::kDepth; ++i) {  // so the queue never holds more than kDepth
    p.lines.push_back(std::make_unique<StepLine>());
    p.free.push_back(p.lines.back().get());
  }
  // The thread is started with SIGINT and SIGTERM blocked: they are for the decode thread, which stops
  // after the current step (cli/interrupt.hpp), while this one finishes the lines already handed over.
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  p.thread = std::thread([this] {
    Pipe& p = *pipe_;
    std::string text;
    for (;;) {
      StepLine* line;
      {
        std::unique_lock lk(p.m);
        p.work.wait(lk, [&] { return p.count > 0 || p.stop; });
        if (p.count == 0) return;
        line = p.queue[p.head];
        p.head = (p.head + 1) % Pipe::kDepth;
        --p.count;
        p.busy = true;
      }
      std::exception_ptr err;
      try {
        out_.write(line->finish(text));
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard lk(p.m);
      p.busy = false;
      p.free.push_back(line);
      if (err && !p.error) {
        p.error = err;
        while (p.count > 0) {  // the file is broken: what is still queued is dropped
          p.free.push_back(p.queue[p.head]);
          p.head = (p.head + 1) % Pipe::kDepth;
          --p.count;
        }
      }
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
}

void JsonlWriter::flush() {
  if (pipe_) pipe_->drain();
}

void JsonlWriter::write(const json& j) {
  // After the queued steps; one write per line, unbuffered: every finished line is in the (temporary) file.
  flush();
  out_.write(dump(j) + '\n');
}

void JsonlWriter::header(const RunHeader& h) { write(header_json(h)); }

void JsonlWriter::step(const StepEvent& e) {
  if (!pipe_) {
    fill_step(*line_, e, tok_);
    out_.write(line_->finish(text_));
    return;
  }
  Pipe& p = *pipe_;
  StepLine* line;
  {
    std::unique_lock lk(p.m);
    p.done.wait(lk, [&] { return !p.free.empty() || p.error; });
    if (p.error) std::rethrow_exception(p.error);
    line = p.free.back();
    p.free.pop_back();
  }
  // Filled here, while the event's spans are valid: texts, integers and copies of the floats.
  try {
    fill_step(*line, e, tok_);
  } catch (...) {
    std::lock_guard lk(p.m);
    p.free.push_back(line);
    throw;
  }
  {
    std::lock_guard lk(p.m);
    p.queue[(p.head + p.count) % Pipe::kDepth] = line;
    ++p.count;
  }
  p.work.notify_one();
}

void JsonlWriter::summary(const Summary& s) {
  write(summary_json(s));
  out_.commit();
}

void JsonlWriter::policy(const PolicyEvent& e) { write(context_json(e, tok_)); }

std::string JsonlWriter::finish_cut_short() {
  flush();
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
  write({{"type", "error"}, {"message", message}});
  return finish_cut_short();
}

std::string JsonlWriter::interrupted(const std::string& signal) {
  write({{"type", "interrupted"}, {"signal", signal}, {"message", "interrupted by " + signal}});
  return finish_cut_short();
}

}  // namespace glassbox::traces
