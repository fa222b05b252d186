// Speculative decoding's loop: the draft proposes, the target verifies a whole round in one forward, and
// the acceptance rule (accept x with probability min(1, p(x)/q(x)); on rejection draw from
// norm(max(0, p − q)); after K acceptances a bonus token from p) keeps the output the target's.
#include "glassbox/speculative.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "glassbox/error.hpp"
#include "glassbox/rng.hpp"

namespace glassbox {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// A chain's distribution as a dense vector over the vocabulary (0 for what its stages removed): the
// candidates' normalised probabilities, or for a greedy chain the one-hot of its argmax (greedy's
// distribution: the rule then accepts exactly the target's argmax, and "resamples" it on rejection).
void dense(const Candidates& c, bool argmax, std::vector<double>& out) {
  std::fill(out.begin(), out.end(), 0.0);
  if (argmax) {
    out[static_cast<std::size_t>(c.data[static_cast<std::size_t>(c.argmax())].id)] = 1.0;
    return;
  }
  for (const auto& x : c.data) out[static_cast<std::size_t>(x.id)] = x.prob;
}

// Inverse-CDF draw over a dense distribution (weights need not sum to 1: `total` is their sum), in id
// order; rounding past the end falls back to the last id with any weight.
std::int32_t draw_dense(const std::vector<double>& w, double total, float u) {
  const double target = static_cast<double>(u) * total;
  double cum = 0;
  std::int32_t last = -1;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0) continue;
    last = static_cast<std::int32_t>(i);
    cum += w[i];
    if (cum > target) return last;
  }
  return last;
}

std::int32_t argmax_dense(const std::vector<double>& w) {
  return static_cast<std::int32_t>(std::max_element(w.begin(), w.end()) - w.begin());  // first of the highest
}

// The draft's and the target's context limits, as Engine::context_limit says them.
int limit_of(const Transformer& m, const KvStore& kv) {
  const int ctx = m.config().seq_len;
  return kv.evicts() ? ctx : std::min(ctx, kv.capacity());
}

void check_rollback(const KvStore& kv, const std::string& which) {
  if (!kv.persistent())
    throw ConfigError("speculative decoding keeps each model's KV cache between rounds and rolls rejected positions back, but the " +
                      which + "'s attention module '" + kv.name() + "' keeps nothing between steps (use kv-cache or paged)");
  if (kv.evicts())
    throw ConfigError("speculative decoding rolls rejected positions back, but the " + which + "'s attention module '" + kv.name() +
                      "' evicts old positions as new ones arrive, which a rollback cannot restore (use kv-cache or paged)");
}
}  // namespace

void check_draft_vocabulary(const Tokenizer& target, int target_vocab, const std::string& target_file, const Tokenizer& draft,
                            int draft_vocab, const std::string& draft_file) {
  const std::string both = "draft model " + draft_file + " and target model " + target_file;
  if (draft_vocab != target_vocab || draft.vocab_size() != target.vocab_size())
    throw ConfigError(both + " have different vocabularies (" + std::to_string(draft_vocab) + " tokens vs " +
                      std::to_string(target_vocab) + "): speculative decoding needs the same tokens in both");
  for (std::int32_t id = 0; id < target.vocab_size(); ++id)
    if (draft.piece(id) != target.piece(id))
      throw ConfigError(both + " have different vocabularies (token " + std::to_string(id) + " is '" +
                        std::string(draft.piece(id)) + "' in the draft's, '" + std::string(target.piece(id)) +
                        "' in the target's): speculative decoding needs the same tokens in both");
}

SpeculativeEngine::SpeculativeEngine(Transformer& target, const Tokenizer& tokenizer, KvStore& attention, SamplerChain& sampler,
                                     DraftModel draft, int k)
    : target_(target), tok_(tokenizer), attn_(attention), chain_(sampler), draft_(std::move(draft)), k_(k) {
  if (k < 1 || k > kMaxDraftTokens)
    throw ConfigError("--draft-tokens " + std::to_string(k) + " (expected 1.." + std::to_string(kMaxDraftTokens) + ")");
  if (k + 1 > target.max_block())
    throw ConfigError("--draft-tokens " + std::to_string(k) + ": a round's " + std::to_string(k + 1) +
                      " positions must fit one forward block of the target (at most " + std::to_string(target.max_block()) + ")");
  check_rollback(attention, "target");
  check_rollback(draft_.attention, "draft");
  if (draft_.model.config().vocab_size != target.config().vocab_size)
    throw ConfigError("draft model " + draft_.path + " has " + std::to_string(draft_.model.config().vocab_size) +
                      " tokens, the target " + std::to_string(target.config().vocab_size));
  // Refused here, before any trace is begun (distribution() would say the same at the first round).
  for (const auto& st : sampler.stages())
    if (st->selects()) {
      if (st->name() != "greedy" && st->name() != "dist")
        throw ConfigError("sampler stage '" + st->name() + "' selects the token, but speculative decoding needs the whole "
                          "distribution a chain draws from: end the chain with greedy or dist");
      break;
    }
  sampler.bind(tokenizer);
  draft_.sampler.bind(tokenizer);
}

