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

AttentionTrace parse_attention_trace(const std::string& text) {
  AttentionTrace t;
  t.on = true;
  if (text == "all") return t;
  const auto colon = text.find(':');
  char *e1 = nullptr, *e2 = nullptr;
  const std::string a = text.substr(0, colon), b = colon == std::string::npos ? "" : text.substr(colon + 1);
  const long l = std::strtol(a.c_str(), &e1, 10), h = std::strtol(b.c_str(), &e2, 10);
  if (colon == std::string::npos || a.empty() || b.empty() || *e1 || *e2 || l < 0 || h < 0 || l > 1 << 20 || h > 1 << 20)
    throw ConfigError("trace-attention '" + text + "' (expected LAYER:HEAD, e.g. 0:1, or all)");
  t.layer = static_cast<int>(l);
  t.head = static_cast<int>(h);
  return t;
}

namespace {
// Keeps the newest position's weights for the (layer, head) pairs asked for, one step at a time.
class WeightsCollector final : public AttentionObserver {
 public:
  explicit WeightsCollector(AttentionTrace t) : t_(t) {}
  bool wants(int layer, int head) const override {
    return (t_.layer < 0 || t_.layer == layer) && (t_.head < 0 || t_.head == head);
  }
  void weights(int layer, int head, int pos, int first_pos, std::span<const float> w) override {
    rows.push_back({layer, head, pos, first_pos, std::vector<float>(w.begin(), w.end())});
  }
  std::vector<AttentionRow> rows;

 private:
  AttentionTrace t_;
};
}  // namespace

Engine::Engine(Transformer& model, const Tokenizer& tokenizer, KvStore& attention, SamplerChain& sampler)
    : model_(model), tok_(tokenizer), attn_(attention), sampler_(sampler) {
  const auto V = static_cast<std::size_t>(model.config().vocab_size);
  probs_.resize(V);
  order_.resize(V);
  top_scratch_.resize(V + V / 16);
  sampler_.bind(tokenizer);  // stages that read token texts (dry's sequence breakers) get the vocabulary
}

int Engine::context_limit() const {
  const int ctx = model_.config().seq_len;
  return attn_.evicts() ? ctx : std::min(ctx, attn_.capacity());
}

Summary Engine::generate(std::string_view prompt, const GenerateOptions& opt, RunHeader header, TraceSink& sink,
                         const StreamFn& on_piece) {
  // ---- TOKENIZE ----
  // BOS only where the vocabulary asks for it (GPT-2 and Qwen say add_bos_token = false)
  return generate(tok_.encode(prompt, tok_.add_bos(), /*eos=*/false), prompt, opt, std::move(header), sink, on_piece);
}

