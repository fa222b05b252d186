// The engine loop, as the lesson draws it: tokenize, PREFILL the prompt, then DECODE one token per step.
#include "glassbox/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"

namespace glassbox {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

Engine::Engine(Transformer& model, const Tokenizer& tokenizer, Attention& attention, SamplerChain& sampler)
    : model_(model), tok_(tokenizer), attn_(attention), sampler_(sampler) {
  const auto V = static_cast<std::size_t>(model.config().vocab_size);
  probs_.resize(V);
  order_.resize(V);
}

Summary Engine::generate(std::string_view prompt, const GenerateOptions& opt, RunHeader header, TraceSink& sink,
                         const StreamFn& on_piece) {
  const Config& cfg = model_.config();
  if (opt.max_tokens < 0) throw ConfigError("max_tokens = " + std::to_string(opt.max_tokens) + " (expected >= 0)");

  // ---- TOKENIZE ----
  std::vector<std::int32_t> ids = tok_.encode(prompt, /*bos=*/true, /*eos=*/false);
  if (static_cast<int>(ids.size()) > cfg.seq_len)
    throw InputError("prompt is " + std::to_string(ids.size()) + " tokens but the model's context holds " +
                     std::to_string(cfg.seq_len));
  for (auto id : ids)
    if (id < 0 || id >= cfg.vocab_size)
      throw InputError("tokenizer produced id " + std::to_string(id) + ", outside the model's vocabulary of " +
                       std::to_string(cfg.vocab_size));
  header.prompt = std::string(prompt);
  header.prompt_ids = ids;
  header.max_tokens = opt.max_tokens;
  header.level = opt.level;
  sink.header(header);

  attn_.clear();
  sampler_.reset(opt.seed);
  for (auto id : ids) sampler_.accept(id);
  const int top_k = std::max(0, std::min(opt.trace_top_k, cfg.vocab_size));
  top_.resize(top_k);
  const bool full = opt.level == TraceLevel::Full;

  Summary sum;
  const auto t_start = Clock::now();
  double prefill_ms = 0, decode_ms = 0;
  int decode_steps = 0;

  std::int32_t sampled = -1;  // the chain's own pick at the current step (a forced token may replace it)
  // One step's report: the raw distribution p = softmax(logits), its entropy and top-k.
  auto report = [&](const char* phase, int step, int pos, std::span<const std::int32_t> input,
                    std::span<const float> logits, std::int32_t token, std::int32_t prev, double ms) {
    StepEvent e;
    if (opt.report_distribution) {
      // p_i = exp(l_i - m) / S with m = max logit, S = Σ exp(l_j - m): one exp per logit.
      std::iota(order_.begin(), order_.end(), 0);
      std::partial_sort(order_.begin(), order_.begin() + std::max(top_k, 1), order_.end(), [&](std::int32_t a, std::int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
      const float m = logits[order_[0]];
      double sum = 0;
      for (std::size_t i = 0; i < logits.size(); ++i) sum += probs_[i] = std::exp(logits[i] - m);
      const double log_sum = std::log(sum);
      double mean_shifted = 0;  // Σ p_i (l_i - m)
      for (std::size_t i = 0; i < logits.size(); ++i) {
        probs_[i] = static_cast<float>(probs_[i] / sum);
        mean_shifted += static_cast<double>(probs_[i]) * (logits[i] - m);
      }
      for (int i = 0; i < top_k; ++i) top_[i] = {order_[i], logits[order_[i]], probs_[order_[i]]};
      e.prob = probs_[token];
      e.logprob = static_cast<float>(logits[token] - m - log_sum);  // exact even where prob underflows
      e.entropy = static_cast<float>(log_sum - mean_shifted);      // H = -Σ p log p
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
    e.kv = attn_.usage();
    e.ms = ms;
    sink.step(e);
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
  auto is_stop = [&](std::int32_t t) {
    return (opt.stop_at_eos && t == tok_.eos_id()) || (opt.stop_at_bos && t == tok_.bos_id());
  };

  if (opt.max_tokens == 0) {
    sum.stop_reason = "max_tokens";
    sink.summary(sum);
    return sum;
  }

  // ---- PREFILL: every prompt position through the model, in blocks; keep the last distribution ----
  const int n_prompt = static_cast<int>(ids.size());
  std::span<const float> logits;
  for (int p = 0; p < n_prompt; p += model_.max_block()) {
    const int n = std::min(model_.max_block(), n_prompt - p);
    logits = model_.forward(std::span(ids).subspan(p, n), p, attn_);
  }
  int pos = n_prompt - 1;  // position of the last token fed
  std::int32_t next = choose(logits, 0);
  prefill_ms = ms_since(t_start);
  sum.ttft_ms = prefill_ms;
  report("prefill", 0, pos, ids, logits, next, ids.back(), prefill_ms);

  // ---- DECODE: stream the chosen token, feed it back, get the next distribution ----
  std::int32_t token = ids.back();
  for (int step = 1;; ++step) {
    if (is_stop(next)) { sum.stop_reason = "stop_token"; break; }
    on_piece(tok_.decode(token, next));
    sampler_.accept(next);
    token = next;
    ++sum.generated;
    if (sum.generated >= opt.max_tokens) { sum.stop_reason = "max_tokens"; break; }
    if (pos + 1 >= cfg.seq_len) { sum.stop_reason = "context_full"; break; }

    const auto t0 = Clock::now();
    ++pos;
    logits = model_.forward(std::span(&token, 1), pos, attn_);
    next = choose(logits, step);
    const double ms = ms_since(t0);
    decode_ms += ms;
    ++decode_steps;
    report("decode", step, pos, std::span(&token, 1), logits, next, token, ms);
  }

  sum.prefill_tok_s = prefill_ms > 0 ? n_prompt / (prefill_ms / 1000.0) : 0;
  sum.decode_tok_s = decode_ms > 0 ? decode_steps / (decode_ms / 1000.0) : 0;
  sink.summary(sum);
  return sum;
}

}  // namespace glassbox
