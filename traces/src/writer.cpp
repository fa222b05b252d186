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
#include "glassbox/os.hpp"
#include "step_text.hpp"

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

namespace {
// `to` := a list of candidates as the trace records it: id, text, probability, and the logit in lists that
// carry one (the raw distribution's top, a lens point's) but not in those that do not (a stage's, the
// residual). Element by element, so that the texts keep their buffers from the step before.
void candidates_into(std::vector<TraceCandidate>& to, std::span<const TokenProb> from, bool with_logit,
                     std::int32_t prev, const Tokenizer& tok) {
  to.resize(from.size());
  for (std::size_t i = 0; i < from.size(); ++i) {
    const TokenProb& t = from[i];
    TraceCandidate& c = to[i];
    c.id = t.id;
    c.text.assign(tok.decode(prev, t.id));
    if (with_logit) c.logit = t.logit;
    else c.logit.reset();
    c.prob = t.prob;
  }
}
// An optional list from the engine's span: absent when the span is empty, else one entry per element,
// each filled by each(entry, element); the list keeps its buffer while it is present from step to step.
template <class T, class S, class Each>
void list_into(std::optional<std::vector<T>>& o, std::span<const S> from, Each&& each) {
  if (from.empty()) {
    o.reset();
    return;
  }
  if (!o) o.emplace();
  o->resize(from.size());
  for (std::size_t i = 0; i < from.size(); ++i) each((*o)[i], from[i]);
}
void params_into(Params& to, const Params& from) {
  // Parameters rarely change: compared, and copied (allocating map nodes) only when they do.
  if (to.values() != from.values()) to = from;
}
void proposal_into(TraceProposal& t, const SpecProposal& x, std::int32_t prev, const Tokenizer& tok) {
  t.id = x.id;
  t.text.assign(tok.decode(prev, x.id));
  t.q = x.q;
  if (x.p >= 0) t.p = x.p;
  else t.p.reset();
  if (x.u >= 0) t.u = x.u;
  else t.u.reset();
  t.verdict.assign(verdict_name(x.verdict));
}
void kv_into(TraceKv& r, const KvState& kv) {
  r.tokens = kv.tokens;
  r.capacity = kv.capacity;
  r.bytes = kv.bytes;
  if (kv.module.empty()) r.module.reset();
  else if (!r.module) r.module = kv.module;
  else r.module->assign(kv.module);
  if (!r.params) r.params = kv.params;
  else params_into(*r.params, kv.params);
  r.first_pos = kv.first_pos;
  r.evicted = kv.evicted;
  if (kv.block_size > 0) {
    if (!r.blocks) r.blocks = TraceKv::Blocks{};
    TraceKv::Blocks& b = *r.blocks;
    b.block_size = kv.block_size;
    b.blocks_used = kv.blocks_used;
    b.blocks_free = kv.blocks_free;
    b.last_block_unused = kv.last_block_unused;
    b.block_table.assign(kv.block_table.begin(), kv.block_table.end());
  } else {
    r.blocks.reset();
  }
}

// The one place an engine step becomes a trace step, into `r`'s buffers (allocating nothing once they
// have grown). Its reals are the engine's floats (written.float32: write_step writes each as the float's
// shortest text); step_record reads them back as a reader would.
void step_into(TraceStep& r, const StepEvent& e, const Tokenizer& tok) {
  const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
  r.written.float32 = true;
  r.phase = std::string_view(e.phase) == "prefill" ? TracePhase::Prefill : TracePhase::Decode;
  r.step = e.step;
  r.pos = e.pos;
  r.input_ids.assign(e.input_ids.begin(), e.input_ids.end());
  r.token = e.token;
  r.token_text.assign(e.token_text);
  r.prob = e.prob;
  r.logprob = e.logprob;
  r.entropy = e.entropy;
  candidates_into(r.top, e.top, true, prev, tok);
  r.stages.resize(e.stages.size());
  for (std::size_t i = 0; i < e.stages.size(); ++i) {
    const StageRecord& s = e.stages[i];
    TraceStage& st = r.stages[i];
    st.name.assign(s.name);
    if (s.params) params_into(st.params, *s.params);
    else if (!st.params.values().empty()) st.params = Params{};
    st.kept = s.kept;
    st.mass = s.mass;
    st.entropy = s.entropy;
    candidates_into(st.top, s.top, false, prev, tok);
    if (s.u >= 0) st.u = s.u;
    else st.u.reset();
  }
  if (e.draw_u >= 0) r.draw.u = e.draw_u;
  else r.draw.u.reset();
  r.draw.selected = e.sampled >= 0 ? e.sampled : e.token;
  r.draw.prob = e.chain_prob;
  if (e.kv) kv_into(r.kv, *e.kv);
  else r.kv = TraceKv{};
  r.attention_dots = e.attention_dots;
  if (e.batch > 1) r.batch = e.batch;
  else r.batch.reset();
  if (e.prefix_reused > 0) r.prefix_reused = e.prefix_reused;
  else r.prefix_reused.reset();
  list_into(r.attention, e.attention, [](TraceAttentionRow& row, const AttentionRow& a) {
    row.layer = a.layer, row.head = a.head, row.pos = a.pos, row.first_pos = a.first_pos;
    row.weights.assign(a.weights.begin(), a.weights.end());
  });
  list_into(r.lens, e.lens, [&](TraceLens& point, const LensRecord& l) {
    point.layer = l.layer, point.attn = l.attn, point.entropy = l.entropy;
    candidates_into(point.top, l.top, true, prev, tok);
  });
  if (!e.speculative) {
    r.speculative.reset();
  } else {
    const SpeculativeStep& sp = *e.speculative;
    if (!r.speculative) r.speculative.emplace();
    TraceSpeculative& t = *r.speculative;
    t.round = sp.round;
    t.index = sp.index;
    t.outcome.assign(sp.outcome);
    if (!sp.draft) t.draft.reset();
    else proposal_into(t.draft ? *t.draft : t.draft.emplace(), *sp.draft, prev, tok);
    // (the round's last step lists every proposal, possibly none, and the count accepted)
    if (sp.last) {
      if (!t.proposals) t.proposals.emplace();
      t.proposals->resize(sp.proposals.size());
      for (std::size_t i = 0; i < sp.proposals.size(); ++i) proposal_into((*t.proposals)[i], sp.proposals[i], prev, tok);
      t.accepted = sp.accepted;
    } else {
      t.proposals.reset();
      t.accepted.reset();
    }
    if (sp.residual.empty()) t.residual.reset();
    else candidates_into(t.residual ? *t.residual : t.residual.emplace(), sp.residual, false, prev, tok);
  }
  r.ms = e.ms;
  r.logits.assign(e.logits.begin(), e.logits.end());
  r.forced = e.forced;  // replay: token is the golden's, draw.selected the chain's own pick
  r.unlisted.reset();   // (imported traces only)
  if (e.beams) r.beams = beams_record(*e.beams);
  else r.beams.reset();
}
}  // namespace

