// Beam search over the model's log-probabilities (Hugging Face's algorithm: 2·width candidates ranked per
// step, end-of-generation candidates among the best width finish a hypothesis, score / length^A), with one
// K/V store per beam whose rows are copied when a beam is re-selected. docs/beam-search.md.
#include "glassbox/beam_search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "glassbox/error.hpp"

namespace glassbox {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

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

// A live beam between steps.
struct Beam {
  std::vector<std::int32_t> tokens;  // generated so far
  double score = 0;                  // Σ log p
  KvStore* store = nullptr;          // holds the prompt and tokens[0 .. size-2] (the newest is fed next step)
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
  const Config& cfg = model_.config();
  const int V = cfg.vocab_size;
  const int N = bo.width;
  check_beam_options(bo, V);
  const bool persistent = stores_[0]->persistent();
  if (persistent && static_cast<int>(stores_.size()) < N)
    throw ConfigError("beam search of width " + std::to_string(N) + " was given " + std::to_string(stores_.size()) +
                      " K/V stores (one per beam needed)");
  if (opt.max_tokens < 0) throw ConfigError("max_tokens = " + std::to_string(opt.max_tokens) + " (expected >= 0)");
  if (!opt.forced.empty()) throw ConfigError("beam search cannot be teacher-forced (--replay): it chooses whole sequences");
  if (opt.watch.level == TraceLevel::Full)
    throw ConfigError("beam search records each beam's ranking, not every logit: use --trace-level basic with --beam-width");
  if (opt.watch.attention.on || opt.watch.lens != LensPoints::Off)
    throw ConfigError("beam search does not record attention weights or the logit lens (--trace-attention, --trace-lens)");
  if (opt.policy.kind != ContextPolicy::Stop && opt.policy.kind != ContextPolicy::Refuse)
    throw ConfigError("--context-policy " + opt.policy.to_string() +
                      " drops tokens from one sequence; beam search keeps several: use stop or refuse with --beam-width");
  if (ids.empty()) throw InputError("the prompt encodes to no tokens and the tokenizer adds no BOS: nothing to start from");
  for (auto id : ids)
    if (id < 0 || id >= V)
      throw InputError("tokenizer produced id " + std::to_string(id) + ", outside the model's vocabulary of " + std::to_string(V));
  const int limit = context_limit();
  const int n_prompt = static_cast<int>(ids.size());
  if (n_prompt > limit)
    throw InputError("prompt is " + std::to_string(n_prompt) + " tokens but the context holds " + std::to_string(limit) +
                     " (beam search does not truncate)");
  if (opt.policy.kind == ContextPolicy::Refuse && static_cast<long long>(n_prompt) + opt.max_tokens > limit)
    throw InputError("prompt is " + std::to_string(n_prompt) + " tokens and up to " + std::to_string(opt.max_tokens) +
                     " more may be generated, but the context holds " + std::to_string(limit) + " (--context-policy refuse)");

  header.prompt = std::string(prompt);
  header.prompt_ids = ids;
  header.max_tokens = opt.max_tokens;
  header.level = opt.watch.level;
  sink.header(header);

  const std::vector<std::int32_t> eog = tok_.eog_ids();
  auto is_stop = [&](std::int32_t t) {
    if (opt.stop_at_eos && (t == tok_.eos_id() || std::find(eog.begin(), eog.end(), t) != eog.end())) return true;
    return opt.stop_at_bos && t == tok_.bos_id();
  };
  auto banned = [&](std::int32_t t) {
    return bo.ban_eog && (t == tok_.eos_id() || std::find(eog.begin(), eog.end(), t) != eog.end());
  };
  const double A = bo.length_penalty;
  auto normalized = [&](double score, int length) { return score / std::pow(static_cast<double>(length), A); };

  Summary sum;
  BeamSummary bs;
  bs.width = N;
  bs.length_penalty = A;
  if (opt.max_tokens == 0) {
    sum.stop_reason = "max_tokens";
    sum.beam = std::move(bs);
    sink.summary(sum);
    return sum;
  }

