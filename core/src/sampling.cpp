// The candidate array and the sampler chain that runs the user's stages over it.
#include "glassbox/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "glassbox/error.hpp"

namespace glassbox {

void Candidates::sort() {
  if (sorted) return;
  const int sel_id = selected >= 0 ? data[selected].id : -1;
  std::sort(data.begin(), data.end(), Before{});
  sorted = true;
  if (sel_id >= 0)
    for (int i = 0; i < static_cast<int>(data.size()); ++i)
      if (data[i].id == sel_id) selected = i;
}

void Candidates::sort_prefix(std::size_t n) {
  if (sorted || n == 0) return;
  if (n >= data.size()) return sort();
  const int sel_id = selected >= 0 ? data[selected].id : -1;
  if (n <= data.size() / 16) {
    // A bounded heap: after the first few, most candidates lose one comparison with its top.
    std::partial_sort(data.begin(), data.begin() + n, data.end(), Before{});
  } else {
    std::nth_element(data.begin(), data.begin() + n, data.end(), Before{});
    std::sort(data.begin(), data.begin() + n, Before{});
  }
  if (sel_id >= 0)
    for (int i = 0; i < static_cast<int>(data.size()); ++i)
      if (data[i].id == sel_id) selected = i;
}

int Candidates::argmax() const {
  int best = -1;
  for (int i = 0; i < static_cast<int>(data.size()); ++i)
    if (best < 0 || before(data[i], data[best])) best = i;
  return best;
}

void Candidates::normalize() {
  if (data.empty()) return;
  float mx = data.front().logit;
  for (const auto& c : data) mx = std::max(mx, c.logit);
  double sum = 0.0;
  for (auto& c : data) {
    c.prob = std::isinf(c.logit) && c.logit < 0 ? 0.0f : std::exp(c.logit - mx);
    sum += c.prob;
  }
  const double inv = 1.0 / sum;
  for (auto& c : data) c.prob = static_cast<float>(c.prob * inv);
}

void Candidates::softmax() {
  sort();
  normalize();
}

void Candidates::draw(Rng& rng) {
  normalize();
  u = rng.uniform();
  const double target = u;
  auto exceeds = [target](double cum) { return target < cum; };
  std::size_t k;
  if (sorted) {
    double cdf = 0;
    for (k = 0; k < data.size(); ++k)
      if (exceeds(cdf += data[k].prob)) break;
    if (k == data.size()) k = data.size() - 1;
  } else {
    k = mass_select(data, Before{}, exceeds);
  }
  // Rounding left the total just below u: step back to a candidate with any probability.
  while (k > 0 && data[k].prob == 0) --k;
  selected = static_cast<int>(k);
}

SamplerChain::SamplerChain(std::vector<std::unique_ptr<Sampler>> stages, int vocab_size, std::uint64_t seed)
    : stages_(std::move(stages)), rng_(seed) {
  // Some stage must choose; stages after the first that does never run (build_sampler_stages
  // warns about them).
  if (std::none_of(stages_.begin(), stages_.end(), [](const auto& st) { return st->selects(); }))
    throw ConfigError("sampler chain has no selecting stage (end it with greedy or dist)");
  cand_.data.reserve(vocab_size);
  scratch_.reserve(vocab_size);
  raw_prob_.resize(vocab_size);
  records_.resize(stages_.size());
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    records_[i].name = stages_[i]->name();
    records_[i].params = &stages_[i]->params();
  }
}

void SamplerChain::reset(std::uint64_t seed) {
  rng_.reseed(seed);
  step_ = -1;
  for (auto& s : stages_) s->reset();
}

void SamplerChain::accept(std::int32_t token) {
  for (auto& s : stages_) s->accept(token);
}

