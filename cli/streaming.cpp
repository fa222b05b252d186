// run and chat's streaming helpers: --json token lines, the paced stream, the summary line.
#include "streaming.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "glassbox/traces/writer.hpp"
#include "interrupt.hpp"

namespace glassbox::cli {

std::string control_name(const Tokenizer& tok, std::int32_t id) {
  std::string name(tok.piece(id));
  const auto b = name.find_first_not_of(" \n\r\t"), e = name.find_last_not_of(" \n\r\t");
  return b == std::string::npos ? name : name.substr(b, e - b + 1);
}

namespace {
JsonTokenSink::Json bytes_of(const std::string& s) {
  JsonTokenSink::Json b = JsonTokenSink::Json::array();
  for (unsigned char c : s) b.push_back(c);
  return b;
}
}  // namespace

void JsonTokenSink::step(const StepEvent& e) {
  const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
  // log Σ exp(logits), from the chosen token when listed (its logprob is exact), else from the first.
  double lse = 0;
  if (!e.top.empty()) {
    lse = e.top[0].logit - std::log(static_cast<double>(e.top[0].prob));
    for (const auto& t : e.top)
      if (t.id == e.token) lse = static_cast<double>(t.logit) - e.logprob;
  }
  auto text_of = [&](std::int32_t id, std::string_view decoded) {
    return tok_.token_type(id) == TokenType::Control ? control_name(tok_, id) : std::string(decoded);
  };
  Json top = Json::array();
  for (std::size_t i = 0; i < e.top.size() && static_cast<int>(i) < top_n_; ++i) {
    const auto& t = e.top[i];
    const std::string text = text_of(t.id, tok_.decode(prev, t.id));
    Json alt = {{"id", t.id}, {"token", text}, {"bytes", bytes_of(text)},
                {"logprob", traces::json_float(t.id == e.token ? e.logprob : static_cast<float>(t.logit - lse))}};
    if (tok_.token_type(t.id) == TokenType::Control) alt["special"] = true;
    top.push_back(std::move(alt));
  }
  const std::string text = text_of(e.token, e.token_text);
  Json j = {{"type", "token"}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  j["step"] = e.step;
  j["phase"] = e.phase;
  j["pos"] = e.pos;
  j["id"] = e.token;
  j["token"] = text;
  j["bytes"] = bytes_of(text);
  j["logprob"] = traces::json_float(e.logprob);
  j["top_logprobs"] = std::move(top);
  if (e.forced) j["forced"] = true;
  if (tok_.token_type(e.token) == TokenType::Control) j["special"] = true;  // BOS, EOS, ...: a marker, not text
  const auto eog = tok_.eog_ids();
  if (e.token == tok_.bos_id() || std::find(eog.begin(), eog.end(), e.token) != eog.end())
    j["stop"] = true;  // a stop token: it ends the run and is never printed
  print(j);
}

void JsonTokenSink::print(const Json& j) { std::cout << j.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n" << std::flush; }

std::chrono::microseconds pace_delay(const RunOptions& o) {
  double ms = o.pace_ms;
  if (o.pace_tps > 0) ms = std::max(ms, 1000.0 / o.pace_tps);
  return std::chrono::microseconds(static_cast<std::int64_t>(ms * 1000));
}

PassCost PassCost::of(const Weights& w, const Config& c) {
  PassCost p;
  for (const auto& l : w.layers)
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wqkv, &l.wo, &l.w1, &l.w2, &l.w3, &l.w13})
      if (t->data) {
        p.matrix_bytes += static_cast<double>(t->bytes);
        p.layer_weights += static_cast<double>(t->numel());
      }
  p.matrix_bytes += static_cast<double>(w.wcls.bytes);
  p.classifier_weights = static_cast<double>(w.wcls.numel());
  p.n_layers = c.n_layers;
  p.q_dim = c.q_dim();
  p.kv_dim = c.kv_dim();
  return p;
}

double PassCost::bytes(int /*n*/, int last_pos) const {
  // The weights once; K and V (4 bytes a number) of every position the pass attends to, once.
  return matrix_bytes + 2.0 * 4.0 * n_layers * kv_dim * (last_pos + 1);
}

double PassCost::flops(int n, int last_pos) const {
  // Query at position t meets t + 1 keys: q·k and the weighted sum of values, 2·q_dim FLOPs each.
  const double first = last_pos - n + 1, pairs = n * (first + 1 + last_pos + 1) / 2.0;
  return 2.0 * layer_weights * n + 2.0 * classifier_weights + 4.0 * q_dim * n_layers * pairs;
}

void PacedStream::header(const RunHeader& h) {
  n_prompt_ = static_cast<int>(h.prompt_ids.size());
  held_.reset();
  shown_ = 0;
}

void PacedStream::step(const StepEvent& e) {
  if (e.step == 0) {
    prefill_ms_ = e.ms;
    n_fed_ = static_cast<int>(e.input_ids.size());
    last_pos_ = e.pos;
  }
  last_ms_ = e.ms;
}

void PacedStream::show_prefill(double decode_ms) {
  if (cost_ && n_fed_ > 0) {
    // The prefill's piece waits pace × its cost in decode steps by the cost model: the class sees what
    // the first token costs, the same on every run, in the same slow motion as the steps after it.
    const double steps = cost_->prefill_in_steps(n_fed_, last_pos_);
    const double ratio = std::clamp(steps, 0.0, kMaxPrefillPaces);
    if (announce_) {
      std::fflush(stdout);
      std::fprintf(stderr,
                   "[glassbox] prefill: %d prompt token%s = %.2f decode steps by the cost model (a pass reads the weights once, "
                   "%.2f MB; the prefill does %dx a step's matrix FLOPs; at %.1f GB/s and %.0f GFLOP/s)%s: shown as %.0f ms\n",
                   n_fed_, n_fed_ == 1 ? "" : "s", steps, cost_->matrix_bytes / 1e6, n_fed_, PassCost::kBytesPerSecond / 1e9,
                   PassCost::kFlopsPerSecond / 1e9, steps > kMaxPrefillPaces ? " (capped at 40)" : "",
                   ratio * static_cast<double>(pace_.count()) / 1000.0);
    }
    sleep_interruptibly(std::chrono::microseconds(static_cast<std::int64_t>(ratio * static_cast<double>(pace_.count()))));
    out_(*held_);
    held_.reset();
    return;
  }
  // No cost model: pace × (prefill ms ÷ one decode step's ms), as measured.
  double ratio = decode_ms > 0 ? prefill_ms_ / decode_ms : 1;
  const bool capped = ratio > kMaxPrefillPaces;
  ratio = std::clamp(ratio, 0.0, kMaxPrefillPaces);
  if (announce_) {
    std::fflush(stdout);
    std::fprintf(stderr, "[glassbox] prefill: %d prompt token%s in %.2f ms = %.1f decode steps of %.2f ms%s: shown as %.0f ms\n",
                 n_prompt_, n_prompt_ == 1 ? "" : "s", prefill_ms_, decode_ms > 0 ? prefill_ms_ / decode_ms : 1.0, decode_ms,
                 capped ? " (capped at 40)" : "", ratio * static_cast<double>(pace_.count()) / 1000.0);
  }
  sleep_interruptibly(std::chrono::microseconds(static_cast<std::int64_t>(ratio * static_cast<double>(pace_.count()))));
  out_(*held_);
  held_.reset();
}

void PacedStream::piece(std::string_view p) {
  if (!paced()) return out_(p);
  if (shown_++ == 0) {
    held_ = std::string(p);  // the prefill's token: shown now by the cost model, else once a decode step gives the scale
    if (cost_ && n_fed_ > 0) show_prefill(0);
    return;
  }
  if (held_) show_prefill(last_ms_);
  sleep_interruptibly(pace_);
  out_(p);
}

void PacedStream::finish() {
  if (held_) show_prefill(0);  // no decode step ran: the prefill is shown as one ordinary step
}

std::string summary_line(const Summary& s, int n_prompt, int model_dim) {
  char buf[160];
  std::string line = std::to_string(s.generated) + (s.generated == 1 ? " token" : " tokens") + ", stop: " + s.stop_reason;
  std::snprintf(buf, sizeof buf, ", ttft %.2f ms", s.ttft_ms);
  line += buf;
  // Per-token costs, comparable: prefill's ms per prompt token beside decode's ms per generated token.
  const double prefill = s.prefill_tok_s > 0 ? 1000.0 / s.prefill_tok_s : 0, decode = s.decode_tok_s > 0 ? 1000.0 / s.decode_tok_s : 0;
  if (prefill > 0) {
    std::snprintf(buf, sizeof buf, ", prefill %.3g ms/token (%d prompt token%s)", prefill, n_prompt, n_prompt == 1 ? "" : "s");
    line += buf;
  }
  if (decode > 0) {
    std::snprintf(buf, sizeof buf, ", decode %.3g ms/token (%.0f tok/s)", decode, s.decode_tok_s);
    line += buf;
  }
  if (prefill > 0 && decode > 0 && n_prompt > 1 && model_dim < kSmallModelDim)
    line += "\n[glassbox] note: a model of dim " + std::to_string(model_dim) + " is too small for prefill's batching to show: its "
            "matrix products do not keep the cores busy, so prefill per token is not reliably cheaper than decode (try stories15M's shape)";
  return line;
}

}  // namespace glassbox::cli
