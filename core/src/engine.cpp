// The engine loop, as the lesson draws it: tokenize, PREFILL the prompt, then DECODE one token per step.
#include "glassbox/engine.hpp"
#include "glassbox/strategy.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"

namespace glassbox {

std::string ContextPolicy::to_string() const {
  switch (kind) {
    case Refuse: return "refuse";
    case Stop: return "stop";
    case TruncateLeft: return "truncate-left";
    case Shift: return "shift:" + std::to_string(n_keep);
  }
  return "?";
}

ContextPolicy parse_context_policy(const std::string& text) {
  ContextPolicy p;
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  if (name == "refuse") p.kind = ContextPolicy::Refuse;
  else if (name == "stop") p.kind = ContextPolicy::Stop;
  else if (name == "truncate-left") p.kind = ContextPolicy::TruncateLeft;
  else if (name == "shift") p.kind = ContextPolicy::Shift;
  else throw ConfigError("context policy '" + text + "' (expected refuse, stop, truncate-left or shift[:n_keep])");
  if (colon != std::string::npos) {
    const std::string v = text.substr(colon + 1);
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (p.kind != ContextPolicy::Shift || v.empty() || *end || n < 0 || n > (1 << 24))
      throw ConfigError("context policy '" + text + "': only shift takes a value, a count of tokens to keep (shift:N, N >= 0)");
    p.n_keep = static_cast<int>(n);
  }
  return p;
}

Engine::Engine(Transformer& model, const Tokenizer& tokenizer, KvStore& attention, SamplerChain& sampler)
    : model_(model), tok_(tokenizer), attn_(attention), sampler_(sampler) {
  sampler_.bind(tokenizer);  // stages that read token texts (dry's sequence breakers) get the vocabulary
}

int Engine::context_limit() const {
  const int ctx = model_.config().seq_len;
  return attn_.evicts() ? ctx : std::min(ctx, attn_.capacity());
}

// ---- The shared steps every strategy uses ----

DecodeRun::DecodeRun(const RunParts& parts, const GenerateOptions& o, TraceSink& s, const StreamFn& f, int lim)
    : model(parts.model), tok(parts.tok), attn(parts.attn), chain(parts.chain), opt(o), sink(s), on_piece(f), limit(lim),
      rec(o.watch, parts.model, parts.tok, parts.chain),
      eog_(parts.tok.eog_ids()) {}

std::span<const float> DecodeRun::run_blocks(Transformer& m, KvStore& kv, int from, int to, bool observed, std::int64_t* dots) {
  std::span<const float> out;
  const int B = m.max_block();
  for (int p = from; p < to; p += B) {
    const int n = std::min(B, to - p);
    const bool watched = observed && p + n == to;
    out = m.forward(std::span(seq).subspan(static_cast<std::size_t>(p), static_cast<std::size_t>(n)), p, kv,
                    watched ? rec.attention_observer() : nullptr, watched ? rec.lens() : nullptr);
    if (dots) *dots += m.attention_dots();
  }
  return out;
}

bool DecodeRun::is_stop(std::int32_t t) const {
  if (opt.stop_at_eos && (t == tok.eos_id() || std::find(eog_.begin(), eog_.end(), t) != eog_.end())) return true;
  return opt.stop_at_bos && t == tok.bos_id();
}

bool DecodeRun::emit(std::int32_t prev, std::int32_t token) {
  if (is_stop(token)) {
    sum.stop_reason = "stop_token";
    sum.stop_token = token;
    sum.stop_token_text = std::string(tok.piece(token));
    return false;
  }
  try {
    on_piece(tok.decode(prev, token));
  } catch (const StopGeneration&) {
    sum.stop_reason = "stop_text";
    return false;
  }
  if (chain) chain->accept(token);
  ++sum.generated;
  if (sum.generated >= opt.max_tokens) {
    sum.stop_reason = "max_tokens";
    return false;
  }
  return true;
}

// ---- SAMPLED: the lesson's loop ----

void SampledStrategy::begin(DecodeRun&) {
  step_ = 0;
  prefill_at_ = 0;
  prefix_reused_ = 0;
  pass_rows_ = 1;
  pos_ = -1;
  last_ = next_ = -1;
  dots_ = 0;
}

// distribution -> sampler chain -> the token appended (the chain's pick, or the forced one when replaying);
// then the step's record goes to the sinks.
void SampledStrategy::choose_and_report(DecodeRun& run, const char* phase, std::span<const std::int32_t> input,
                                        std::span<const float> logits, DecodeRun::Clock::time_point t0) {
  const SampleResult pick = run.chain->sample(logits, run.rec.stage_observer());
  const bool forced = step_ < static_cast<int>(run.opt.forced.size());
  next_ = pick.id;
  if (forced) {
    next_ = run.opt.forced[step_];
    if (next_ < 0 || next_ >= run.model.config().vocab_size)
      throw InputError("forced token " + std::to_string(next_) + " at step " + std::to_string(step_) +
                       " is outside the model's vocabulary of " + std::to_string(run.model.config().vocab_size));
  }
  StepFacts f;
  f.phase = phase;
  f.step = step_;
  f.pos = pos_;
  f.input = input;
  f.logits = logits;
  f.pick = pick;
  f.token = next_;
  f.forced = forced;
  f.attention_dots = dots_;
  f.batch = pass_rows_;
  f.prefix_reused = step_ == 0 ? prefix_reused_ : 0;
  f.ms = DecodeRun::ms_since(t0);
  run.sink.step(run.rec.record(f, run.attn));
}

// ---- CONTEXT FULL: the next token has no position left. Applies the policy; returns false when it says
// stop. Sets `refill` when what is left must run through the model again.
bool SampledStrategy::fit_context(DecodeRun& run, bool& refill) {
  const ContextPolicy& policy = run.opt.policy;
  if (policy.kind == ContextPolicy::Stop || policy.kind == ContextPolicy::Refuse) return false;
  std::vector<std::int32_t>& seq = run.seq;
  PolicyEvent ev;
  ev.step = step_;
  ev.limit = run.limit;
  const int n_past = pos_ + 1;
  if (policy.kind == ContextPolicy::Shift) {
    // llama.cpp's context shift: keep the first n_keep, discard half of the rest, slide the
    // remainder down and re-rotate its keys; nothing is recomputed.
    const int keep = std::min(policy.n_keep, n_past - 1);
    const int discard = std::max(1, (n_past - keep) / 2);
    ev.policy = "shift";
    ev.dropped_from = keep;
    ev.dropped_to = keep + discard;
    if (run.attn.persistent()) run.model.remove_positions(run.attn, ev.dropped_from, ev.dropped_to);
    ev.detail = "kept the first " + std::to_string(keep) + ", dropped " + std::to_string(discard) + ", re-rotated the " +
                std::to_string(n_past - keep - discard) + " later keys by -" + std::to_string(discard);
  } else {
    // The harness's way: drop the oldest tokens (BOS stays), then prefill what is left again.
    // As for the prompt: the head kept leaves something to drop (a 1-position context drops its BOS too).
    const int head = std::min(seq[0] == run.tok.bos_id() ? 1 : 0, n_past - 1);
    const int discard = std::max(1, (n_past - head) / 2);
    ev.policy = "truncate-left";
    ev.dropped_from = head;
    ev.dropped_to = head + discard;
    ev.detail = "dropped the oldest " + std::to_string(discard) + " tokens and prefilled the " +
                std::to_string(n_past - discard) + " left again";
    refill = true;
  }
  ev.dropped_ids.assign(seq.begin() + ev.dropped_from, seq.begin() + ev.dropped_to);
  seq.erase(seq.begin() + ev.dropped_from, seq.begin() + ev.dropped_to);
  pos_ -= ev.dropped_to - ev.dropped_from;
  ev.kept = static_cast<int>(seq.size());
  run.sink.policy(ev);
  ++run.sum.policy_firings;
  return true;
}

bool SampledStrategy::advance(DecodeRun& run) {
  BatchRow row;
  switch (begin_step(run, row)) {
    case Step::Ended: return false;
    case Step::Done: return true;
    case Step::Forward: break;
  }
  // one token at one position: run_blocks' single block, observed
  end_step(run, run.run_blocks(row.pos, row.pos + 1, true, &dots_), 0);
  return true;
}

void SampledStrategy::reuse_prefix(DecodeRun& run, int positions) {
  if (step_ != 0 || prefill_at_ != 0)
    throw InputError("reuse_prefix: the run's prefill has begun (a prefix is reused only before it)");
  if (positions < 0 || positions >= static_cast<int>(run.seq.size()))
    throw InputError("reuse_prefix: " + std::to_string(positions) + " positions of a " + std::to_string(run.seq.size()) +
                     "-token prompt (expected 0.." + std::to_string(run.seq.size() - 1) + ")");
  prefill_at_ = prefix_reused_ = positions;
}

SampledStrategy::Step SampledStrategy::begin_step(DecodeRun& run, BatchRow& row) {
  if (step_ == 0) {
    // ---- PREFILL: every prompt position through the model, in blocks; the last distribution picks ----
    // (Chunked, one block per call: a batch's other runs decode between the blocks. The blocks are the same
    // either way, so are the results.)
    const int n = static_cast<int>(run.seq.size());
    if (prefill_at_ == prefix_reused_) {
      prefill_t0_ = DecodeRun::Clock::now();
      dots_ = 0;
    }
    const int to = chunked_ ? std::min(n, prefill_at_ + run.model.max_block()) : n;
    const std::span<const float> logits = run.run_blocks(prefill_at_, to, to == n, &dots_);
    prefill_at_ = to;
    if (to < n) return Step::Done;  // more of the prompt at the next call
    const auto t0 = prefill_t0_;
    pos_ = n - 1;
    last_ = run.seq.back();
    choose_and_report(run, "prefill", run.seq, logits, t0);
    // The rates count whole steps: the model, the sampler and the step's record for the trace.
    run.prefill_ms = DecodeRun::ms_since(t0);
    run.sum.ttft_ms = run.prefill_ms;
    ++step_;
    return Step::Done;
  }
  // ---- DECODE one step: stream the chosen token, feed it back, get the next distribution and choose ----
  if (!run.emit(last_, next_)) return Step::Ended;
  last_ = next_;
  t0_ = DecodeRun::Clock::now();
  dots_ = 0;
  bool refill = !run.attn.persistent();  // recompute: the whole sequence runs again every step
  if (pos_ + 1 >= run.limit && !fit_context(run, refill)) {
    run.sum.stop_reason = "context_full";
    return Step::Ended;
  }
  ++pos_;
  run.seq.push_back(last_);
  if (refill) {
    run.attn.clear();
    end_step(run, run.run_blocks(0, static_cast<int>(run.seq.size()), true, &dots_), 0);
    return Step::Done;
  }
  row.token = last_;
  row.pos = pos_;
  row.kv = &run.attn;
  row.observer = run.rec.attention_observer();
  row.lens = run.rec.lens();
  return Step::Forward;
}

// the step's distribution -> the chain -> its record; the decode rate's parts
void SampledStrategy::end_step(DecodeRun& run, std::span<const float> logits, std::int64_t attention_dots, int pass_rows) {
  dots_ += attention_dots;
  pass_rows_ = pass_rows;
  choose_and_report(run, "decode", std::span(&last_, 1), logits, t0_);
  run.decode_ms += DecodeRun::ms_since(t0_);
  ++run.decode_units;
  ++step_;
}

Summary Engine::generate(std::string_view prompt, const GenerateOptions& opt, RunHeader header, TraceSink& sink,
                         const StreamFn& on_piece) {
  // ---- TOKENIZE ----
  // BOS only where the vocabulary asks for it (GPT-2 and Qwen say add_bos_token = false)
  return generate(tok_.encode(prompt, tok_.add_bos(), /*eos=*/false), prompt, opt, std::move(header), sink, on_piece);
}

namespace {
// ---- CONTEXT POLICY on the prompt, before any work: a prompt longer than `limit` keeps its head (BOS, or
// shift's n_keep) and its newest tokens, leaving room to generate. Returns what was dropped.
std::optional<PolicyEvent> fit_prompt(std::vector<std::int32_t>& ids, const GenerateOptions& opt, int limit,
                                      std::int32_t bos, const std::string& where_limit, bool truncates) {
  const ContextPolicy& policy = opt.policy;
  const int n_given = static_cast<int>(ids.size());
  if (policy.kind == ContextPolicy::Refuse && static_cast<long long>(n_given) + opt.max_tokens > limit)
    throw InputError("prompt is " + std::to_string(n_given) + " tokens and up to " + std::to_string(opt.max_tokens) +
                     " more may be generated, but " + where_limit + " (--context-policy refuse)");
  if (n_given <= limit) return std::nullopt;
  if (policy.kind == ContextPolicy::Stop || policy.kind == ContextPolicy::Refuse)
    throw InputError("prompt is " + std::to_string(n_given) + " tokens but " + where_limit +
                     (truncates ? " (--context-policy truncate-left or shift drops the oldest tokens instead)"
                                : " (this decoding strategy does not truncate: shorten the prompt)"));
  // The kept head leaves at least one position for the newest token (a 1-position context keeps no BOS).
  const int head = std::min(policy.kind == ContextPolicy::Shift ? policy.n_keep : (ids[0] == bos ? 1 : 0), limit - 1);
  const int room = std::max(1, std::min(opt.max_tokens, limit / 2));
  const int keep_tail = std::max(1, limit - room - head);
  PolicyEvent ev;
  ev.policy = policy.kind == ContextPolicy::Shift ? "shift" : "truncate-left";
  ev.step = 0;
  ev.limit = limit;
  ev.dropped_from = head;
  ev.dropped_to = n_given - keep_tail;
  ev.dropped_ids.assign(ids.begin() + ev.dropped_from, ids.begin() + ev.dropped_to);
  ids.erase(ids.begin() + ev.dropped_from, ids.begin() + ev.dropped_to);
  ev.kept = static_cast<int>(ids.size());
  ev.detail = "prompt of " + std::to_string(n_given) + " tokens did not fit: kept the first " + std::to_string(head) +
              " and the newest " + std::to_string(keep_tail);
  return ev;
}
}  // namespace

Summary Engine::generate(std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& opt, RunHeader header,
                         TraceSink& sink, const StreamFn& on_piece) {
  SampledStrategy sampled;
  return run_strategy({model_, tok_, attn_, &sampler_}, sampled, std::move(ids), prompt, opt, std::move(header), sink, on_piece);
}

// ---- THE ONE LOOP: every strategy's run, from the prompt's checks to the summary ----
Summary run_strategy(const RunParts& parts, Strategy& strategy, std::vector<std::int32_t> ids, std::string_view prompt,
                     const GenerateOptions& opt, RunHeader header, TraceSink& sink, const StreamFn& on_piece) {
  const std::unique_ptr<DecodeRun> run = open_run(parts, strategy, std::move(ids), prompt, opt, std::move(header), sink, on_piece);
  if (run->closed) return run->sum;

  // ---- PREFILL, then DECODE: the strategy decides tokens until it says the run has ended ----
  while (strategy.advance(*run)) {
  }
  return close_run(*run, strategy);
}

std::unique_ptr<DecodeRun> open_run(const RunParts& parts, Strategy& strategy, std::vector<std::int32_t> ids, std::string_view prompt,
                                    const GenerateOptions& opt, RunHeader header, TraceSink& sink, const StreamFn& on_piece) {
  const Config& cfg = parts.model.config();
  if (opt.max_tokens < 0) throw ConfigError("max_tokens = " + std::to_string(opt.max_tokens) + " (expected >= 0)");
  strategy.check(opt);
  const int limit = parts.attn.evicts() ? cfg.seq_len : std::min(cfg.seq_len, parts.attn.capacity());
  const std::string where_limit = limit < cfg.seq_len ? "attention module '" + parts.attn.name() + "' holds " + std::to_string(limit) + " positions"
                                                      : "the model's context holds " + std::to_string(limit);
  if (opt.policy.kind == ContextPolicy::Shift && !parts.model.shift_supported())
    throw ConfigError("--context-policy shift re-rotates keys, but architecture " + cfg.architecture +
                      " has learned absolute positions: there is nothing to re-rotate (use --context-policy truncate-left)");
  if (ids.empty()) throw InputError("the prompt encodes to no tokens and the tokenizer adds no BOS: nothing to start from");
  for (auto id : ids)
    if (id < 0 || id >= cfg.vocab_size)
      throw InputError("tokenizer produced id " + std::to_string(id) + ", outside the model's vocabulary of " +
                       std::to_string(cfg.vocab_size));
  auto owned = std::make_unique<DecodeRun>(parts, opt, sink, on_piece, limit);  // checks the watch spec against the model
  DecodeRun& run = *owned;
  const std::optional<PolicyEvent> prompt_drop = fit_prompt(ids, opt, limit, parts.tok.bos_id(), where_limit, strategy.truncates());

  header.prompt = std::string(prompt);
  header.prompt_ids.assign(ids.begin(), ids.end());
  if (prompt_drop) {  // the header keeps the prompt as given; the event says what the prefill leaves out
    header.prompt_ids.insert(header.prompt_ids.begin() + prompt_drop->dropped_from, prompt_drop->dropped_ids.begin(),
                             prompt_drop->dropped_ids.end());
  }
  header.max_tokens = opt.max_tokens;
  header.level = opt.watch.level;
  strategy.describe(header);
  sink.header(header);
  for (const auto* ev : {opt.pruned ? &*opt.pruned : nullptr, prompt_drop ? &*prompt_drop : nullptr}) {
    if (!ev) continue;
    sink.policy(*ev);
    ++run.sum.policy_firings;
  }

  parts.attn.clear();
  if (parts.chain) {
    parts.chain->reset(opt.seed);
    for (auto id : ids) parts.chain->accept(id);
  }
  run.n_prompt = static_cast<int>(ids.size());
  run.seq = std::move(ids);
  run.seq.reserve(static_cast<std::size_t>(limit) + 1);
  strategy.begin(run);
  if (opt.max_tokens == 0) {
    run.sum.stop_reason = "max_tokens";
    strategy.end(run);
    sink.summary(run.sum);
    run.closed = true;
  }
  return owned;
}

Summary close_run(DecodeRun& run, Strategy& strategy) {
  if (run.closed) return run.sum;
  // A sink that writes on another thread finishes the steps' records here: their time counts too.
  const auto t_flush = DecodeRun::Clock::now();
  run.sink.flush();
  (run.decode_units > 0 ? run.decode_ms : run.prefill_ms) += DecodeRun::ms_since(t_flush);
  Summary& sum = run.sum;
  sum.prefill_tok_s = run.prefill_ms > 0 ? run.n_prompt / (run.prefill_ms / 1000.0) : 0;
  sum.decode_tok_s = run.decode_ms > 0 ? run.decode_units / (run.decode_ms / 1000.0) : 0;
  strategy.end(run);
  run.sink.summary(sum);
  run.closed = true;
  return sum;
}

}  // namespace glassbox