  const int top_k = std::max(0, std::min(opt.watch.top_k, V));
  const int n_cand = std::min(2 * N, V);  // candidates ranked per beam and overall (Hugging Face: 2·num_beams)
  std::vector<float> w(static_cast<std::size_t>(V)), masked;
  std::vector<std::int32_t> best(static_cast<std::size_t>(std::max(n_cand, top_k))), scratch(static_cast<std::size_t>(V + V / 16));
  std::vector<KvSpan> spans;
  std::vector<std::int32_t> seq;  // a recompute beam's whole sequence

  // Every step's record, the distributions each beam saw, and the time and attention work of each step.
  std::vector<BeamStep> steps;
  std::vector<std::vector<Dist>> dists;  // dists[t][i]: beam i of step t's input (step 0: the prompt)
  std::vector<double> step_ms;
  std::vector<std::int64_t> step_dots;
  std::vector<std::vector<std::int32_t>> step_parent_tokens;  // for each step, the last token of each input beam

  std::vector<Beam> live(1);
  live[0].store = stores_[0];
  std::vector<BeamHypothesis> hyps;  // every finished hypothesis (kept: the best N, at the end)
  double prefill_ms = 0, decode_ms = 0;
  std::string ended;  // why the search stopped when live beams were still running
  bool done = false;

