// The step recorder: from one watch spec, what a step exposes — raw distribution, stage records, KV state,
// attention rows and the logit lens — filled into one reused step event.
#include "glassbox/step_recorder.hpp"

#include <algorithm>
#include <cmath>

#include "glassbox/error.hpp"

namespace glassbox {

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

LensPoints parse_lens_points(const std::string& text) {
  if (text.empty() || text == "blocks") return LensPoints::Blocks;
  if (text == "all") return LensPoints::All;
  if (text == "off") return LensPoints::Off;
  throw ConfigError("trace-lens '" + text + "' (expected blocks — after every block —, all — also after each block's attention — or off)");
}

// Keeps the newest position's weights for the (layer, head) pairs asked for, one step at a time.
class StepRecorder::Collector final : public AttentionObserver {
 public:
  explicit Collector(AttentionTrace t) : t_(t) {}
  bool wants(int layer, int head) const override {
    return (t_.layer < 0 || t_.layer == layer) && (t_.head < 0 || t_.head == head);
  }
  void weights(int layer, int head, int pos, int first_pos, std::span<const float> w) override {
    // Rows are reused step to step: their weight vectors keep their capacity.
    if (n_ == rows.size()) rows.emplace_back();
    AttentionRow& r = rows[n_++];
    r.layer = layer, r.head = head, r.pos = pos, r.first_pos = first_pos;
    r.weights.assign(w.begin(), w.end());
  }
  std::span<const AttentionRow> taken() const { return {rows.data(), n_}; }
  void clear() { n_ = 0; }
  std::vector<AttentionRow> rows;

