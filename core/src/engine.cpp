// The engine loop, as the lesson draws it: tokenize, PREFILL the prompt, then DECODE one token per step.
#include "glassbox/engine.hpp"

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

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

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

// One generate() call: the context, the step recorder and the summary, with the loop's parts as methods
// of readable length. generate() below reads like the lesson's diagram.
struct Engine::Run {
  Engine& e;
  const GenerateOptions& opt;
  TraceSink& sink;
  const StreamFn& on_piece;
  int limit;                         // positions the run may use
  StepRecorder rec;
  std::vector<std::int32_t> eog;     // end-of-generation ids
  // The tokens in the context, at positions 0 .. seq.size()-1 (what the store holds, or for a module
  // that keeps nothing, what must be recomputed).
  std::vector<std::int32_t> seq;
  int pos = -1;                      // position of the last token fed
  std::int32_t last = -1;            // the last token fed (the one the next piece is decoded after)
  std::int32_t next = -1;            // the token the last step chose
  std::int64_t dots = 0;             // attention work of the current step
  Summary sum;
  double prefill_ms = 0, decode_ms = 0;
  int decode_steps = 0;

  Run(Engine& eng, const GenerateOptions& o, TraceSink& s, const StreamFn& f, int lim)
      : e(eng), opt(o), sink(s), on_piece(f), limit(lim), rec(o.watch, eng.model_, eng.tok_, eng.sampler_),
        eog(eng.tok_.eog_ids()) {}

  // Runs seq[from..) at positions from.. through the model in blocks; the last block's last position is
  // the one observed (attention weights, lens). Adds the attention work to `dots`.
  std::span<const float> run_blocks(int from) {
    std::span<const float> out;
    const int n_seq = static_cast<int>(seq.size());
    const int B = e.model_.max_block();
    for (int p = from; p < n_seq; p += B) {
      const int n = std::min(B, n_seq - p);
      const bool observed = p + n == n_seq;
      out = e.model_.forward(std::span(seq).subspan(p, n), p, e.attn_, observed ? rec.attention_observer() : nullptr,
                             observed ? rec.lens() : nullptr);
      dots += e.model_.attention_dots();
    }
    return out;
  }

  // distribution -> sampler chain -> the token appended (the chain's pick, or the forced one when
  // replaying); then the step's record goes to the sinks.
  void choose_and_report(const char* phase, int step, std::span<const std::int32_t> input, std::span<const float> logits,
                         std::chrono::steady_clock::time_point t0) {
    const SampleResult pick = e.sampler_.sample(logits, rec.stage_observer());
    const bool forced = step < static_cast<int>(opt.forced.size());
    next = pick.id;
    if (forced) {
      next = opt.forced[step];
      if (next < 0 || next >= e.model_.config().vocab_size)
        throw InputError("forced token " + std::to_string(next) + " at step " + std::to_string(step) +
                         " is outside the model's vocabulary of " + std::to_string(e.model_.config().vocab_size));
    }
    StepFacts f;
    f.phase = phase;
    f.step = step;
    f.pos = pos;
    f.input = input;
    f.logits = logits;
    f.pick = pick;
    f.token = next;
    f.forced = forced;
    f.attention_dots = dots;
    f.ms = ms_since(t0);
    sink.step(rec.record(f, e.attn_));
  }

  // ---- PREFILL: every prompt position through the model, in blocks; the last distribution picks ----
  void prefill() {
    const auto t0 = Clock::now();
    const std::span<const float> logits = run_blocks(0);
    pos = static_cast<int>(seq.size()) - 1;
    last = seq.back();
    choose_and_report("prefill", 0, seq, logits, t0);
    // The rates count whole steps: the model, the sampler and the step's record for the trace.
    prefill_ms = ms_since(t0);
    sum.ttft_ms = prefill_ms;
  }

  // End of generation: EOS and the vocabulary's other end-of-generation ids (<|eot_id|>, <|im_end|>,
  // <end_of_turn>, ...), and BOS for llama2.c-trained models that separate texts with it.
  bool is_stop(std::int32_t t) const {
    if (opt.stop_at_eos && (t == e.tok_.eos_id() || std::find(eog.begin(), eog.end(), t) != eog.end())) return true;
    return opt.stop_at_bos && t == e.tok_.bos_id();
  }