  for (int t = 0; !done; ++t) {
    if (bo.poll) bo.poll();
    const auto t0 = Clock::now();
    std::int64_t dots = 0;
    std::vector<RankedCandidate> cands;
    cands.reserve(live.size() * static_cast<std::size_t>(n_cand));
    std::vector<Dist>& dist = dists.emplace_back(live.size());
    std::vector<std::int32_t>& parent_last = step_parent_tokens.emplace_back();
    for (std::size_t i = 0; i < live.size(); ++i) {
      Beam& b = live[i];
      KvStore& kv = persistent ? *b.store : *stores_[0];
      // ---- FORWARD: the beam's newest token at its position (the prompt in blocks at step 0) ----
      std::span<const float> logits;
      const int B = model_.max_block();
      auto run_blocks = [&](std::span<const std::int32_t> toks, int from) {
        for (int p = from; p < static_cast<int>(toks.size()); p += B) {
          const int n = std::min(B, static_cast<int>(toks.size()) - p);
          logits = model_.forward(toks.subspan(p, n), p, kv);
          dots += model_.attention_dots();
        }
      };
      if (!persistent) {
        seq.assign(ids.begin(), ids.end());
        seq.insert(seq.end(), b.tokens.begin(), b.tokens.end());
        kv.clear();
        run_blocks(seq, 0);
      } else if (t == 0) {
        kv.clear();
        run_blocks(ids, 0);
      } else {
        const std::int32_t last = b.tokens.back();
        logits = model_.forward(std::span(&last, 1), n_prompt + t - 1, kv);
        dots += model_.attention_dots();
      }
      ++bs.forwards;
      parent_last.push_back(t == 0 ? ids.back() : b.tokens.back());
      // ---- log-softmax: log p_i = l_i − m − ln S ----
      const SoftmaxStats st = softmax_weights(logits, w);
      const double lse = static_cast<double>(st.max) + std::log(st.sum);
      Dist& d = dist[i];
      d.entropy = static_cast<float>(st.entropy());
      if (top_k > 0) {
        top_logits(logits, static_cast<std::size_t>(top_k), best.data(), scratch.data());
        d.top.resize(static_cast<std::size_t>(top_k));
        for (int j = 0; j < top_k; ++j) d.top[j] = {best[j], logits[best[j]], st.prob(w[best[j]])};
      }
      kv.describe(d.kv);
      // ---- this beam's best 2N continuations (banned ids never rank) ----
      std::span<const float> rank = logits;
      if (bo.ban_eog) {
        masked.assign(logits.begin(), logits.end());
        for (std::int32_t id = 0; id < V; ++id)
          if (banned(id)) masked[id] = -std::numeric_limits<float>::infinity();
        rank = masked;
      }
      const std::size_t got = top_logits(rank, static_cast<std::size_t>(n_cand), best.data(), scratch.data());
      for (std::size_t j = 0; j < got; ++j) {
        const std::int32_t id = best[j];
        if (!std::isfinite(rank[id])) continue;
        const double lp = static_cast<double>(logits[id]) - lse;
        cands.push_back({static_cast<int>(i), id, lp, b.score + lp});
      }
    }
    // ---- RANK every beam's candidates together: the best 2N by total log-probability ----
    // (stable: equal scores keep beam order, then the lower id first, as greedy's argmax does)
    std::stable_sort(cands.begin(), cands.end(), [](const RankedCandidate& a, const RankedCandidate& b) { return a.score > b.score; });
    if (cands.size() > static_cast<std::size_t>(n_cand)) cands.resize(static_cast<std::size_t>(n_cand));

    BeamStep& rec = steps.emplace_back();
    rec.width = N;
    std::vector<Beam> next;
    auto entry = [&](const RankedCandidate& c) {
      BeamEntry e;
      e.parent = c.beam;
      e.token = c.token;
      e.text = std::string(tok_.decode(parent_last[c.beam], c.token));
      e.logprob = c.logprob;
      e.score = c.score;
      return e;
    };
    for (std::size_t r = 0; r < cands.size(); ++r) {
      const RankedCandidate& c = cands[r];
      if (is_stop(c.token) && r < static_cast<std::size_t>(N)) {
        // A hypothesis ends: its length counts the end-of-generation token.
        BeamEntry e = entry(c);
        e.length = t + 1;
        e.normalized = normalized(c.score, e.length);
        BeamHypothesis h;
        h.tokens = live[c.beam].tokens;
        h.tokens.push_back(c.token);
        h.score = c.score;
        h.length = e.length;
        h.normalized = e.normalized;
        h.step = t;
        h.ended = "stop_token";
        hyps.push_back(std::move(h));
        rec.finished.push_back(std::move(e));
      } else if (!is_stop(c.token) && next.size() < static_cast<std::size_t>(N)) {
        Beam nb;
        nb.tokens = live[c.beam].tokens;
        nb.tokens.push_back(c.token);
        nb.score = c.score;
        next.push_back(std::move(nb));
        rec.live.push_back(entry(c));
      } else {
        rec.pruned.push_back(entry(c));
      }
    }
    // ---- K/V: a child takes its parent's store in place (the first child) or a copy of it ----
    if (persistent) {
      // Free: every store no kept beam's parent holds (dropped beams', and at step 0 all but the prompt's).
      std::vector<KvStore*> free_stores;
      std::vector<char> taken(live.size(), 0);
      for (KvStore* s : stores_) {
        bool held = false;
        for (const BeamEntry& e : rec.live) held = held || live[e.parent].store == s;
        if (!held) free_stores.push_back(s);
      }
      for (std::size_t j = 0; j < next.size(); ++j) {
        const int p = rec.live[j].parent;
        if (!taken[p]) {
          taken[p] = 1;
          next[j].store = live[p].store;
        }
      }
      for (std::size_t j = 0; j < next.size(); ++j) {
        if (next[j].store) continue;
        next[j].store = free_stores.back();
        free_stores.pop_back();
        copy_kv(*live[rec.live[j].parent].store, *next[j].store, cfg.n_layers, spans);
        ++bs.kv_copies;
      }
    }
    live = std::move(next);
    const double ms = ms_since(t0);
    step_ms.push_back(ms);
    step_dots.push_back(dots);
    (t == 0 ? prefill_ms : decode_ms) += ms;
    if (t == 0) sum.ttft_ms = ms;

    // ---- DONE? Hugging Face's default early stopping: N hypotheses finished and the best live beam,
    // scored as if it ended now, does not beat the worst of the N best ----
    std::sort(hyps.begin(), hyps.end(), [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.normalized > b.normalized; });
    if (hyps.size() > static_cast<std::size_t>(N)) hyps.resize(static_cast<std::size_t>(N));
    if (live.empty()) {
      done = true;
    } else if (hyps.size() == static_cast<std::size_t>(N) && normalized(live[0].score, t + 1) <= hyps.back().normalized) {
      done = true;
    } else if (t + 1 >= opt.max_tokens) {
      done = true, ended = "max_tokens";
    } else if (n_prompt + t >= limit) {  // the next token would need position n_prompt + t
      done = true, ended = "context_full";
    }
  }
  const int T = static_cast<int>(steps.size());
  bs.search_steps = T;
  // A search cut by max_tokens or the context: the live beams are hypotheses too (Hugging Face's finalize).
  if (!ended.empty()) {
    for (std::size_t j = 0; j < live.size(); ++j) {
      BeamHypothesis h;
      h.tokens = live[j].tokens;
      h.score = live[j].score;
      h.length = static_cast<int>(h.tokens.size());
      h.normalized = normalized(h.score, h.length);
      h.step = T - 1;
      h.ended = ended;
      hyps.push_back(std::move(h));
    }
    std::stable_sort(hyps.begin(), hyps.end(), [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.normalized > b.normalized; });
    if (hyps.size() > static_cast<std::size_t>(N)) hyps.resize(static_cast<std::size_t>(N));
  }
  if (hyps.empty())
    throw InputError("beam search ended with no hypothesis: every candidate was an end-of-generation token that --ignore-eos bans");
  for (BeamHypothesis& h : hyps) {
    std::int32_t prev = ids.back();
    for (auto id : h.tokens) h.text += tok_.decode(prev, id), prev = id;
  }

