// Speculative decoding's loop: the draft proposes, the target verifies a whole round in one forward, and
// the acceptance rule (accept x with probability min(1, p(x)/q(x)); on rejection draw from
// norm(max(0, p − q)); after K acceptances a bonus token from p) keeps the output the target's.
#include "glassbox/speculative.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "glassbox/error.hpp"
#include "glassbox/model/printable.hpp"
#include "glassbox/rng.hpp"
#include "glassbox/strategy.hpp"

namespace glassbox {

namespace {
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
  // Special tokens by id and role, the rest by text (llama.cpp's common_speculative_are_compatible): a
  // control token's text is the file's spelling ("<s>" in a GGUF, "\n<s>\n" in a llama2.c tokenizer.bin),
  // not what the model reads, so the same model in both formats is the same vocabulary.
  const std::string hint = " (a draft in another file format of the same model? give it the target's tokenizer with --draft-tokenizer)";
  auto same_id = [&](const char* role, std::int32_t d, std::int32_t t) {
    if (d != t)
      throw ConfigError(both + " have different vocabularies (" + role + " is token " + std::to_string(d) + " in the draft's, " +
                        std::to_string(t) + " in the target's): speculative decoding needs the same tokens in both" + hint);
  };
  same_id("BOS", draft.bos_id(), target.bos_id());
  same_id("EOS", draft.eos_id(), target.eos_id());
  auto special = [](const Tokenizer& t, std::int32_t id) {
    const TokenType k = t.token_type(id);
    return k == TokenType::Control || k == TokenType::Unknown || id == t.bos_id() || id == t.eos_id();
  };
  // A SentencePiece vocabulary in a GGUF spells a space as U+2581 ("▁t"), llama2.c's tokenizer.bin as a
  // space (" t"): the same text, in two spellings.
  auto text = [](std::string_view piece) {
    std::string out;
    for (std::size_t i = 0; i < piece.size(); ++i) {
      if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
        out += ' ';
        i += 2;
      } else {
        out += piece[i];
      }
    }
    return out;
  };
  for (std::int32_t id = 0; id < target.vocab_size(); ++id) {
    const bool sd = special(draft, id), st = special(target, id);
    if (sd && st) continue;  // both special: their texts are each file's own spelling
    if (sd != st || text(draft.piece(id)) != text(target.piece(id)))
      throw ConfigError(both + " have different vocabularies (token " + std::to_string(id) + " is '" +
                        printable_text(draft.piece(id)) + "' in the draft's, '" + printable_text(target.piece(id)) +
                        "' in the target's): speculative decoding needs the same tokens in both" + hint);
  }
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
  // Refused here, before any trace is begun (distribution() would say the same at the first round): the
  // selecting stage must declare an argmax or a draw (Sampler::selection), whatever its name.
  check_fixed_distribution(sampler.stages());
  sampler.bind(tokenizer);
  draft_.sampler.bind(tokenizer);
}

Summary SpeculativeEngine::generate(std::string_view prompt, const GenerateOptions& opt, RunHeader header, TraceSink& sink,
                                    const StreamFn& on_piece) {
  return generate(tok_.encode(prompt, tok_.add_bos(), /*eos=*/false), prompt, opt, std::move(header), sink, on_piece);
}

Summary SpeculativeEngine::generate(std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& opt,
                                    RunHeader header, TraceSink& sink, const StreamFn& on_piece) {
  SpeculativeStrategy strategy(draft_, k_);
  return run_strategy({target_, tok_, attn_, &chain_}, strategy, std::move(ids), prompt, opt, std::move(header), sink, on_piece);
}

void SpeculativeStrategy::check(const GenerateOptions& opt) const {
  if (opt.policy.kind != ContextPolicy::Stop && opt.policy.kind != ContextPolicy::Refuse)
    throw ConfigError("--context-policy " + opt.policy.to_string() +
                      " with a draft model: speculative decoding supports stop and refuse (the two caches would have to be cut alike)");
  if (!opt.forced.empty()) throw ConfigError("--replay with a draft model: teacher forcing replaces the tokens speculation decides");
  if (opt.watch.attention.on || opt.watch.lens != LensPoints::Off)
    throw ConfigError("--trace-attention and --trace-lens are not recorded with a draft model (a round's block holds positions not yet decided)");
}