Summary SpeculativeEngine::generate(std::string_view prompt, const GenerateOptions& opt, RunHeader header, TraceSink& sink,
                                    const StreamFn& on_piece) {
  return generate(tok_.encode(prompt, tok_.add_bos(), /*eos=*/false), prompt, opt, std::move(header), sink, on_piece);
}

Summary SpeculativeEngine::generate(std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& opt,
                                    RunHeader header, TraceSink& sink, const StreamFn& on_piece) {
  const Config& cfg = target_.config();
  const int V = cfg.vocab_size;
  if (opt.max_tokens < 0) throw ConfigError("max_tokens = " + std::to_string(opt.max_tokens) + " (expected >= 0)");
  if (opt.policy.kind != ContextPolicy::Stop && opt.policy.kind != ContextPolicy::Refuse)
    throw ConfigError("--context-policy " + opt.policy.to_string() +
                      " with a draft model: speculative decoding supports stop and refuse (the two caches would have to be cut alike)");
  if (!opt.forced.empty()) throw ConfigError("--replay with a draft model: teacher forcing replaces the tokens speculation decides");
  if (opt.watch.attention.on || opt.watch.lens != LensPoints::Off)
    throw ConfigError("--trace-attention and --trace-lens are not recorded with a draft model (a round's block holds positions not yet decided)");
  if (ids.empty()) throw InputError("the prompt encodes to no tokens and the tokenizer adds no BOS: nothing to start from");
  for (auto id : ids)
    if (id < 0 || id >= V)
      throw InputError("tokenizer produced id " + std::to_string(id) + ", outside the model's vocabulary of " + std::to_string(V));
  const int limit = limit_of(target_, attn_);
  const int draft_limit = limit_of(draft_.model, draft_.attention);
  const int n_prompt = static_cast<int>(ids.size());
  if (opt.policy.kind == ContextPolicy::Refuse && static_cast<long long>(n_prompt) + opt.max_tokens > limit)
    throw InputError("prompt is " + std::to_string(n_prompt) + " tokens and up to " + std::to_string(opt.max_tokens) +
                     " more may be generated, but the target's context holds " + std::to_string(limit) + " (--context-policy refuse)");
  if (n_prompt > limit)
    throw InputError("prompt is " + std::to_string(n_prompt) + " tokens but the target's context holds " + std::to_string(limit));

  StepRecorder rec(opt.watch, target_, tok_, chain_);
  header.prompt = std::string(prompt);
  header.prompt_ids.assign(ids.begin(), ids.end());
  header.max_tokens = opt.max_tokens;
  header.level = opt.watch.level;
  if (!header.speculative) header.speculative = SpeculativeSetup{draft_.path, "", k_};
  header.speculative->k = k_;
  sink.header(header);

  Summary sum;
  SpeculativeSummary spec;
  spec.k = k_;
  attn_.clear();
  draft_.attention.clear();
  const std::uint64_t draft_seed = opt.seed ^ 0x9E3779B97F4A7C15ULL;  // the draft's stages draw apart from the target's
  chain_.reset(opt.seed);
  draft_.sampler.reset(draft_seed);
  for (auto id : ids) chain_.accept(id), draft_.sampler.accept(id);
  // Two generators: the draft's proposals, and the target's acceptance and residual draws, so that what
  // the draft draws never shifts the target's numbers.
  Rng draft_rng(draft_seed), rng(opt.seed);
  if (opt.max_tokens == 0) {
    sum.stop_reason = "max_tokens";
    sum.speculative = spec;
    sink.summary(sum);
    return sum;
  }
  const std::vector<std::int32_t> eog = tok_.eog_ids();
  auto is_stop = [&](std::int32_t t) {
    if (opt.stop_at_eos && (t == tok_.eos_id() || std::find(eog.begin(), eog.end(), t) != eog.end())) return true;
    return opt.stop_at_bos && t == tok_.bos_id();
  };

  std::vector<std::int32_t> seq = std::move(ids);
  seq.reserve(static_cast<std::size_t>(limit) + 1);
  // Runs seq[from, to) at positions from.. through `m` in blocks; returns the last block's last logits.
  auto run_blocks = [&](Transformer& m, KvStore& kv, int from, int to) {
    std::span<const float> out;
    for (int p = from; p < to; p += m.max_block()) {
      const int n = std::min(m.max_block(), to - p);
      out = m.forward(std::span(seq).subspan(static_cast<std::size_t>(p), static_cast<std::size_t>(n)), p, kv);
    }
    return out;
  };

  // ---- PREFILL: every prompt token but the last through both models; the last one opens round 0 ----
  const auto t_start = Clock::now();
  run_blocks(target_, attn_, 0, n_prompt - 1);
  run_blocks(draft_.model, draft_.attention, 0, std::min(n_prompt - 1, draft_limit));
  int target_held = n_prompt - 1, draft_held = std::min(n_prompt - 1, draft_limit);
  const double prefill_ms = ms_since(t_start);
  double rounds_ms = 0;

  std::vector<SpecProposal> props;
  std::vector<std::vector<double>> q(static_cast<std::size_t>(k_), std::vector<double>(static_cast<std::size_t>(V)));
  std::vector<double> p(static_cast<std::size_t>(V)), resid(static_cast<std::size_t>(V));
  std::vector<float> rows(static_cast<std::size_t>(k_ + 1) * static_cast<std::size_t>(V));
  std::vector<TokenProb> residual_top;
  std::vector<std::int32_t> order(static_cast<std::size_t>(V));
  const int top_k = std::max(1, std::min(opt.watch.top_k, V));
  const bool argmax = chain_.selects_argmax();
  const bool draft_argmax = argmax;  // greedy target: greedy draft (its own chain's selecting stage is not asked)
  int step = 0;
  bool done = false;

  while (!done) {
    const auto t0 = Clock::now();
    const int P = static_cast<int>(seq.size()) - 1;  // the newest token, not yet fed to the target
    if (P >= limit) {
      sum.stop_reason = "context_full";
      break;
    }
    // K for this round: room in both contexts, and no more than can still be emitted.
    int k = std::min({k_, limit - 1 - P, draft_limit - P, opt.max_tokens - sum.generated - 1});
    k = std::max(0, k);

    // ---- DRAFT: K tokens, each drawn from the draft's chain distribution q (argmax for a greedy target) ----
    props.clear();
    if (k > 0) {
      std::span<const float> dl = run_blocks(draft_.model, draft_.attention, draft_held, P + 1);
      ++spec.draft_forwards;
      draft_held = P + 1;
      for (int j = 0; j < k; ++j) {
        if (j > 0) {
          dl = draft_.model.forward(std::span(&props.back().id, 1), P + j, draft_.attention);
          ++spec.draft_forwards;
          ++draft_held;
        }
        const Candidates& c = draft_.sampler.distribution(dl);
        std::vector<double>& qj = q[static_cast<std::size_t>(j)];
        dense(c, draft_argmax, qj);
        const std::int32_t x = draft_argmax ? argmax_dense(qj) : draw_dense(qj, 1.0, draft_rng.uniform());
        props.push_back({x, static_cast<float>(qj[static_cast<std::size_t>(x)]), -1.0f, -1.0f, SpecProposal::Unchecked});
        draft_.sampler.accept(x);
      }
    }
    spec.proposed += k;

    // ---- VERIFY: the newest token and the K proposals through the target in one forward ----
    std::vector<std::int32_t> block{seq.back()};
    for (const auto& x : props) block.push_back(x.id);
    target_.forward(block, P, attn_);
    target_held = P + k + 1;
    for (int i = 0; i <= k; ++i) target_.block_logits(i, &rows[static_cast<std::size_t>(i) * static_cast<std::size_t>(V)]);
    ++spec.rounds;
    const int round = spec.rounds - 1;

    // ---- ACCEPT OR RESAMPLE, position by position; the target's chain sees exactly the tokens emitted ----
    int accepted = 0;
    for (int i = 0; i <= k && !done; ++i) {
      const auto ti = i == 0 ? t0 : Clock::now();
      const std::span<const float> logits(&rows[static_cast<std::size_t>(i) * static_cast<std::size_t>(V)], static_cast<std::size_t>(V));
      const Candidates& c = chain_.distribution(logits, rec.stage_observer());
      dense(c, argmax, p);
      SpeculativeStep sp;
      sp.round = round;
      sp.index = i;
      std::int32_t token = -1;
      float u_draw = -1;
      if (i < k) {
        SpecProposal& x = props[static_cast<std::size_t>(i)];
        const std::vector<double>& qi = q[static_cast<std::size_t>(i)];
        const double px = p[static_cast<std::size_t>(x.id)], qx = qi[static_cast<std::size_t>(x.id)];
        x.p = static_cast<float>(px);
        bool accept;
        if (argmax) {
          accept = px > 0;  // one-hot p: the proposal is the target's argmax
        } else {
          x.u = rng.uniform();
          accept = static_cast<double>(x.u) * qx < px;  // u < p(x)/q(x): probability min(1, p/q)
        }
        x.verdict = accept ? SpecProposal::Accepted : SpecProposal::Rejected;
        sp.draft = &x;
        if (accept) {
          token = x.id;
          sp.outcome = "accepted";
          ++accepted;
        } else {
          // The residual r = norm(max(0, p − q)): what p holds beyond what the draft already offered.
          double total = 0;
          for (std::size_t v = 0; v < p.size(); ++v) total += resid[v] = std::max(0.0, p[v] - qi[v]);
          if (!(total > 0)) resid = p, total = std::accumulate(p.begin(), p.end(), 0.0);  // rounding: p and q equal
          if (argmax) {
            token = argmax_dense(resid);
          } else {
            u_draw = rng.uniform();
            token = draw_dense(resid, total, u_draw);
          }
          sp.outcome = "resampled";
          std::iota(order.begin(), order.end(), 0);
          const auto n = static_cast<std::size_t>(top_k);
          std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                            [&](std::int32_t a, std::int32_t b) { return resid[a] > resid[b] || (resid[a] == resid[b] && a < b); });
          residual_top.clear();
          for (std::size_t j = 0; j < n && resid[order[j]] > 0; ++j)
            residual_top.push_back({order[j], 0.0f, static_cast<float>(resid[order[j]] / total)});
          sp.residual = residual_top;
        }
      } else {
        // Every proposal accepted: the bonus token, from p at the position after the last of them.
        if (argmax) {
          token = argmax_dense(p);
        } else {
          u_draw = rng.uniform();
          token = draw_dense(p, 1.0, u_draw);
        }
        sp.outcome = "bonus";
      }
      // The round ends here when this token is not an accepted proposal, when it ends generation, or
      // when it is the last one max_tokens allows: this step then carries the round's verdicts.
      const bool stop = is_stop(token);
      sp.last = i == k || std::string_view(sp.outcome) != "accepted" || stop || sum.generated + 1 >= opt.max_tokens;
      if (sp.last) {
        sp.proposals = props;
        sp.accepted = accepted;
      }
      ++spec.tokens;
      StepFacts f;
      f.phase = step == 0 ? "prefill" : "decode";
      f.step = step;
      f.pos = P + i;
      f.input = step == 0 ? std::span<const std::int32_t>(seq) : std::span<const std::int32_t>(&seq.back(), 1);
      f.logits = logits;
      f.pick = {token, u_draw};
      f.token = token;
      f.ms = ms_since(ti);
      StepEvent ev = rec.record(f, attn_);
      ev.chain_prob = static_cast<float>(p[static_cast<std::size_t>(token)]);
      ev.speculative = &sp;
      sink.step(ev);
      if (step == 0) sum.ttft_ms = ms_since(t_start);
      ++step;
      // ---- as Engine::decode_step: a stop token ends it unstreamed; else stream, append, count ----
      if (stop) {
        sum.stop_reason = "stop_token";
        sum.stop_token = token;
        sum.stop_token_text = std::string(tok_.piece(token));
        done = true;
        break;
      }
      try {
        on_piece(tok_.decode(seq.back(), token));
      } catch (const StopGeneration&) {
        sum.stop_reason = "stop_text";
        done = true;
        break;
      }
      chain_.accept(token);
      seq.push_back(token);
      ++sum.generated;
      if (sum.generated >= opt.max_tokens) {
        sum.stop_reason = "max_tokens";
        done = true;
        break;
      }
      if (sp.last) break;
    }
    spec.accepted += accepted;
    rounds_ms += ms_since(t0);
    if (done) break;

    // ---- ROLL BACK: positions past what was emitted are forgotten (the next write lands there) ----
    const int held = static_cast<int>(seq.size()) - 1;  // positions 0..held-1 hold emitted tokens; seq[held] is new
    if (target_held > held) attn_.remove(held, target_held), target_held = held;
    if (draft_held > held) draft_.attention.remove(held, draft_held), draft_held = held;
    if (accepted == k) {
      draft_.sampler.accept(seq.back());  // it saw every proposal; the bonus is news to it
    } else {
      // Its chain accepted proposals the target refused: start it over on the emitted sequence.
      draft_.sampler.reset(draft_seed + static_cast<std::uint64_t>(spec.rounds));
      for (auto id : seq) draft_.sampler.accept(id);
    }
  }

  const auto t_flush = Clock::now();
  sink.flush();
  rounds_ms += ms_since(t_flush);
  sum.prefill_tok_s = prefill_ms > 0 ? n_prompt / (prefill_ms / 1000.0) : 0;
  sum.decode_tok_s = rounds_ms > 0 ? spec.tokens / (rounds_ms / 1000.0) : 0;
  sum.speculative = spec;
  sink.summary(sum);
  return sum;
}

}  // namespace glassbox