  // ---- The winner's path, step by step: at step t, which input beam it came from ----
  const BeamHypothesis& win = hyps.front();
  const int L = static_cast<int>(win.tokens.size());
  std::vector<int> via(static_cast<std::size_t>(L));  // via[t]: index of the input beam of step t on the path
  {
    // Find the winner's entry in its step's record, then follow parents back.
    const BeamStep& last = steps[win.step];
    int parent = -1;
    const auto& list = win.ended == "stop_token" ? last.finished : last.live;
    for (const BeamEntry& e : list)
      if (e.token == win.tokens.back() && e.score == win.score) {
        // the entry whose ancestry spells the winner's tokens
        int p = e.parent;
        bool match = true;
        for (int t = win.step - 1; t >= 0 && match; --t) {
          const BeamEntry& a = steps[t].live[p];
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
      if (t > 0) parent = steps[t - 1].live[parent].parent;
    }
  }

  // ---- REPORT: one step event per token of the winner ----
  for (int t = 0; t < L; ++t) {
    const Dist& d = dists[t][via[t]];
    const BeamEntry* e = nullptr;
    const auto& list = (t == L - 1 && win.ended == "stop_token") ? steps[t].finished : steps[t].live;
    for (const BeamEntry& x : list)
      if (x.parent == via[t] && x.token == win.tokens[t]) e = &x;
    if (!e) throw Error("beam search: a step of the winner is missing from the record (a bug)");
    StepEvent ev;
    ev.phase = t == 0 ? "prefill" : "decode";
    ev.step = t;
    ev.pos = n_prompt - 1 + t;
    std::int32_t prev_tok = t == 0 ? ids.back() : win.tokens[t - 1];
    ev.input_ids = t == 0 ? std::span<const std::int32_t>(ids) : std::span<const std::int32_t>(&win.tokens[t - 1], 1);
    ev.token = win.tokens[t];
    const std::string text(tok_.decode(prev_tok, ev.token));
    ev.token_text = text;
    ev.logprob = static_cast<float>(e->logprob);
    ev.prob = static_cast<float>(std::exp(e->logprob));
    ev.chain_prob = ev.prob;
    ev.entropy = d.entropy;
    ev.top = d.top;
    ev.sampled = ev.token;
    ev.kv = &d.kv;
    ev.attention_dots = step_dots[t];
    ev.ms = step_ms[t];
    ev.beams = &steps[t];
    sink.step(ev);
  }
  bs.after.assign(steps.begin() + L, steps.end());

  // ---- STREAM the winner's text, then the summary ----
  sum.generated = win.ended == "stop_token" ? L - 1 : L;
  sum.stop_reason = win.ended;
  if (win.ended == "stop_token") {
    sum.stop_token = win.tokens.back();
    sum.stop_token_text = std::string(tok_.piece(sum.stop_token));
  }
  try {
    std::int32_t prev = ids.back();
    for (int t = 0; t < sum.generated; ++t) on_piece(tok_.decode(prev, win.tokens[t])), prev = win.tokens[t];
  } catch (const StopGeneration&) {
    sum.stop_reason = "stop_text";
  }
  sink.flush();
  sum.prefill_tok_s = prefill_ms > 0 ? n_prompt / (prefill_ms / 1000.0) : 0;
  sum.decode_tok_s = decode_ms > 0 ? (T - 1) / (decode_ms / 1000.0) : 0;
  bs.hypotheses = std::move(hyps);
  sum.beam = std::move(bs);
  sink.summary(sum);
  return sum;
}

}  // namespace glassbox