void SpeculativeStrategy::describe(RunHeader& header) const {
  if (!header.speculative) header.speculative = SpeculativeSetup{draft_.path, "", k_};
  header.speculative->k = k_;
}

void SpeculativeStrategy::begin(DecodeRun& run) {
  const auto V = static_cast<std::size_t>(run.model.config().vocab_size);
  spec_ = SpeculativeSummary{};
  spec_.k = k_;
  draft_.attention.clear();
  draft_seed_ = run.opt.seed ^ 0x9E3779B97F4A7C15ULL;  // the draft's stages draw apart from the target's
  draft_.sampler.reset(draft_seed_);
  for (auto id : run.seq) draft_.sampler.accept(id);
  // Two generators: the draft's proposals, and the target's acceptance and residual draws, so that what
  // the draft draws never shifts the target's numbers.
  draft_rng_ = Rng(draft_seed_);
  rng_ = Rng(run.opt.seed);
  draft_limit_ = limit_of(draft_.model, draft_.attention);
  q_.assign(static_cast<std::size_t>(k_), std::vector<double>(V));
  p_.assign(V, 0.0);
  resid_.assign(V, 0.0);
  rows_.assign(static_cast<std::size_t>(k_ + 1) * V, 0.0f);
  order_.assign(V, 0);
  top_k_ = std::max(1, std::min(run.opt.watch.top_k, static_cast<int>(V)));
  argmax_ = run.chain->selects_argmax();
  step_ = 0;
  target_held_ = draft_held_ = -1;
}

void SpeculativeStrategy::end(DecodeRun& run) { run.sum.speculative = spec_; }

// One round: prefill on the first, then draft K tokens, verify them in one forward of the target, settle
// each position (accept, resample or the bonus), and roll both caches back past what was emitted.
bool SpeculativeStrategy::advance(DecodeRun& run) {
  std::vector<std::int32_t>& seq = run.seq;
  const int limit = run.limit;
  if (target_held_ < 0) prefill(run);
  const auto t0 = DecodeRun::Clock::now();
  const int P = static_cast<int>(seq.size()) - 1;  // the newest token, not yet fed to the target
  if (P >= limit) {
    run.sum.stop_reason = "context_full";
    return false;
  }
  // K for this round: room in both contexts, and no more than can still be emitted.
  int k = std::min({k_, limit - 1 - P, draft_limit_ - P, run.opt.max_tokens - run.sum.generated - 1});
  k = std::max(0, k);
  draft(run, P, k);
  verify(run, P, k);
  const int round = spec_.rounds - 1;

  // ---- ACCEPT OR RESAMPLE, position by position; the target's chain sees exactly the tokens emitted ----
  int accepted = 0;
  bool done = false;
  for (int i = 0; i <= k; ++i)
    if (!settle(run, P, i, k, round, i == 0 ? t0 : DecodeRun::Clock::now(), accepted, done)) break;
  spec_.accepted += accepted;
  run.decode_ms += DecodeRun::ms_since(t0);
  run.decode_units = spec_.tokens;
  if (done) return false;
  roll_back(run, k, accepted);
  return true;
}

// ---- PREFILL: every prompt token but the last through both models; the last one opens round 0 ----
void SpeculativeStrategy::prefill(DecodeRun& run) {
  t_start_ = DecodeRun::Clock::now();
  run.run_blocks(0, run.n_prompt - 1, false);
  run.run_blocks(draft_.model, draft_.attention, 0, std::min(run.n_prompt - 1, draft_limit_), false);
  target_held_ = run.n_prompt - 1;
  draft_held_ = std::min(run.n_prompt - 1, draft_limit_);
  run.prefill_ms = DecodeRun::ms_since(t_start_);
}