TraceStep step_record(const StepEvent& e, const Tokenizer& tok) {
  // What a reader gets back from the line the writer writes: that line, read.
  return parse_step(json::parse(step_line(e, tok, LogitsEncoding::Decimal)), "step " + std::to_string(e.step),
                    tok.vocab_size(), !e.logits.empty());
}

TraceKv kv_record(const KvState& kv) {
  TraceKv r;
  kv_into(r, kv);
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


// The writer thread's copy of a step: the typed step itself (step_into), its reals the engine's floats
// (written.float32) and its token texts decoded here, on the caller's thread (a tokenizer module is only
// ever called from there), so that the writer thread can write the line after step() has returned. The
// copies reuse their buffers: after the first steps, copying allocates nothing.
struct StepCopy {
  TraceStep s;

  // About what the copy holds, in bytes (what a queue of copies is bounded by).
  std::size_t bytes() const {
    auto listed = [](const std::vector<TraceCandidate>& l) {
      std::size_t n = 0;
      for (const auto& c : l) n += sizeof(c) + c.text.size();
      return n;
    };
    std::size_t n = sizeof(*this) + s.token_text.size() + s.input_ids.size() * 4 + listed(s.top) + s.logits.size() * 8;
    if (s.kv.blocks) n += s.kv.blocks->block_table.size() * 8;
    for (const auto& r : s.stages) n += sizeof(r) + r.name.size() + listed(r.top);
    if (s.attention)
      for (const auto& a : *s.attention) n += sizeof(a) + a.weights.size() * 8;
    if (s.lens)
      for (const auto& l : *s.lens) n += sizeof(l) + listed(l.top);
    return n;
  }
};

StepCopies::StepCopies() = default;
StepCopies::~StepCopies() = default;

std::string step_line(const StepEvent& e, const Tokenizer& tok, LogitsEncoding logits) {
  TraceStep s;
  step_into(s, e, tok);
  StepLine L;
  write_step(L, s, {logits, true});
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
  if (thread == WriterThread::None || !os::kThreads) {  // (no threads: the web build, docs/web.md)
    line_ = std::make_unique<StepLine>();
    now_ = std::make_unique<StepCopy>();
    return;
  }
  pipe_ = std::make_unique<Pipe>(thread == WriterThread::Batched, out_.in_place(), reuse_);
  pipe_->spare_core = spare_core ? std::move(spare_core) : std::function<bool()>(kernels::spare_core);
  Pipe& p = *pipe_;
  // The thread is started with SIGINT and SIGTERM blocked: they are for the decode thread, which stops
  // after the current step (cli/interrupt.hpp), while this one finishes the lines already handed over.
  const os::InterruptsBlocked blocked(true);  // SIGHUP and SIGQUIT too
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
          write_step(line, p.queue[n % p.depth]->s, {logits_, true});
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
    step_into(now_->s, e, tok_);
    write_step(*line_, now_->s, {logits_, true});
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
  step_into(c->s, e, tok_);
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