 private:
  AttentionTrace t_;
  std::size_t n_ = 0;
};

StepRecorder::StepRecorder(const WatchSpec& watch, Transformer& model, const Tokenizer& tok, const SamplerChain& chain)
    : StepRecorder(watch, model, tok, &chain) {}

StepRecorder::StepRecorder(const WatchSpec& watch, Transformer& model, const Tokenizer& tok)
    : StepRecorder(watch, model, tok, nullptr) {}

StepRecorder::StepRecorder(const WatchSpec& watch, Transformer& model, const Tokenizer& tok, const SamplerChain* chain)
    : watch_(watch), model_(model), tok_(tok) {
  const Config& cfg = model.config();
  const auto V = static_cast<std::size_t>(cfg.vocab_size);
  const AttentionTrace& at = watch.attention;
  if (at.on && (at.layer >= cfg.n_layers || at.head >= cfg.n_heads))
    throw ConfigError("trace-attention " + std::to_string(at.layer) + ":" + std::to_string(at.head) + " is outside the model's " +
                      std::to_string(cfg.n_layers) + " layers x " + std::to_string(cfg.n_heads) + " heads");
  top_k_ = std::max(0, std::min(watch.top_k, cfg.vocab_size));
  if (watch.stages && chain) stages_ = std::make_unique<StageRecorder>(*chain, cfg.vocab_size, top_k_);
  if (at.on) attention_ = std::make_unique<Collector>(at);
  if (watch.lens != LensPoints::Off) {
    lens_.emplace();
    lens_->inside = watch.lens == LensPoints::All;
    lens_logits_.resize(V);
    lens_records_.resize(static_cast<std::size_t>(cfg.n_layers) * (lens_->inside ? 2 : 1));
    for (std::size_t i = 0; i < lens_records_.size(); ++i) {
      LensRecord& r = lens_records_[i];
      r.attn = lens_->inside && i % 2 == 0;
      r.layer = static_cast<int>(lens_->inside ? i / 2 : i) + 1;
      r.top.resize(static_cast<std::size_t>(top_k_));
    }
  }
  if (watch.distribution || lens_) {
    w_.resize(V);
    order_.resize(static_cast<std::size_t>(std::max(top_k_, 1)));
    top_scratch_.resize(V + V / 16);
  }
  top_.resize(static_cast<std::size_t>(top_k_));
}

StepRecorder::~StepRecorder() = default;

AttentionObserver* StepRecorder::attention_observer() { return attention_.get(); }

// The raw distribution p = softmax(logits): top-k, higher logit first, then lower id; best[0] is the max
// logit m. p_i = w_i / S with w_i = exp(l_i - m): one exp per logit. The stage recorder computed exactly
// these when it ran (beside the stages, on a pool worker); reuse them then.
void StepRecorder::record_distribution(StepEvent& e, const StepFacts& f) {
  const auto logits = f.logits;
  const std::int32_t* best = order_.data();
  std::span<const float> w;
  SoftmaxStats st;
  if (stages_ && stages_->raw_weights().size() == logits.size()) {
    w = stages_->raw_weights();
    st = stages_->raw_stats();
    best = stages_->raw_top().data();
  } else {
    top_logits(logits, order_.size(), order_.data(), top_scratch_.data());
    st = softmax_weights(logits, std::span(w_).first(logits.size()));
    w = std::span(w_).first(logits.size());
  }
  const float m = logits[best[0]];
  for (int i = 0; i < top_k_; ++i) top_[i] = {best[i], logits[best[i]], st.prob(w[best[i]])};
  e.prob = st.prob(w[f.token]);
  e.logprob = static_cast<float>(logits[f.token] - m - std::log(st.sum));  // exact even where prob underflows
  e.entropy = static_cast<float>(st.entropy());                           // H = -Σ p log p
  e.top = top_;
}

// At each captured point h: logits = Wcls·Norm_final(h) (the model's own head), p = softmax(logits), its
// entropy and top-k. After the last block this is exactly the step's distribution (the same row through
// the same kernels).
void StepRecorder::record_lens() {
  const auto V = lens_logits_.size();
  for (std::size_t i = 0; i < lens_records_.size(); ++i) {
    LensRecord& r = lens_records_[i];
    model_.head(&lens_->rows(i, 0), lens_logits_.data());
    const std::span<const float> l(lens_logits_);
    top_logits(l, order_.size(), order_.data(), top_scratch_.data());
    const SoftmaxStats st = softmax_weights(l, std::span(w_).first(V));
    for (int j = 0; j < top_k_; ++j) r.top[j] = {order_[j], l[order_[j]], st.prob(w_[order_[j]])};
    r.entropy = static_cast<float>(st.entropy());
  }
}

const StepEvent& StepRecorder::record(const StepFacts& f, const KvStore& kv) {
  StepEvent& e = event_;
  e = StepEvent{};
  e.phase = f.phase;
  e.step = f.step;
  e.pos = f.pos;
  e.input_ids = f.input;
  e.token = f.token;
  e.token_text = tok_.decode(f.input.empty() ? -1 : f.input.back(), f.token);
  if (watch_.distribution) record_distribution(e, f);
  if (stages_) {
    e.stages = stages_->records();
    e.chain_prob = stages_->chosen_prob();
  } else {
    e.chain_prob = std::numeric_limits<float>::quiet_NaN();
  }
  if (watch_.level == TraceLevel::Full) e.logits = f.logits;
  e.draw_u = f.pick.draw_u;
  e.sampled = f.pick.id;
  e.forced = f.forced;
  kv.describe(kv_);  // in place: a reused record allocates nothing
  e.kv = &kv_;
  e.attention_dots = f.attention_dots;
  e.batch = f.batch > 1 ? f.batch : 0;
  e.prefix_reused = f.prefix_reused > 0 ? f.prefix_reused : 0;
  if (attention_) {
    e.attention = attention_->taken();
    attention_->clear();  // the rows stay valid (their storage is kept) until the next step fills them
  }
  if (lens_) {
    record_lens();
    e.lens = lens_records_;
  }
  e.ms = f.ms;
  return e;
}

}  // namespace glassbox