// ---- DRAFT: K tokens after position P, each drawn from the draft's chain distribution q (argmax for a
// greedy target: its own chain's selecting stage is not asked), into props_ and q_ ----
void SpeculativeStrategy::draft(DecodeRun& run, int P, int k) {
  const bool draft_argmax = argmax_;
  props_.clear();
  if (k > 0) {
    std::span<const float> dl = run.run_blocks(draft_.model, draft_.attention, draft_held_, P + 1, false);
    ++spec_.draft_forwards;
    draft_held_ = P + 1;
    for (int j = 0; j < k; ++j) {
      if (j > 0) {
        dl = draft_.model.forward(std::span(&props_.back().id, 1), P + j, draft_.attention);
        ++spec_.draft_forwards;
        ++draft_held_;
      }
      const Candidates& c = draft_.sampler.distribution(dl);
      std::vector<double>& qj = q_[static_cast<std::size_t>(j)];
      dense(c, draft_argmax, qj);
      const std::int32_t x = draft_argmax ? argmax_dense(qj) : draw_dense(qj, 1.0, draft_rng_.uniform());
      props_.push_back({x, static_cast<float>(qj[static_cast<std::size_t>(x)]), -1.0f, -1.0f, SpecProposal::Unchecked});
      draft_.sampler.accept(x);
    }
  }
  spec_.proposed += k;
}

// ---- VERIFY: the newest token and the K proposals through the target in one forward, at P; the
// logits of all K + 1 positions into rows_ ----
void SpeculativeStrategy::verify(DecodeRun& run, int P, int k) {
  const int V = run.model.config().vocab_size;
  std::vector<std::int32_t> block{run.seq.back()};
  for (const auto& x : props_) block.push_back(x.id);
  run.model.forward(block, P, run.attn);
  target_held_ = P + k + 1;
  for (int i = 0; i <= k; ++i) run.model.block_logits(i, &rows_[static_cast<std::size_t>(i) * static_cast<std::size_t>(V)]);
  ++spec_.rounds;
}

// Position i of the round (at P + i, begun at ti): the target's distribution there, the token it decides
// (proposal i accepted or resampled, or the bonus after K acceptances), its trace step, and the token
// emitted. False when the round ends here; `done` when generation ends.
bool SpeculativeStrategy::settle(DecodeRun& run, int P, int i, int k, int round, DecodeRun::Clock::time_point ti, int& accepted,
                                 bool& done) {
  const int V = run.model.config().vocab_size;
  const std::span<const float> logits(&rows_[static_cast<std::size_t>(i) * static_cast<std::size_t>(V)], static_cast<std::size_t>(V));
  const Candidates& c = run.chain->distribution(logits, run.rec.stage_observer());
  dense(c, argmax_, p_);
  SpeculativeStep sp;
  sp.round = round;
  sp.index = i;
  std::int32_t token = -1;
  float u_draw = -1;
  if (i < k) {
    token = judge(i, sp, u_draw);
    accepted += std::string_view(sp.outcome) == "accepted";
  } else {
    // Every proposal accepted: the bonus token, from p at the position after the last of them.
    if (argmax_) {
      token = argmax_dense(p_);
    } else {
      u_draw = rng_.uniform();
      token = draw_dense(p_, 1.0, u_draw);
    }
    sp.outcome = "bonus";
  }
  // The round ends here when this token is not an accepted proposal, when it ends generation, or
  // when it is the last one max_tokens allows: this step then carries the round's verdicts.
  sp.last = i == k || std::string_view(sp.outcome) != "accepted" || run.is_stop(token) ||
            run.sum.generated + 1 >= run.opt.max_tokens;
  if (sp.last) {
    sp.proposals = props_;
    sp.accepted = accepted;
  }
  ++spec_.tokens;
  record_step(run, P + i, logits, token, u_draw, ti, sp);
  // ---- the loop's shared step: a stop token ends it unstreamed; else stream, accept, count ----
  if (!run.emit(run.seq.back(), token)) {
    done = true;
    return false;
  }
  run.seq.push_back(token);
  return !sp.last;
}