void SamplerChain::record(std::size_t stage, int top_k) {
  // Works on a copy, so that recording never changes what the next stage sees, and sorts
  // only the top_k entries it lists. One exp per candidate: with w_i = exp(l_i - max) and
  // S = sum w_i, p_i = w_i / S and the entropy is H = ln S - sum(w_i (l_i - max)) / S.
  scratch_.assign(cand_.data.begin(), cand_.data.end());
  Candidates view;
  view.data.swap(scratch_);
  view.sorted = cand_.sorted;
  float mx = view.data.front().logit;
  for (const auto& c : view.data) mx = std::max(mx, c.logit);
  double sum = 0, wl = 0, mass = 0;
  for (auto& c : view.data) {
    const float w = std::isinf(c.logit) && c.logit < 0 ? 0.0f : std::exp(c.logit - mx);
    c.prob = static_cast<float>(w);
    sum += w;
    if (w > 0) wl += static_cast<double>(w) * (c.logit - mx);
    mass += raw_prob_[c.id];
  }
  const double inv = 1.0 / sum;
  for (auto& c : view.data) c.prob = static_cast<float>(c.prob * inv);
  StageRecord& r = records_[stage];
  r.kept = static_cast<int>(view.data.size());
  r.mass = static_cast<float>(mass);
  r.entropy = static_cast<float>(std::max(0.0, std::log(sum) - wl * inv));
  const std::size_t n_top = std::min<std::size_t>(std::max(top_k, 0), view.data.size());
  view.sort_prefix(n_top);
  r.top.clear();
  for (std::size_t i = 0; i < n_top; ++i) r.top.push_back({view.data[i].id, view.data[i].logit, view.data[i].prob});
  view.data.swap(scratch_);
}

namespace {

// A stage's output must stay a distribution: no NaN or +inf logit, no NaN probability, some finite logit
// (-inf is a ban). One pass over the kept candidates; `who()` names the producer, only for the message.
template <class Who>
void check_finite(const Candidates& c, int step, Who who) {
  bool any_finite = false;
  for (const auto& x : c.data) {
    if (std::isnan(x.logit) || x.logit == INFINITY || std::isnan(x.prob))
      throw ConfigError("step " + std::to_string(step) + ": " + who() + " produced " +
                        (std::isnan(x.prob) ? std::string("a NaN probability") : std::isnan(x.logit) ? "a NaN logit" : "an infinite logit") +
                        " for token " + std::to_string(x.id) + " (a parameter beyond float range?)");
    any_finite = any_finite || std::isfinite(x.logit);
  }
  if (!any_finite) throw ConfigError("step " + std::to_string(step) + ": " + who() + " left no candidate with a finite logit (every token banned)");
}

}  // namespace

std::int32_t SamplerChain::sample(std::span<const float> logits, bool record_stages, int top_k) {
  ++step_;
  cand_.data.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)
    cand_.data[i] = {static_cast<std::int32_t>(i), logits[i], 0.0f};
  cand_.sorted = false;
  cand_.selected = -1;
  cand_.u = -1.0f;
  check_finite(cand_, step_, [] { return std::string("the model"); });
  if (record_stages) {
    // p_raw = softmax(logits): the reference for each stage's kept mass
    const float mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (std::size_t i = 0; i < logits.size(); ++i) sum += raw_prob_[i] = std::exp(logits[i] - mx);
    for (auto& p : raw_prob_) p = static_cast<float>(p / sum);
    raw_sum_ = sum;
  }
  std::size_t n_run = 0;
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    stages_[i]->apply(cand_, rng_);
    ++n_run;
    if (cand_.data.empty())
      throw PluginError("sampler stage '" + stages_[i]->name() + "' removed every candidate");
    check_finite(cand_, step_, [&] { return "sampler stage '" + stages_[i]->name() + "'"; });
    if (record_stages) record(i, top_k);
    if (cand_.selected >= 0) break;  // later stages cannot change a made choice
  }
  if (cand_.selected < 0 || cand_.selected >= static_cast<int>(cand_.data.size()))
    throw PluginError("sampler chain ended without selecting a token");
  const std::int32_t id = cand_.data[cand_.selected].id;
  chosen_prob_ = std::numeric_limits<float>::quiet_NaN();
  if (record_stages) {
    // The chosen token's probability under the distribution the selecting stage chose from:
    // that stage's record, whose normalised copy is still in scratch_.
    for (const auto& c : scratch_)
      if (c.id == id) {
        chosen_prob_ = c.prob;
        break;
      }
  }
  n_recorded_ = record_stages ? n_run : 0;
  draw_u_ = cand_.u;
  return id;
}

}  // namespace glassbox