  // ---- CONTEXT FULL: the next token has no position left. Applies the policy; returns false when it
  // says stop. Sets `refill` when what is left must run through the model again.
  bool fit_context(int step, bool& refill) {
    const ContextPolicy& policy = opt.policy;
    if (policy.kind == ContextPolicy::Stop || policy.kind == ContextPolicy::Refuse) return false;
    PolicyEvent ev;
    ev.step = step;
    ev.limit = limit;
    const int n_past = pos + 1;
    if (policy.kind == ContextPolicy::Shift) {
      // llama.cpp's context shift: keep the first n_keep, discard half of the rest, slide the
      // remainder down and re-rotate its keys; nothing is recomputed.
      const int keep = std::min(policy.n_keep, n_past - 1);
      const int discard = std::max(1, (n_past - keep) / 2);
      ev.policy = "shift";
      ev.dropped_from = keep;
      ev.dropped_to = keep + discard;
      if (e.attn_.persistent()) e.model_.remove_positions(e.attn_, ev.dropped_from, ev.dropped_to);
      ev.detail = "kept the first " + std::to_string(keep) + ", dropped " + std::to_string(discard) + ", re-rotated the " +
                  std::to_string(n_past - keep - discard) + " later keys by -" + std::to_string(discard);
    } else {
      // The harness's way: drop the oldest tokens (BOS stays), then prefill what is left again.
      // As for the prompt: the head kept leaves something to drop (a 1-position context drops its BOS too).
      const int head = std::min(seq[0] == e.tok_.bos_id() ? 1 : 0, n_past - 1);
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
    pos -= ev.dropped_to - ev.dropped_from;
    ev.kept = static_cast<int>(seq.size());
    sink.policy(ev);
    ++sum.policy_firings;
    return true;
  }

  // ---- DECODE one step: stream the chosen token, feed it back, get the next distribution and choose.
  // Returns false when generation ends (sum.stop_reason says why).
  bool decode_step(int step) {
    if (is_stop(next)) {
      sum.stop_reason = "stop_token";
      sum.stop_token = next;
      sum.stop_token_text = std::string(e.tok_.piece(next));
      return false;
    }
    try {
      on_piece(e.tok_.decode(last, next));
    } catch (const StopGeneration&) {
      sum.stop_reason = "stop_text";
      return false;
    }
    e.sampler_.accept(next);
    last = next;
    ++sum.generated;
    if (sum.generated >= opt.max_tokens) {
      sum.stop_reason = "max_tokens";
      return false;
    }

    const auto t0 = Clock::now();
    dots = 0;
    bool refill = !e.attn_.persistent();  // recompute: the whole sequence runs again every step
    if (pos + 1 >= limit && !fit_context(step, refill)) {
      sum.stop_reason = "context_full";
      return false;
    }
    ++pos;
    seq.push_back(last);
    if (refill) e.attn_.clear();
    const std::span<const float> logits = run_blocks(refill ? 0 : pos);
    choose_and_report("decode", step, std::span(&last, 1), logits, t0);
    decode_ms += ms_since(t0);
    ++decode_steps;
    return true;
  }
};

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
                                      std::int32_t bos, const std::string& where_limit) {
  const ContextPolicy& policy = opt.policy;
  const int n_given = static_cast<int>(ids.size());
  if (policy.kind == ContextPolicy::Refuse && static_cast<long long>(n_given) + opt.max_tokens > limit)
    throw InputError("prompt is " + std::to_string(n_given) + " tokens and up to " + std::to_string(opt.max_tokens) +
                     " more may be generated, but " + where_limit + " (--context-policy refuse)");
  if (n_given <= limit) return std::nullopt;
  if (policy.kind == ContextPolicy::Stop || policy.kind == ContextPolicy::Refuse)
    throw InputError("prompt is " + std::to_string(n_given) + " tokens but " + where_limit +
                     " (--context-policy truncate-left or shift drops the oldest tokens instead)");
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
  const Config& cfg = model_.config();
  if (opt.max_tokens < 0) throw ConfigError("max_tokens = " + std::to_string(opt.max_tokens) + " (expected >= 0)");
  const int limit = context_limit();
  const std::string where_limit = limit < cfg.seq_len ? "attention module '" + attn_.name() + "' holds " + std::to_string(limit) + " positions"
                                                      : "the model's context holds " + std::to_string(limit);
  if (opt.policy.kind == ContextPolicy::Shift && !model_.shift_supported())
    throw ConfigError("--context-policy shift re-rotates keys, but architecture " + cfg.architecture +
                      " has learned absolute positions: there is nothing to re-rotate (use --context-policy truncate-left)");
  if (ids.empty()) throw InputError("the prompt encodes to no tokens and the tokenizer adds no BOS: nothing to start from");
  for (auto id : ids)
    if (id < 0 || id >= cfg.vocab_size)
      throw InputError("tokenizer produced id " + std::to_string(id) + ", outside the model's vocabulary of " +
                       std::to_string(cfg.vocab_size));
  Run run(*this, opt, sink, on_piece, limit);  // checks the watch spec against the model
  const std::optional<PolicyEvent> prompt_drop = fit_prompt(ids, opt, limit, tok_.bos_id(), where_limit);

  header.prompt = std::string(prompt);
  header.prompt_ids.assign(ids.begin(), ids.end());
  if (prompt_drop) {  // the header keeps the prompt as given; the event says what the prefill leaves out
    header.prompt_ids.insert(header.prompt_ids.begin() + prompt_drop->dropped_from, prompt_drop->dropped_ids.begin(),
                             prompt_drop->dropped_ids.end());
  }
  header.max_tokens = opt.max_tokens;
  header.level = opt.watch.level;
  sink.header(header);
  for (const auto* ev : {opt.pruned ? &*opt.pruned : nullptr, prompt_drop ? &*prompt_drop : nullptr}) {
    if (!ev) continue;
    sink.policy(*ev);
    ++run.sum.policy_firings;
  }

  attn_.clear();
  sampler_.reset(opt.seed);
  for (auto id : ids) sampler_.accept(id);
  if (opt.max_tokens == 0) {
    run.sum.stop_reason = "max_tokens";
    sink.summary(run.sum);
    return run.sum;
  }
  run.seq = std::move(ids);
  run.seq.reserve(static_cast<std::size_t>(limit) + 1);
  const int n_prompt = static_cast<int>(run.seq.size());

  // ---- PREFILL ----
  run.prefill();
  // ---- DECODE ----
  for (int step = 1; run.decode_step(step); ++step) {
  }

  // A sink that writes on another thread finishes the steps' records here: their time counts too.
  const auto t_flush = Clock::now();
  sink.flush();
  (run.decode_steps > 0 ? run.decode_ms : run.prefill_ms) += ms_since(t_flush);
  Summary& sum = run.sum;
  sum.prefill_tok_s = run.prefill_ms > 0 ? n_prompt / (run.prefill_ms / 1000.0) : 0;
  sum.decode_tok_s = run.decode_ms > 0 ? run.decode_steps / (run.decode_ms / 1000.0) : 0;
  sink.summary(sum);
  return sum;
}

}  // namespace glassbox