Summary Engine::generate(std::vector<std::int32_t> ids, std::string_view prompt, const GenerateOptions& opt, RunHeader header,
                         TraceSink& sink, const StreamFn& on_piece) {
  const Config& cfg = model_.config();
  if (opt.max_tokens < 0) throw ConfigError("max_tokens = " + std::to_string(opt.max_tokens) + " (expected >= 0)");
  const int limit = context_limit();
  const ContextPolicy& policy = opt.policy;
  const std::string where_limit = limit < cfg.seq_len ? "attention module '" + attn_.name() + "' holds " + std::to_string(limit) + " positions"
                                                      : "the model's context holds " + std::to_string(limit);
  if (opt.trace_attention.on &&
      (opt.trace_attention.layer >= cfg.n_layers || opt.trace_attention.head >= cfg.n_heads))
    throw ConfigError("trace-attention " + std::to_string(opt.trace_attention.layer) + ":" + std::to_string(opt.trace_attention.head) +
                      " is outside the model's " + std::to_string(cfg.n_layers) + " layers x " + std::to_string(cfg.n_heads) + " heads");

  if (policy.kind == ContextPolicy::Shift && !model_.shift_supported())
    throw ConfigError("--context-policy shift re-rotates keys, but architecture " + cfg.architecture +
                      " has learned absolute positions: there is nothing to re-rotate (use --context-policy truncate-left)");
  if (ids.empty()) throw InputError("the prompt encodes to no tokens and the tokenizer adds no BOS: nothing to start from");
  for (auto id : ids)
    if (id < 0 || id >= cfg.vocab_size)
      throw InputError("tokenizer produced id " + std::to_string(id) + ", outside the model's vocabulary of " +
                       std::to_string(cfg.vocab_size));
  const int n_prompt_given = static_cast<int>(ids.size());
  // ---- CONTEXT POLICY on the prompt: before any work ----
  if (policy.kind == ContextPolicy::Refuse && static_cast<long long>(n_prompt_given) + opt.max_tokens > limit)
    throw InputError("prompt is " + std::to_string(n_prompt_given) + " tokens and up to " + std::to_string(opt.max_tokens) +
                     " more may be generated, but " + where_limit + " (--context-policy refuse)");
  if (n_prompt_given > limit && (policy.kind == ContextPolicy::Stop || policy.kind == ContextPolicy::Refuse))
    throw InputError("prompt is " + std::to_string(n_prompt_given) + " tokens but " + where_limit +
                     " (--context-policy truncate-left or shift drops the oldest tokens instead)");
  std::optional<PolicyEvent> prompt_drop;
  if (n_prompt_given > limit) {
    // Keep the head (BOS, or shift's n_keep) and the newest tokens; leave room to generate.
    // The kept head leaves at least one position for the newest token (a 1-position context keeps no BOS).
    const int head = std::min(policy.kind == ContextPolicy::Shift ? policy.n_keep : (ids[0] == tok_.bos_id() ? 1 : 0), limit - 1);
    const int room = std::max(1, std::min(opt.max_tokens, limit / 2));
    const int keep_tail = std::max(1, limit - room - head);
    PolicyEvent ev;
    ev.policy = policy.kind == ContextPolicy::Shift ? "shift" : "truncate-left";
    ev.step = 0;
    ev.limit = limit;
    ev.dropped_from = head;
    ev.dropped_to = n_prompt_given - keep_tail;
    ev.dropped_ids.assign(ids.begin() + ev.dropped_from, ids.begin() + ev.dropped_to);
    ids.erase(ids.begin() + ev.dropped_from, ids.begin() + ev.dropped_to);
    ev.kept = static_cast<int>(ids.size());
    ev.detail = "prompt of " + std::to_string(n_prompt_given) + " tokens did not fit: kept the first " + std::to_string(head) +
                " and the newest " + std::to_string(keep_tail);
    prompt_drop = std::move(ev);
  }
  header.prompt = std::string(prompt);
  header.prompt_ids.assign(ids.begin(), ids.end());
  if (prompt_drop) {  // the header keeps the prompt as given; the event says what the prefill leaves out
    header.prompt_ids.insert(header.prompt_ids.begin() + prompt_drop->dropped_from, prompt_drop->dropped_ids.begin(),
                             prompt_drop->dropped_ids.end());
  }
  header.max_tokens = opt.max_tokens;
  header.level = opt.level;
  sink.header(header);
  Summary sum;
  if (opt.pruned) {
    sink.policy(*opt.pruned);
    ++sum.policy_firings;
  }
  if (prompt_drop) {
    sink.policy(*prompt_drop);
    ++sum.policy_firings;
  }

  attn_.clear();
  sampler_.reset(opt.seed);
  for (auto id : ids) sampler_.accept(id);
  const int top_k = std::max(0, std::min(opt.trace_top_k, cfg.vocab_size));
  top_.resize(top_k);
  const bool full = opt.level == TraceLevel::Full;
  std::unique_ptr<WeightsCollector> observer;  // installed only when a trace asks for the weights
  if (opt.trace_attention.on) observer = std::make_unique<WeightsCollector>(opt.trace_attention);

  const auto t_start = Clock::now();
  double prefill_ms = 0, decode_ms = 0;
  int decode_steps = 0;
  std::int64_t dots = 0;  // attention work of the current step

  std::int32_t sampled = -1;  // the chain's own pick at the current step (a forced token may replace it)
  // One step's report: the raw distribution p = softmax(logits), its entropy and top-k.
  auto report = [&](const char* phase, int step, int pos, std::span<const std::int32_t> input,
                    std::span<const float> logits, std::int32_t token, std::int32_t prev, double ms) {
    StepEvent e;
    if (opt.report_distribution) {
      // top-k, higher logit first, then lower id; best[0] is the max logit m. p_i = w_i / S with
      // w_i = exp(l_i - m): one exp per logit. The sampler chain computed exactly these when it
      // recorded its stages (beside them, on a pool worker); reuse them then.
      const std::int32_t* best = order_.data();
      std::span<const float> w = sampler_.raw_weights();
      SoftmaxStats st;
      if (w.size() == logits.size()) {
        st = sampler_.raw_stats();
        best = sampler_.raw_top().data();
      } else {
        top_logits(logits, static_cast<std::size_t>(std::max(top_k, 1)), order_.data(), top_scratch_.data());
        st = softmax_weights(logits, std::span(probs_).first(logits.size()));
        w = std::span(probs_).first(logits.size());
      }
      const float m = logits[best[0]];
      for (int i = 0; i < top_k; ++i) top_[i] = {best[i], logits[best[i]], st.prob(w[best[i]])};
      e.prob = st.prob(w[token]);
      e.logprob = static_cast<float>(logits[token] - m - std::log(st.sum));  // exact even where prob underflows
      e.entropy = static_cast<float>(st.entropy());                       // H = -Σ p log p
      e.top = top_;
    }
    e.phase = phase;
    e.step = step;
    e.pos = pos;
    e.input_ids = input;
    e.token = token;
    e.token_text = tok_.decode(prev, token);
    e.chain_prob = sampler_.chosen_prob();
    if (full) e.logits = logits;
    e.stages = sampler_.stage_records();
    e.draw_u = sampler_.draw_u();
    e.sampled = sampled;
    e.forced = step < static_cast<int>(opt.forced.size());
    attn_.describe(kv_);  // in place: a reused record allocates nothing
    e.kv = &kv_;
    e.attention_dots = dots;
    if (observer) e.attention = observer->rows;
    e.ms = ms;
    sink.step(e);
    if (observer) observer->rows.clear();
  };

  // The token appended after a step: the sampled one, or the forced one when replaying.
  auto choose = [&](std::span<const float> logits, int step) {
    sampled = sampler_.sample(logits, opt.record_stages, top_k);
    if (step < static_cast<int>(opt.forced.size())) {
      const std::int32_t f = opt.forced[step];
      if (f < 0 || f >= cfg.vocab_size)
        throw InputError("forced token " + std::to_string(f) + " at step " + std::to_string(step) +
                         " is outside the model's vocabulary of " + std::to_string(cfg.vocab_size));
      return f;
    }
    return sampled;
  };
  // End of generation: EOS and the vocabulary's other end-of-generation ids (<|eot_id|>, <|im_end|>,
  // <end_of_turn>, ...), and BOS for llama2.c-trained models that separate texts with it.
  const std::vector<std::int32_t> eog = tok_.eog_ids();
  auto is_stop = [&](std::int32_t t) {
    if (opt.stop_at_eos && (t == tok_.eos_id() || std::find(eog.begin(), eog.end(), t) != eog.end())) return true;
    return opt.stop_at_bos && t == tok_.bos_id();
  };

  if (opt.max_tokens == 0) {
    sum.stop_reason = "max_tokens";
    sink.summary(sum);
    return sum;
  }

  // The tokens in the context, at positions 0 .. seq.size()-1 (what the store holds, or for a
  // module that keeps nothing, what must be recomputed).
  std::vector<std::int32_t> seq = ids;
  seq.reserve(static_cast<std::size_t>(limit) + 1);
  // Runs seq[from..) at positions from.. through the model in blocks; the last block's last
  // position is observed. Adds the attention work to `dots`.
  auto run_blocks = [&](int from) {
    std::span<const float> out;
    const int n_seq = static_cast<int>(seq.size());
    for (int p = from; p < n_seq; p += model_.max_block()) {
      const int n = std::min(model_.max_block(), n_seq - p);
      out = model_.forward(std::span(seq).subspan(p, n), p, attn_, p + n == n_seq ? observer.get() : nullptr);
      dots += model_.attention_dots();
    }
    return out;
  };

  // ---- PREFILL: every prompt position through the model, in blocks; keep the last distribution ----
  const int n_prompt = static_cast<int>(ids.size());
  std::span<const float> logits = run_blocks(0);
  int pos = n_prompt - 1;  // position of the last token fed
  std::int32_t next = choose(logits, 0);
  report("prefill", 0, pos, ids, logits, next, ids.back(), ms_since(t_start));
  // The rates count whole steps: the model, the sampler and the step's record for the trace.
  prefill_ms = ms_since(t_start);
  sum.ttft_ms = prefill_ms;

  // ---- DECODE: stream the chosen token, feed it back, get the next distribution ----
  std::int32_t token = ids.back();
  for (int step = 1;; ++step) {
    if (is_stop(next)) {
      sum.stop_reason = "stop_token";
      sum.stop_token = next;
      sum.stop_token_text = std::string(tok_.piece(next));
      break;
    }
    try {
      on_piece(tok_.decode(token, next));
    } catch (const StopGeneration&) {
      sum.stop_reason = "stop_text";
      break;
    }
    sampler_.accept(next);
    token = next;
    ++sum.generated;
    if (sum.generated >= opt.max_tokens) { sum.stop_reason = "max_tokens"; break; }

    const auto t0 = Clock::now();
    dots = 0;
    bool refill = !attn_.persistent();  // recompute: the whole sequence runs again every step
    if (pos + 1 >= limit) {
      // ---- CONTEXT FULL: the next token has no position left ----
      if (policy.kind == ContextPolicy::Stop || policy.kind == ContextPolicy::Refuse) { sum.stop_reason = "context_full"; break; }
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
        if (attn_.persistent()) model_.remove_positions(attn_, ev.dropped_from, ev.dropped_to);
        ev.detail = "kept the first " + std::to_string(keep) + ", dropped " + std::to_string(discard) + ", re-rotated the " +
                    std::to_string(n_past - keep - discard) + " later keys by -" + std::to_string(discard);
      } else {
        // The harness's way: drop the oldest tokens (BOS stays), then prefill what is left again.
        // As for the prompt: the head kept leaves something to drop (a 1-position context drops its BOS too).
        const int head = std::min(seq[0] == tok_.bos_id() ? 1 : 0, n_past - 1);
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
    }
    ++pos;
    seq.push_back(token);
    if (refill) {
      attn_.clear();
      logits = run_blocks(0);
    } else {
      logits = run_blocks(pos);
    }
    next = choose(logits, step);
    report("decode", step, pos, std::span(&token, 1), logits, next, token, ms_since(t0));
    decode_ms += ms_since(t0);
    ++decode_steps;
  }
  // A sink that writes on another thread finishes the steps' records here: their time counts too.
  const auto t_flush = Clock::now();
  sink.flush();
  (decode_steps > 0 ? decode_ms : prefill_ms) += ms_since(t_flush);

  sum.prefill_tok_s = prefill_ms > 0 ? n_prompt / (prefill_ms / 1000.0) : 0;
  sum.decode_tok_s = decode_ms > 0 ? decode_steps / (decode_ms / 1000.0) : 0;
  sink.summary(sum);
  return sum;
}

}  // namespace glassbox
