// The candidate array and the sampler chain that runs the user's stages over it.
#include "glassbox/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"

namespace glassbox {

SoftmaxStats softmax_weights(std::span<const float> l, std::span<float> w) {
  SoftmaxStats s;
  s.max = kernels::exp_weights(l.data(), w.data(), l.size(), &s.sum, &s.weighted);
  return s;
}

std::size_t top_logits(std::span<const float> l, std::size_t k, std::int32_t* best, std::int32_t* scratch) {
  using batch = xsimd::batch<float>;
  constexpr std::size_t B = batch::size;
  const std::size_t n = l.size();
  // Blocks of 64 entries, smaller for a small vocabulary (512 entries, k = 10: blocks of 16), so that
  // there are at least two blocks per wanted entry; with fewer, the bound passes over too little and
  // the plain run is as quick.
  std::size_t kBlock = 64;
  while (kBlock > 16 && kBlock > B && n / kBlock < 4 * k) kBlock /= 2;
  const std::size_t nb = n / kBlock;
  if (k == 0 || nb < 2 * k)
    return top_run(n, k, [&](std::int32_t a, std::int32_t b) { return l[a] > l[b]; }, best);
  // Each block's maximum, kept as the float's bits in scratch (reinterpreted; maxima are exact).
  float* bmax = reinterpret_cast<float*>(scratch);
  static_assert(sizeof(float) == sizeof(std::int32_t));
  for (std::size_t b = 0; b < nb; ++b) {
    const float* p = l.data() + b * kBlock;
    batch m = batch::load_unaligned(p);
    for (std::size_t j = B; j < kBlock; j += B) m = xsimd::max(m, batch::load_unaligned(p + j));
    float lanes[B];
    m.store_unaligned(lanes);
    bmax[b] = *std::max_element(lanes, lanes + B);
  }
  // t = the k-th highest block maximum (a copy: nth_element reorders).
  float* sel = bmax + nb;
  std::copy(bmax, bmax + nb, sel);
  std::nth_element(sel, sel + (k - 1), sel + nb, std::greater<float>());
  const float t = sel[k - 1];
  // The entries >= t, in index order (the last partial block is read whole).
  std::int32_t* cand = scratch + nb;  // over the copy, which is done with
  std::size_t m = 0;
  auto take = [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i)
      if (l[i] >= t) cand[m++] = static_cast<std::int32_t>(i);
  };
  for (std::size_t b = 0; b < nb; ++b)
    if (bmax[b] >= t) take(b * kBlock, (b + 1) * kBlock);
  take(nb * kBlock, n);
  const std::size_t got = top_run(m, k, [&](std::int32_t a, std::int32_t b) { return l[cand[a]] > l[cand[b]]; }, best);
  for (std::size_t j = 0; j < got; ++j) best[j] = cand[best[j]];
  return got;
}

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
  constexpr std::size_t kBlock = 64;
  const std::size_t nb = data.size() / kBlock;
  if (nb >= 4 * n) {
    // Most candidates cannot be among the first n. The n-th highest of the 64-candidate blocks'
    // maximum logits, t, is at most the n-th highest logit (n blocks each hold one >= t), so the
    // candidates >= t move to the front, reading only the blocks whose maximum reaches t, and the
    // bounded heap runs over those alone. The first n come out the same: the order is total.
    thread_local std::vector<float> bmax;  // (2 · blocks): grows on the first step, then reused
    if (bmax.size() < 2 * nb) bmax.resize(2 * nb);
    for (std::size_t b = 0; b < nb; ++b) {
      const Candidate* p = data.data() + b * kBlock;
      float m0 = p[0].logit, m1 = p[1].logit, m2 = p[2].logit, m3 = p[3].logit;  // four chains
      for (std::size_t j = 4; j < kBlock; j += 4) {
        m0 = std::max(m0, p[j].logit);
        m1 = std::max(m1, p[j + 1].logit);
        m2 = std::max(m2, p[j + 2].logit);
        m3 = std::max(m3, p[j + 3].logit);
      }
      bmax[b] = std::max(std::max(m0, m1), std::max(m2, m3));
    }
    float* sel = bmax.data() + nb;
    std::copy(bmax.data(), bmax.data() + nb, sel);
    std::nth_element(sel, sel + (n - 1), sel + nb, std::greater<float>());
    const float t = sel[n - 1];
    // A partition over the blocks that reach t (the tail past the last whole block is read whole):
    // what it swaps back has been read already and is below t.
    std::size_t m = 0;
    auto take = [&](std::size_t i0, std::size_t i1) {
      for (std::size_t i = i0; i < i1; ++i)
        if (data[i].logit >= t) std::swap(data[m++], data[i]);
    };
    for (std::size_t b = 0; b < nb; ++b)
      if (bmax[b] >= t) take(b * kBlock, (b + 1) * kBlock);
    take(nb * kBlock, data.size());
    std::partial_sort(data.begin(), data.begin() + n, data.begin() + m, Before{});
  } else if (n <= data.size() / 16) {
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
  raw_w_.resize(vocab_size);
  rec_l_.resize(vocab_size);
  rec_w_.resize(vocab_size);
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
  // Reads cand_ without changing it, so recording never changes what the next stage sees: one exp
  // per kept candidate (softmax_weights), the raw mass from the weights sample() kept, and the
  // top entries in one pass (a sorted run of the best so far; most candidates lose one comparison).
  const auto& d = cand_.data;
  const std::size_t n = d.size();
  for (std::size_t i = 0; i < n; ++i) rec_l_[i] = d[i].logit;
  const SoftmaxStats st = softmax_weights({rec_l_.data(), n}, {rec_w_.data(), n});
  double mass = 0;
  for (const auto& c : d) mass += raw_w_[c.id];
  StageRecord& r = records_[stage];
  r.kept = static_cast<int>(n);
  r.mass = static_cast<float>(mass / raw_stats_.sum);
  r.entropy = static_cast<float>(st.entropy());
  const std::size_t kk = std::min<std::size_t>(std::max(top_k, 0), n);
  if (rec_top_.size() < kk) rec_top_.resize(kk);  // grows once, on the first step
  const std::size_t m = top_run(n, kk, [&](std::int32_t a, std::int32_t b) { return Candidates::before(d[a], d[b]); },
                                rec_top_.data());
  r.top.clear();
  for (std::size_t j = 0; j < m; ++j) {
    const Candidate& c = d[rec_top_[j]];
    r.top.push_back({c.id, c.logit, st.prob(rec_w_[rec_top_[j]])});
  }
  // The chosen token's probability under the distribution the selecting stage chose from.
  if (cand_.selected >= 0 && cand_.selected < static_cast<int>(n)) chosen_prob_ = st.prob(rec_w_[cand_.selected]);
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

// True when no logit is NaN or +inf and some logit is finite (what check_finite accepts).
bool usable_logits(std::span<const float> l) {
  using batch = xsimd::batch<float>;
  constexpr std::size_t B = batch::size;
  const batch inf(std::numeric_limits<float>::infinity());
  auto bad = xsimd::batch_bool<float>(false), finite = bad;
  std::size_t i = 0;
  for (; i + B <= l.size(); i += B) {
    const batch x = batch::load_unaligned(l.data() + i);
    bad = bad || (x != x) || (x == inf);
    finite = finite || (xsimd::abs(x) < inf);
  }
  bool any_bad = xsimd::any(bad), any_finite = xsimd::any(finite);
  for (; i < l.size(); ++i) {
    any_bad = any_bad || std::isnan(l[i]) || l[i] == INFINITY;
    any_finite = any_finite || std::isfinite(l[i]);
  }
  return !any_bad && any_finite;
}

}  // namespace

std::int32_t SamplerChain::sample(std::span<const float> logits, bool record_stages, int top_k) {
  ++step_;
  // Refilled by appending, not resized: the stages shrank it, and growing it back by resize() would
  // zero every entry before the loop writes it (~1% of a 15M decode step, for a 32k vocabulary).
  cand_.data.clear();
  for (std::size_t i = 0; i < logits.size(); ++i)
    cand_.data.push_back({static_cast<std::int32_t>(i), logits[i], 0.0f});
  cand_.sorted = false;
  cand_.selected = -1;
  cand_.u = -1.0f;
  // The model's logits are checked in vectors; the candidate-by-candidate check, which names the
  // token, runs only when they fail.
  if (!usable_logits(logits)) check_finite(cand_, step_, [] { return std::string("the model"); });
  chosen_prob_ = std::numeric_limits<float>::quiet_NaN();
  // p_raw = softmax(logits): the reference for each stage's kept mass
  if (record_stages) raw_stats_ = softmax_weights(logits, std::span(raw_w_).first(logits.size()));
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
  n_recorded_ = record_stages ? n_run : 0;
  draw_u_ = cand_.u;
  return id;
}

}  // namespace glassbox