// Proposal i against the target's p_: accepted with probability min(1, p(x)/q(x)) (for a greedy target,
// when it is p's argmax), else a token resampled from the residual. Sets its verdict and sp's outcome.
std::int32_t SpeculativeStrategy::judge(int i, SpeculativeStep& sp, float& u_draw) {
  SpecProposal& x = props_[static_cast<std::size_t>(i)];
  const std::vector<double>& qi = q_[static_cast<std::size_t>(i)];
  const double px = p_[static_cast<std::size_t>(x.id)], qx = qi[static_cast<std::size_t>(x.id)];
  x.p = static_cast<float>(px);
  bool accept;
  if (argmax_) {
    accept = px > 0;  // one-hot p: the proposal is the target's argmax
  } else {
    x.u = rng_.uniform();
    accept = static_cast<double>(x.u) * qx < px;  // u < p(x)/q(x): probability min(1, p/q)
  }
  x.verdict = accept ? SpecProposal::Accepted : SpecProposal::Rejected;
  sp.draft = &x;
  if (accept) {
    sp.outcome = "accepted";
    return x.id;
  }
  const std::int32_t token = resample(qi, u_draw);
  sp.outcome = "resampled";
  sp.residual = residual_top_;
  return token;
}

// The trace step of a decided token at position pos, with its speculative record; the first is the prefill step.
void SpeculativeStrategy::record_step(DecodeRun& run, int pos, std::span<const float> logits, std::int32_t token, float u_draw,
                                      DecodeRun::Clock::time_point ti, const SpeculativeStep& sp) {
  const std::vector<std::int32_t>& seq = run.seq;
  StepFacts f;
  f.phase = step_ == 0 ? "prefill" : "decode";
  f.step = step_;
  f.pos = pos;
  f.input = step_ == 0 ? std::span<const std::int32_t>(seq) : std::span<const std::int32_t>(&seq.back(), 1);
  f.logits = logits;
  f.pick = {token, u_draw};
  f.token = token;
  f.ms = DecodeRun::ms_since(ti);
  StepEvent ev = run.rec.record(f, run.attn);
  ev.chain_prob = static_cast<float>(p_[static_cast<std::size_t>(token)]);
  ev.speculative = &sp;
  run.sink.step(ev);
  if (step_ == 0) run.sum.ttft_ms = DecodeRun::ms_since(t_start_);
  ++step_;
}

// ---- ROLL BACK: positions past what was emitted are forgotten (the next write lands there), and the
// draft's chain is brought to the emitted sequence ----
void SpeculativeStrategy::roll_back(DecodeRun& run, int k, int accepted) {
  const std::vector<std::int32_t>& seq = run.seq;
  const int held = static_cast<int>(seq.size()) - 1;  // positions 0..held-1 hold emitted tokens; seq[held] is new
  if (target_held_ > held) run.attn.remove(held, target_held_), target_held_ = held;
  if (draft_held_ > held) draft_.attention.remove(held, draft_held_), draft_held_ = held;
  if (accepted == k) {
    draft_.sampler.accept(seq.back());  // it saw every proposal; the bonus is news to it
  } else {
    // Its chain accepted proposals the target refused: start it over on the emitted sequence.
    draft_.sampler.reset(draft_seed_ + static_cast<std::uint64_t>(spec_.rounds));
    for (auto id : seq) draft_.sampler.accept(id);
  }
}

// On rejection: a token from the residual r = norm(max(0, p − q)), what p holds beyond what the draft
// already offered (its argmax for a greedy target); its top entries kept for the step's record.
std::int32_t SpeculativeStrategy::resample(const std::vector<double>& qi, float& u_draw) {
  double total = 0;
  for (std::size_t v = 0; v < p_.size(); ++v) total += resid_[v] = std::max(0.0, p_[v] - qi[v]);
  if (!(total > 0)) resid_ = p_, total = std::accumulate(p_.begin(), p_.end(), 0.0);  // rounding: p and q equal
  std::int32_t token;
  if (argmax_) {
    token = argmax_dense(resid_);
  } else {
    u_draw = rng_.uniform();
    token = draw_dense(resid_, total, u_draw);
  }
  std::iota(order_.begin(), order_.end(), 0);
  const auto n = static_cast<std::size_t>(top_k_);
  std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n), order_.end(),
                    [&](std::int32_t a, std::int32_t b) { return resid_[a] > resid_[b] || (resid_[a] == resid_[b] && a < b); });
  residual_top_.clear();
  for (std::size_t j = 0; j < n && resid_[order_[j]] > 0; ++j)
    residual_top_.push_back({order_[j], 0.0f, static_cast<float>(resid_[order_[j]] / total)});
  return token;
}

}  // namespace glassbox
