// Beam search over the model's log-probabilities (Hugging Face's algorithm: 2·width candidates ranked per
// step, end-of-generation candidates among the best width finish a hypothesis, score / length^A), with one
// K/V store per beam whose rows are copied when a beam is re-selected. docs/beam-search.md.
#include "glassbox/beam_search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>
#include <optional>

#include "glassbox/error.hpp"
#include "glassbox/run_spec.hpp"
#include "glassbox/strategy.hpp"

namespace glassbox {

namespace {
// One store's K/V rows into another: every layer's spans read through view() and written in order, so any
// module that keeps contiguous positions from 0 (kv-cache, paged) can be copied without knowing its layout.
void copy_kv(KvStore& from, KvStore& to, int n_layers, std::vector<KvSpan>& spans) {
  to.clear();
  for (int l = 0; l < n_layers; ++l) {
    spans.clear();
    from.view(l, spans);
    int next = 0;
    for (const KvSpan& s : spans) {
      if (s.first != next)
        throw ConfigError("attention '" + from.name() + "': its positions do not start at 0 or have gaps: beam search cannot copy them");
      to.write(l, s.first, s.count, s.k, s.v);
      next = s.first + s.count;
    }
  }
}

// The distribution a beam saw at one step (what the winner's step line reports).
struct Dist {
  float entropy = 0;
  std::vector<TokenProb> top;
  KvState kv;
};

struct RankedCandidate {
  int beam;
  std::int32_t token;
  double logprob, score;
};
}  // namespace

void check_beam_options(const BeamOptions& b, int vocab_size) {
  if (b.width < 1 || b.width > vocab_size)
    throw ConfigError("beam width " + std::to_string(b.width) + " (expected 1.." + std::to_string(vocab_size) +
                      ": at most the model's vocabulary of " + std::to_string(vocab_size) + " tokens)");
  if (!std::isfinite(b.length_penalty) || b.length_penalty < -10 || b.length_penalty > 10)
    throw ConfigError("length penalty " + std::to_string(b.length_penalty) + " (expected a number in -10..10)");
}

void check_beam_memory(const Config& cfg, int positions, int width, const std::string& model_file) {
  using U = std::uint64_t;
  std::error_code ec;
  const U file = std::filesystem::file_size(model_file, ec);
  const U bound = (ec ? 0 : file) * kRunMemoryFileMultiple + kRunMemoryAllowance;
  // K and V, every layer: (n_layers, positions, kv_dim) twice, in floats.
  const U per_beam = 2 * static_cast<U>(cfg.n_layers) * static_cast<U>(std::max(positions, 1)) * static_cast<U>(cfg.kv_dim()) * sizeof(float);
  const U own = run_memory_bytes(cfg, 1);
  const U need = own + static_cast<U>(std::max(width - 1, 0)) * per_beam;
  if (need <= bound) return;
  const U widest = own >= bound ? 1 : 1 + (bound - own) / std::max<U>(per_beam, 1);
  throw ConfigError("--beam-width " + std::to_string(width) + ": " + std::to_string(width) + " beams' K/V rows of " +
                    std::to_string(positions) + " positions need " + std::to_string(need >> 20) + " MiB, beyond the run memory bound of " +
                    std::to_string(bound >> 20) + " MiB for " + model_file + " (docs/reliability.md); at most --beam-width " +
                    std::to_string(widest) + " fits (or generate fewer tokens with -n)");
}

void check_beam_attention(const KvStore& kv, const std::string& module) {
  if (kv.evicts())
    throw ConfigError("beam search copies each beam's K/V rows, but attention '" + module +
                      "' evicts old positions: use kv-cache, paged or recompute with --beam-width");
}

BeamSearch::BeamSearch(Transformer& model, const Tokenizer& tok, std::vector<KvStore*> stores)
    : model_(model), tok_(tok), stores_(std::move(stores)) {
  if (stores_.empty()) throw ConfigError("beam search needs at least one K/V store");
  for (auto* s : stores_) check_beam_attention(*s, s->name());
}

int BeamSearch::context_limit() const {
  const int ctx = model_.config().seq_len;
  return std::min(ctx, stores_[0]->capacity());
}

Summary BeamSearch::generate(std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& opt,
                             const BeamOptions& bo, RunHeader header, TraceSink& sink, const StreamFn& on_piece) {
  check_beam_options(bo, model_.config().vocab_size);
  if (stores_[0]->persistent() && static_cast<int>(stores_.size()) < bo.width)
    throw ConfigError("beam search of width " + std::to_string(bo.width) + " was given " + std::to_string(stores_.size()) +
                      " K/V stores (one per beam needed)");
  BeamStrategy strategy(stores_, bo);
  return run_strategy({model_, tok_, *stores_[0], nullptr}, strategy, std::move(ids), prompt, opt, std::move(header), sink, on_piece);
}

Summary beam_search(Transformer& model, const Tokenizer& tok, KvStore& first, const Registry& registry, const PluginSpec& attention,
                    const std::string& model_file, std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& opt,
                    const BeamOptions& bo, RunHeader header, TraceSink& sink, const StreamFn& on_piece) {
  const Config& cfg = model.config();
  check_beam_options(bo, cfg.vocab_size);
  check_beam_attention(first, first.name());
  AttentionShape shape = cfg.attention_shape();
  shape.seq_len = static_cast<int>(std::clamp<long long>(static_cast<long long>(ids.size()) + opt.max_tokens, 1, shape.seq_len));
  if (first.persistent()) check_beam_memory(cfg, shape.seq_len, bo.width, model_file);
  std::vector<std::unique_ptr<KvStore>> extra;
  std::vector<KvStore*> stores{&first};
  for (int i = 1; i < bo.width && first.persistent(); ++i) {
    extra.push_back(registry.make_attention(attention, shape));
    stores.push_back(extra.back().get());
  }
  BeamSearch search(model, tok, std::move(stores));
  return search.generate(std::move(ids), prompt, opt, bo, std::move(header), sink, on_piece);
}

void BeamStrategy::check(const GenerateOptions& opt) const {
  if (!opt.forced.empty()) throw ConfigError("beam search cannot be teacher-forced (--replay): it chooses whole sequences");
  if (opt.policy.kind != ContextPolicy::Stop && opt.policy.kind != ContextPolicy::Refuse)
    throw ConfigError("--context-policy " + opt.policy.to_string() +
                      " drops tokens from one sequence; beam search keeps several: use stop or refuse with --beam-width");
}

// A live beam between steps.
struct BeamStrategy::Beam {
  std::vector<std::int32_t> tokens;  // generated so far
  double score = 0;                  // Σ log p
  KvStore* store = nullptr;          // holds the prompt and tokens[0 .. size-2] (the newest is fed next step)
};

struct BeamStrategy::State {
  int V = 0, N = 0, top_k = 0, n_cand = 0, t = 0;
  bool persistent = true;
  std::vector<std::int32_t> eog;
  std::vector<float> w, masked;
  std::vector<std::int32_t> best, scratch;
  std::vector<KvSpan> spans;
  std::vector<std::int32_t> seq;  // a recompute beam's whole sequence
  // Every step's record, the distributions each beam saw, and the time and attention work of each step.
  std::vector<BeamStep> steps;
  std::vector<std::vector<Dist>> dists;  // dists[t][i]: beam i of step t's input (step 0: the prompt)
  std::vector<double> step_ms;
  std::vector<std::int64_t> step_dots;
  std::vector<std::vector<std::int32_t>> step_parent_tokens;  // for each step, the last token of each input beam
  std::vector<Beam> live;
  std::vector<BeamHypothesis> hyps;  // every finished hypothesis (kept: the best N, at the end)
  std::string ended;                 // why the search stopped when live beams were still running
};

BeamStrategy::BeamStrategy(std::vector<KvStore*> stores, BeamOptions options) : stores_(std::move(stores)), bo_(std::move(options)) {}
BeamStrategy::~BeamStrategy() = default;

void BeamStrategy::begin(DecodeRun& run) {
  st_ = std::make_unique<State>();
  State& s = *st_;
  s.V = run.model.config().vocab_size;
  s.N = bo_.width;
  s.persistent = stores_[0]->persistent();
  s.eog = run.tok.eog_ids();
  s.top_k = std::max(0, std::min(run.opt.watch.top_k, s.V));
  s.n_cand = std::min(2 * s.N, s.V);  // candidates ranked per beam and overall (Hugging Face: 2·num_beams)
  s.w.resize(static_cast<std::size_t>(s.V));
  s.best.resize(static_cast<std::size_t>(std::max(s.n_cand, s.top_k)));
  s.scratch.resize(static_cast<std::size_t>(s.V + s.V / 16));
  s.live.resize(1);
  s.live[0].store = stores_[0];
  bs_ = BeamSummary{};
  bs_.width = s.N;
  bs_.length_penalty = bo_.length_penalty;
}

void BeamStrategy::end(DecodeRun& run) { run.sum.beam = bs_; }

double BeamStrategy::normalized(double score, int length) const {
  return score / std::pow(static_cast<double>(length), bo_.length_penalty);
}

bool BeamStrategy::advance(DecodeRun& run) {
  State& s = *st_;
  const int t = s.t++;
  if (bo_.poll) bo_.poll();
  const auto t0 = DecodeRun::Clock::now();
  const std::vector<std::int32_t>& ids = run.seq;  // the prompt: the search keeps its own sequences
  const int n_prompt = run.n_prompt;
  const int N = s.N;
  std::int64_t dots = 0;
  std::vector<RankedCandidate> cands;
  cands.reserve(s.live.size() * static_cast<std::size_t>(s.n_cand));
  std::vector<Dist>& dist = s.dists.emplace_back(s.live.size());
  std::vector<std::int32_t>& parent_last = s.step_parent_tokens.emplace_back();
  auto banned = [&](std::int32_t id) {
    return bo_.ban_eog && (id == run.tok.eos_id() || std::find(s.eog.begin(), s.eog.end(), id) != s.eog.end());
  };
  for (std::size_t i = 0; i < s.live.size(); ++i) {
    Beam& b = s.live[i];
    KvStore& kv = s.persistent ? *b.store : *stores_[0];
    // ---- FORWARD: the beam's newest token at its position (the prompt in blocks at step 0) ----
    std::span<const float> logits;
    if (!s.persistent) {
      s.seq.assign(ids.begin(), ids.end());
      s.seq.insert(s.seq.end(), b.tokens.begin(), b.tokens.end());
      kv.clear();
      logits = forward_blocks(run, s.seq, 0, kv, false, &dots);
    } else if (t == 0) {
      kv.clear();
      logits = forward_blocks(run, ids, 0, kv, false, &dots);
    } else {
      const std::int32_t last = b.tokens.back();
      logits = run.model.forward(std::span(&last, 1), n_prompt + t - 1, kv);
      dots += run.model.attention_dots();
    }
    ++bs_.forwards;
    parent_last.push_back(t == 0 ? ids.back() : b.tokens.back());
    // ---- log-softmax: log p_i = l_i − m − ln S ----
    const SoftmaxStats stats = softmax_weights(logits, s.w);
    const double lse = static_cast<double>(stats.max) + std::log(stats.sum);
    Dist& d = dist[i];
    d.entropy = static_cast<float>(stats.entropy());
    if (s.top_k > 0) {
      top_logits(logits, static_cast<std::size_t>(s.top_k), s.best.data(), s.scratch.data());
      d.top.resize(static_cast<std::size_t>(s.top_k));
      for (int j = 0; j < s.top_k; ++j) d.top[j] = {s.best[j], logits[s.best[j]], stats.prob(s.w[s.best[j]])};
    }
    kv.describe(d.kv);
    // ---- this beam's best 2N continuations (banned ids never rank) ----
    std::span<const float> rank = logits;
    if (bo_.ban_eog) {
      s.masked.assign(logits.begin(), logits.end());
      for (std::int32_t id = 0; id < s.V; ++id)
        if (banned(id)) s.masked[id] = -std::numeric_limits<float>::infinity();
      rank = s.masked;
    }
    const std::size_t got = top_logits(rank, static_cast<std::size_t>(s.n_cand), s.best.data(), s.scratch.data());
    for (std::size_t j = 0; j < got; ++j) {
      const std::int32_t id = s.best[j];
      if (!std::isfinite(rank[id])) continue;
      const double lp = static_cast<double>(logits[id]) - lse;
      cands.push_back({static_cast<int>(i), id, lp, b.score + lp});
    }
  }
  // ---- RANK every beam's candidates together: the best 2N by total log-probability ----
  // (stable: equal scores keep beam order, then the lower id first, as greedy's argmax does)
  std::stable_sort(cands.begin(), cands.end(), [](const RankedCandidate& a, const RankedCandidate& b) { return a.score > b.score; });
  if (cands.size() > static_cast<std::size_t>(s.n_cand)) cands.resize(static_cast<std::size_t>(s.n_cand));

  BeamStep& rec = s.steps.emplace_back();
  rec.width = N;
  std::vector<Beam> next;
  auto entry = [&](const RankedCandidate& c) {
    BeamEntry e;
    e.parent = c.beam;
    e.token = c.token;
    e.text = std::string(run.tok.decode(parent_last[c.beam], c.token));
    e.logprob = c.logprob;
    e.score = c.score;
    return e;
  };
  for (std::size_t r = 0; r < cands.size(); ++r) {
    const RankedCandidate& c = cands[r];
    if (run.is_stop(c.token) && r < static_cast<std::size_t>(N)) {
      // A hypothesis ends: its length counts the end-of-generation token.
      BeamEntry e = entry(c);
      e.length = t + 1;
      e.normalized = normalized(c.score, e.length);
      BeamHypothesis h;
      h.tokens = s.live[c.beam].tokens;
      h.tokens.push_back(c.token);
      h.score = c.score;
      h.length = e.length;
      h.normalized = e.normalized;
      h.step = t;
      h.ended = "stop_token";
      s.hyps.push_back(std::move(h));
      rec.finished.push_back(std::move(e));
    } else if (!run.is_stop(c.token) && next.size() < static_cast<std::size_t>(N)) {
      Beam nb;
      nb.tokens = s.live[c.beam].tokens;
      nb.tokens.push_back(c.token);
      nb.score = c.score;
      next.push_back(std::move(nb));
      rec.live.push_back(entry(c));
    } else {
      rec.pruned.push_back(entry(c));
    }
  }
  if (s.persistent) assign_stores(run, next, rec);
  s.live = std::move(next);
  const double ms = DecodeRun::ms_since(t0);
  s.step_ms.push_back(ms);
  s.step_dots.push_back(dots);
  if (t == 0) {
    run.prefill_ms += ms;
    run.sum.ttft_ms = ms;
  } else {
    run.decode_ms += ms;
    ++run.decode_units;  // search steps after the first
  }

  // ---- DONE? Hugging Face's default early stopping: N hypotheses finished and the best live beam,
  // scored as if it ended now, does not beat the worst of the N best ----
  std::sort(s.hyps.begin(), s.hyps.end(), [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.normalized > b.normalized; });
  if (s.hyps.size() > static_cast<std::size_t>(N)) s.hyps.resize(static_cast<std::size_t>(N));
  bool done = false;
  if (s.live.empty()) {
    done = true;
  } else if (s.hyps.size() == static_cast<std::size_t>(N) && normalized(s.live[0].score, t + 1) <= s.hyps.back().normalized) {
    done = true;
  } else if (t + 1 >= run.opt.max_tokens) {
    done = true, s.ended = "max_tokens";
  } else if (n_prompt + t >= run.limit) {  // the next token would need position n_prompt + t
    done = true, s.ended = "context_full";
  }
  if (!done) return true;
  finish(run);
  return false;
}

// ---- K/V: a child takes its parent's store in place (the first child) or a copy of it ----
void BeamStrategy::assign_stores(DecodeRun& run, std::vector<Beam>& next, const BeamStep& rec) {
  State& s = *st_;
  // Free: every store no kept beam's parent holds (dropped beams', and at step 0 all but the prompt's).
  std::vector<KvStore*> free_stores;
  std::vector<char> taken(s.live.size(), 0);
  for (KvStore* st : stores_) {
    bool held = false;
    for (const BeamEntry& e : rec.live) held = held || s.live[e.parent].store == st;
    if (!held) free_stores.push_back(st);
  }
  for (std::size_t j = 0; j < next.size(); ++j) {
    const int p = rec.live[j].parent;
    if (!taken[p]) {
      taken[p] = 1;
      next[j].store = s.live[p].store;
    }
  }
  for (std::size_t j = 0; j < next.size(); ++j) {
    if (next[j].store) continue;
    next[j].store = free_stores.back();
    free_stores.pop_back();
    copy_kv(*s.live[rec.live[j].parent].store, *next[j].store, run.model.config().n_layers, s.spans);
    ++bs_.kv_copies;
  }
}

std::span<const float> BeamStrategy::forward_blocks(DecodeRun& run, std::span<const std::int32_t> toks, int from, KvStore& kv,
                                                    bool watched, std::int64_t* dots) {
  std::span<const float> logits;
  const int B = run.model.max_block();
  for (int p = from; p < static_cast<int>(toks.size()); p += B) {
    const int n = std::min(B, static_cast<int>(toks.size()) - p);
    const bool last = watched && p + n == static_cast<int>(toks.size());
    logits = run.model.forward(toks.subspan(static_cast<std::size_t>(p), static_cast<std::size_t>(n)), p, kv,
                               last ? run.rec.attention_observer() : nullptr, last ? run.rec.lens() : nullptr);
    if (dots) *dots += run.model.attention_dots();
  }
  return logits;
}

// ---- The search has ended: the hypotheses, the winner's path, its step records and its tokens ----
void BeamStrategy::finish(DecodeRun& run) {
  State& s = *st_;
  const int N = s.N;
  const std::vector<std::int32_t>& ids = run.seq;
  const int T = static_cast<int>(s.steps.size());
  bs_.search_steps = T;
  // A search cut by max_tokens or the context: the live beams are hypotheses too (Hugging Face's finalize).
  if (!s.ended.empty()) {
    for (std::size_t j = 0; j < s.live.size(); ++j) {
      BeamHypothesis h;
      h.tokens = s.live[j].tokens;
      h.score = s.live[j].score;
      h.length = static_cast<int>(h.tokens.size());
      h.normalized = normalized(h.score, h.length);
      h.step = T - 1;
      h.ended = s.ended;
      s.hyps.push_back(std::move(h));
    }
    std::stable_sort(s.hyps.begin(), s.hyps.end(), [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.normalized > b.normalized; });
    if (s.hyps.size() > static_cast<std::size_t>(N)) s.hyps.resize(static_cast<std::size_t>(N));
  }
  if (s.hyps.empty())
    throw InputError("beam search ended with no hypothesis: every candidate was an end-of-generation token that --ignore-eos bans");
  for (BeamHypothesis& h : s.hyps) {
    std::int32_t prev = ids.back();
    for (auto id : h.tokens) h.text += run.tok.decode(prev, id), prev = id;
  }
  const BeamHypothesis win = s.hyps.front();
  const std::vector<int> via = winner_path(win);
  report(run, win, via);
  bs_.hypotheses = std::move(s.hyps);
}

// The winner's path, step by step: via[t] is the index of the input beam of step t it came from.
std::vector<int> BeamStrategy::winner_path(const BeamHypothesis& win) const {
  const State& s = *st_;
  std::vector<int> via(win.tokens.size());
  // Find the winner's entry in its step's record, then follow parents back.
  const BeamStep& last = s.steps[win.step];
  int parent = -1;
  const auto& list = win.ended == "stop_token" ? last.finished : last.live;
  for (const BeamEntry& e : list)
    if (e.token == win.tokens.back() && e.score == win.score) {
      // the entry whose ancestry spells the winner's tokens
      int p = e.parent;
      bool match = true;
      for (int t = win.step - 1; t >= 0 && match; --t) {
        const BeamEntry& a = s.steps[t].live[p];
        match = a.token == win.tokens[t];
        p = a.parent;
      }
      if (match) {
        parent = e.parent;
        break;
      }
    }
  if (parent < 0) throw Error("beam search: the winning hypothesis is missing from its step's record (a bug)");
  for (int t = win.step; t >= 0; --t) {
    via[t] = parent;
    if (t > 0) parent = s.steps[t - 1].live[parent].parent;
  }
  return via;
}

// ---- REPORT: one step event per token of the winner, each then emitted as any strategy's token ----
// What the search kept of each beam's distribution (entropy, top-k, KV state) is enough for a basic trace.
// A full trace, attention rows or the logit lens need what the forward pass exposes at each step, which
// the search did not keep for every beam: the winner's path runs once more through the model with the
// step recorder watching. It feeds the same tokens at the same positions in the same blocks as the search
// did (the K/V rows a beam copied are the same floats), so its logits are the search's bits.
void BeamStrategy::report(DecodeRun& run, const BeamHypothesis& win, const std::vector<int>& via) {
  State& s = *st_;
  const std::vector<std::int32_t> ids(run.seq.begin(), run.seq.end());
  const int n_prompt = run.n_prompt;
  const int L = static_cast<int>(win.tokens.size());
  const WatchSpec& watch = run.opt.watch;
  const bool replay = watch.level == TraceLevel::Full || watch.attention.on || watch.lens != LensPoints::Off;
  const auto t_replay = DecodeRun::Clock::now();
  KvStore& replay_kv = *stores_[0];
  std::vector<std::int32_t> path(ids);  // the prompt, then the winner's tokens fed so far
  if (replay) replay_kv.clear();
  for (int t = 0; t < L; ++t) {
    const BeamEntry* e = nullptr;
    const auto& list = (t == L - 1 && win.ended == "stop_token") ? s.steps[t].finished : s.steps[t].live;
    for (const BeamEntry& x : list)
      if (x.parent == via[t] && x.token == win.tokens[t]) e = &x;
    if (!e) throw Error("beam search: a step of the winner is missing from the record (a bug)");
    const std::int32_t prev = t == 0 ? ids.back() : win.tokens[t - 1];
    const std::span<const std::int32_t> input =
        t == 0 ? std::span<const std::int32_t>(ids) : std::span<const std::int32_t>(&win.tokens[t - 1], 1);
    StepEvent ev;
    std::string text;  // the event's token_text views it
    if (replay) {
      if (bo_.poll) bo_.poll();
      // As the search ran it: the prompt in blocks at step 0 (or the whole sequence again for a module that
      // keeps nothing), then one token at its position; the last block's last position is the one watched.
      if (t > 0) path.push_back(win.tokens[t - 1]);
      if (!s.persistent) replay_kv.clear();
      const int from = !s.persistent || t == 0 ? 0 : static_cast<int>(path.size()) - 1;
      const std::span<const float> logits = forward_blocks(run, path, from, replay_kv, true, nullptr);
      StepFacts f;
      f.phase = t == 0 ? "prefill" : "decode";
      f.step = t;
      f.pos = n_prompt - 1 + t;
      f.input = input;
      f.logits = logits;
      f.pick = {win.tokens[t], -1.0f};
      f.token = win.tokens[t];
      f.attention_dots = s.step_dots[t];
      f.ms = s.step_ms[t];
      ev = run.rec.record(f, replay_kv);
    } else {
      const Dist& d = s.dists[t][via[t]];
      ev.phase = t == 0 ? "prefill" : "decode";
      ev.step = t;
      ev.pos = n_prompt - 1 + t;
      ev.input_ids = input;
      ev.token = win.tokens[t];
      text = run.tok.decode(prev, ev.token);
      ev.token_text = text;
      ev.entropy = d.entropy;
      ev.top = d.top;
      ev.sampled = ev.token;
      ev.kv = &d.kv;
      ev.attention_dots = s.step_dots[t];
      ev.ms = s.step_ms[t];
    }
    ev.logprob = static_cast<float>(e->logprob);
    ev.prob = static_cast<float>(std::exp(e->logprob));
    ev.chain_prob = ev.prob;
    ev.beams = &s.steps[t];
    run.sink.step(ev);
    // ---- the loop's shared step: a stop token ends it unstreamed; else stream and count ----
    if (!run.emit(prev, win.tokens[t])) {
      bs_.after.assign(s.steps.begin() + L, s.steps.end());
      if (replay) run.decode_ms += DecodeRun::ms_since(t_replay);
      return;
    }
  }
  bs_.after.assign(s.steps.begin() + L, s.steps.end());
  if (replay) run.decode_ms += DecodeRun::ms_since(t_replay);  // the second pass is work this run did: the rates count it
  run.sum.stop_reason = win.ended;  // "context_full" (a stop token or max_tokens ended it inside emit)
}

}  // namespace glassbox
