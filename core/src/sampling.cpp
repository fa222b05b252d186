// The candidate array and the sampler chain that runs the user's stages over it.
#include "glassbox/sampling.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>

#include <xsimd/xsimd.hpp>

#include "glassbox/error.hpp"
#include "glassbox/kernels.hpp"
#include "glassbox/mass_select.hpp"
#include "thread_pool.hpp"

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

namespace {
// The highest logit, in four chains (one maxss chain waits on its latency at every entry): the value a
// single pass in index order gives (std::max skips a NaN unless it comes first, then every chain
// holds it), up to the sign of a zero. *nan says whether some logit is NaN.
float max_logit(const std::vector<Candidate>& d, bool* nan) {
  const std::size_t n = d.size();
  float m0 = d[0].logit, m1 = m0, m2 = m0, m3 = m0;
  int any_nan = 0;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    m0 = std::max(m0, d[i].logit), m1 = std::max(m1, d[i + 1].logit);
    m2 = std::max(m2, d[i + 2].logit), m3 = std::max(m3, d[i + 3].logit);
    any_nan |= int{std::isnan(d[i].logit)} | int{std::isnan(d[i + 1].logit)} | int{std::isnan(d[i + 2].logit)} |
               int{std::isnan(d[i + 3].logit)};  // ints: no branch per entry
  }
  for (; i < n; ++i) m0 = std::max(m0, d[i].logit), any_nan |= int{std::isnan(d[i].logit)};
  *nan = any_nan != 0;
  return std::max(std::max(m0, m1), std::max(m2, m3));
}
}  // namespace

int Candidates::argmax() const {
  // Two passes that each keep the pipeline busy — the highest logit in four chains, then the lowest
  // id among the entries holding it — instead of one whose every step waits on the last comparison.
  // With a NaN logit the order is no longer total: then the one-pass definition decides.
  const std::size_t n = data.size();
  if (n == 0) return -1;
  bool nan = false;
  const float mx = max_logit(data, &nan);
  if (nan) {
    int best = 0;
    for (int j = 1; j < static_cast<int>(n); ++j)
      if (before(data[j], data[best])) best = j;
    return best;
  }
  int best = -1;
  for (std::size_t j = 0; j < n; ++j)
    if (data[j].logit == mx && (best < 0 || data[j].id < data[best].id)) best = static_cast<int>(j);
  return best;
}

namespace {
// normalize()'s work; returns the maximum logit it subtracted.
float normalized_from_max(std::vector<Candidate>& data) {
  const std::size_t n = data.size();
  // m = max l, the value one pass gives (exp(l − m) is the same for m = +0 or −0)
  bool nan = false;
  const float mx = max_logit(data, &nan);
  // p_i = exp(l_i − m) / Σ exp(l_j − m): the exponentials through kernels::exp_floats (libm's expf
  // bits, in vector lanes), a chunk at a time from a buffer on the stack; the sum in double, in
  // index order, as it always was — so the probabilities are the same bits as std::exp per entry.
  constexpr std::size_t kChunk = 256;
  float e[kChunk];
  double sum = 0.0;
  for (std::size_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::size_t m = std::min(kChunk, n - i0);
    Candidate* c = data.data() + i0;
    for (std::size_t j = 0; j < m; ++j) e[j] = c[j].logit - mx;
    kernels::exp_floats(e, e, m);
    for (std::size_t j = 0; j < m; ++j) {
      c[j].prob = c[j].logit == -INFINITY ? 0.0f : e[j];  // a ban weighs 0, even when every entry is one
      sum += c[j].prob;
    }
  }
  const double inv = 1.0 / sum;
  for (auto& c : data) c.prob = static_cast<float>(c.prob * inv);
  return mx;
}

// A boundary in canonical order through a histogram of probability over the logits, for a large
// unsorted array. Canonical order is descending logit, so buckets of (max − logit) in 1/128 nat
// come in that order too (the float arithmetic is monotone; equal logits share a bucket; bucket
// 4095 also takes everything further below the max, -inf included). One pass adds each
// candidate's probability and count to its bucket; the walk over the buckets finds the first, b,
// at which the cumulative mass reaches; only the candidates of bucket b (or, for a prefix, of
// buckets ≤ b) are moved to the front and sorted. Returns the front's size, 0 when no bucket
// reaches (rounding: the caller's quickselect decides) or the front would exceed max_sort; *before
// is the mass of the buckets ahead of the front. Grouped by bucket, the sums differ from a
// sequential sum in canonical order only in rounding.
constexpr int kPerNat = 128, kBuckets = 32 * kPerNat;

int bucket_of(float mx, float logit) {
  const float d = (mx - logit) * static_cast<float>(kPerNat);
  return d < static_cast<float>(kBuckets - 1) ? static_cast<int>(d) : kBuckets - 1;  // NaN, inf: last
}

template <class Reaches>
std::size_t bucket_front(std::vector<Candidate>& data, float mx, Reaches reaches, bool prefix, std::size_t max_sort,
                         double* before) {
  double mass[kBuckets] = {};
  std::uint32_t count[kBuckets] = {};
  for (const auto& c : data) {
    const int b = bucket_of(mx, c.logit);
    mass[b] += c.prob;
    ++count[b];
  }
  double ahead = 0;  // the mass of the buckets before b
  std::size_t upto = 0;  // candidates in the buckets up to b
  int b = 0;
  for (; b < kBuckets; ++b) {
    upto += count[b];
    if (reaches(ahead + mass[b])) break;
    ahead += mass[b];
  }
  if (b == kBuckets || (prefix ? upto : count[b]) > max_sort) return 0;
  const auto end = std::partition(data.begin(), data.end(), [&](const Candidate& c) {
    const int cb = bucket_of(mx, c.logit);
    return prefix ? cb <= b : cb == b;
  });
  std::sort(data.begin(), end, Candidates::Before{});
  *before = prefix ? 0.0 : ahead;
  return static_cast<std::size_t>(end - data.begin());
}
}  // namespace

void Candidates::normalize() {
  if (!data.empty()) normalized_from_max(data);
}

namespace {
// keep_mass_prefix in canonical order over more than 256 candidates, by a histogram of the mass over
// the logits: keeps the canonical prefix whose sequential cumulative probability first reaches
// `threshold`, sorted, and returns its length; -1 when it leaves the array unchanged but for its
// order (small arrays; rounding past the last bucket), for the quickselect to decide.
long keep_canonical_mass_prefix(std::vector<Candidate>& data, double threshold) {
  if (data.size() <= 256) return -1;
  bool nan = false;
  const float mx = max_logit(data, &nan);
  auto reaches = [threshold](double cum) { return cum >= threshold; };
  double before = 0;
  const std::size_t m = bucket_front(data, mx, reaches, true, data.size(), &before);
  // The front is the canonical prefix through the boundary's bucket, sorted: the sum is sequential.
  double cum = 0;
  for (std::size_t k = 0; k < m; ++k)
    if (reaches(cum += data[k].prob)) {
      data.resize(k + 1);
      return static_cast<long>(k + 1);
    }
  return -1;
}
}  // namespace

std::size_t Candidates::keep_mass_prefix(double p) {
  if (data.empty()) return 0;
  const double threshold = p - 1e-6;
  const long kept = keep_canonical_mass_prefix(data, threshold);
  if (kept > 0) return static_cast<std::size_t>(kept);
  const std::size_t k = mass_select(data, Before{}, [threshold](double cum) { return cum >= threshold; });
  data.resize(k + 1);
  std::sort(data.begin(), data.end(), Before{});
  return k + 1;
}

void Candidates::softmax() {
  sort();
  normalize();
}

void Candidates::draw(Rng& rng) {
  if (data.empty()) return;
  const float mx = normalized_from_max(data);
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
    // Over 256 candidates the histogram finds the boundary's bucket and sorts only that (up to 4,096
    // candidates; a flatter distribution, or rounding past the last bucket, takes the quickselect).
    double cdf = 0;
    const std::size_t m = data.size() > 256 ? bucket_front(data, mx, exceeds, false, 4096, &cdf) : 0;
    for (std::size_t i = 0; i < m; ++i)
      if (exceeds(cdf += data[i].prob)) {
        selected = static_cast<int>(i);
        return;
      }
    k = mass_select(data, Before{}, exceeds);
  }
  // Rounding left the total just below u: step back to a candidate with any probability.
  while (k > 0 && data[k].prob == 0) --k;
  selected = static_cast<int>(k);
}

SamplerChain::SamplerChain(std::vector<std::unique_ptr<Sampler>> stages, int vocab_size, std::uint64_t seed)
    : stages_(std::move(stages)), rng_(seed) {
  // Some stage must choose; stages after the first that does never run (build_sampler_chain
  // warns about them).
  if (std::none_of(stages_.begin(), stages_.end(), [](const auto& st) { return st->selects(); }))
    throw ConfigError("sampler chain has no selecting stage (end it with greedy or dist)");
  cand_.data.reserve(vocab_size);
}

void SamplerChain::reset(std::uint64_t seed) {
  rng_.reseed(seed);
  step_ = -1;
  for (auto& s : stages_) s->reset();
}

void SamplerChain::accept(std::int32_t token) {
  for (auto& s : stages_) s->accept(token);
}

void SamplerChain::bind(const Tokenizer& vocab) {
  for (auto& s : stages_) s->bind(vocab);
}

// ---- StageRecorder ----

struct StageRecorder::Task {
  std::optional<kernels::Beside> beside;  // joined by end(): at the end of sample(), or if a stage throws
  std::atomic<bool> weights{false};       // the raw weights are written (the top ids may still be coming)
  static void run(void* p) noexcept { static_cast<StageRecorder*>(p)->raw_pass(); }
};

StageRecorder::StageRecorder(const SamplerChain& chain, int vocab_size, int top_k)
    : top_k_(std::max(0, top_k)), task_(std::make_unique<Task>()) {
  const auto V = static_cast<std::size_t>(vocab_size);
  raw_w_.resize(V);
  raw_top_.resize(static_cast<std::size_t>(std::max(top_k_, 1)));
  raw_scratch_.resize(V + V / 16);
  rec_l_.resize(V);
  rec_w_.resize(V);
  rec_top_.resize(std::min<std::size_t>(static_cast<std::size_t>(top_k_), V));
  records_.resize(chain.stages().size());
  for (std::size_t i = 0; i < records_.size(); ++i) {
    records_[i].name = chain.stages()[i]->name();
    records_[i].params = &chain.stages()[i]->params();
    records_[i].top.reserve(static_cast<std::size_t>(top_k_));
  }
}

StageRecorder::~StageRecorder() { end(); }

// p_raw = softmax(logits), the reference for each stage's kept mass, and its top entries: read-only work
// over the whole vocabulary that the stages do not need. The first record waits for the weights; the
// top ids, wanted only by the step record, are waited for by end().
void StageRecorder::raw_pass() noexcept {
  raw_stats_ = softmax_weights(logits_, std::span(raw_w_).first(logits_.size()));
  task_->weights.store(true, std::memory_order_release);
  raw_top_n_ = top_logits(logits_, raw_top_.size(), raw_top_.data(), raw_scratch_.data());
}

void StageRecorder::begin(std::span<const float> logits) {
  end();  // a previous step's task, had end() not come
  if (logits.size() > raw_w_.size()) throw ConfigError("stage recorder: " + std::to_string(logits.size()) + " logits for a vocabulary of " + std::to_string(raw_w_.size()));
  logits_ = logits;
  raw_n_ = logits.size();
  n_recorded_ = 0;
  chosen_prob_ = std::numeric_limits<float>::quiet_NaN();
  task_->weights.store(false, std::memory_order_relaxed);
  // Over a small vocabulary the pass takes about what handing it over does (stories260K's 512
  // entries: well under a microsecond).
  constexpr std::size_t kBesideFrom = 4096;
  if (logits.size() >= kBesideFrom) task_->beside.emplace(&Task::run, this);
  else raw_pass();
}

void StageRecorder::end() noexcept {
  if (task_ && task_->beside) task_->beside.reset();  // returns once the task has run
}

void StageRecorder::after_stage(std::size_t stage, const Sampler&, const Candidates& cand) {
  if (task_->beside) task_->beside->wait_until(task_->weights);
  // Reads the candidates without changing them, so recording never changes what the next stage sees:
  // one exp per kept candidate (softmax_weights), the raw mass from the raw weights, and the top
  // entries in one pass (a sorted run of the best so far; most candidates lose one comparison).
  const auto& d = cand.data;
  const std::size_t n = d.size();
  for (std::size_t i = 0; i < n; ++i) rec_l_[i] = d[i].logit;
  const SoftmaxStats st = softmax_weights({rec_l_.data(), n}, {rec_w_.data(), n});
  double mass = 0;
  for (const auto& c : d) mass += raw_w_[c.id];
  StageRecord& r = records_[stage];
  r.kept = static_cast<int>(n);
  r.mass = static_cast<float>(mass / raw_stats_.sum);
  r.entropy = static_cast<float>(st.entropy());
  // A number drawn by a stage that did not select (xtc's coin); a selecting stage's is the step's draw.
  r.u = cand.selected < 0 ? cand.u : -1.0f;
  const std::size_t kk = std::min<std::size_t>(rec_top_.size(), n);
  const std::size_t m = top_run(n, kk, [&](std::int32_t a, std::int32_t b) { return Candidates::before(d[a], d[b]); },
                                rec_top_.data());
  r.top.clear();
  for (std::size_t j = 0; j < m; ++j) {
    const Candidate& c = d[rec_top_[j]];
    r.top.push_back({c.id, c.logit, st.prob(rec_w_[rec_top_[j]])});
  }
  n_recorded_ = stage + 1;
  // The chosen token's probability under the distribution the selecting stage chose from.
  if (cand.selected >= 0 && cand.selected < static_cast<int>(n)) chosen_prob_ = st.prob(rec_w_[cand.selected]);
}

namespace {

// True when no candidate has a NaN or +inf logit or a NaN probability and some logit is finite: the
// candidates' 32-bit fields read as floats in vectors, three vectors (W candidates) at a time, each
// lane's field — id, logit, prob — fixed by its place in the period of three. One compare per lane:
// a logit must be <= FLT_MAX (false for +inf and NaN, true for -inf), a prob <= +inf (false for NaN
// alone); id lanes pass whatever their bits. Reading the int32 ids as float lanes is a vector load of
// the whole array (the intrinsics' types may alias); no id value reaches the result. A finite logit is
// looked for from the front, where one almost always is.
bool usable_candidates(const std::vector<Candidate>& d) {
  using batch = xsimd::batch<float>;
  using mask = xsimd::batch_bool<float>;
  constexpr std::size_t W = batch::size;
  static_assert(sizeof(Candidate) == 3 * sizeof(float) && offsetof(Candidate, logit) == sizeof(float) &&
                offsetof(Candidate, prob) == 2 * sizeof(float));
  batch limit[3];
  mask is_id[3];
  for (std::size_t k = 0; k < 3; ++k) {
    alignas(64) float lim[W], field[W];
    for (std::size_t j = 0; j < W; ++j) {
      const std::size_t f = (k * W + j) % 3;
      field[j] = static_cast<float>(f);
      lim[j] = f == 1 ? std::numeric_limits<float>::max() : std::numeric_limits<float>::infinity();
    }
    limit[k] = batch::load_aligned(lim);
    is_id[k] = batch::load_aligned(field) == batch(0.0f);
  }
  mask ok(true);
  const float* p = reinterpret_cast<const float*>(d.data());
  std::size_t i = 0;
  for (; i + W <= d.size(); i += W, p += 3 * W)
    for (std::size_t k = 0; k < 3; ++k) ok = ok && ((batch::load_unaligned(p + k * W) <= limit[k]) || is_id[k]);
  bool all_ok = xsimd::all(ok);
  for (; i < d.size(); ++i) all_ok = all_ok && d[i].logit <= std::numeric_limits<float>::max() && !std::isnan(d[i].prob);
  if (!all_ok) return false;
  for (const auto& c : d)
    if (std::isfinite(c.logit)) return true;
  return false;
}

// A stage's output must stay a distribution: no NaN or +inf logit, no NaN probability, some finite logit
// (-inf is a ban). Checked in vectors (usable_candidates); only when that fails, the pass that names the
// first offending token. `who()` names the producer, only for the message.
template <class Who>
void check_finite(const Candidates& c, int step, Who who) {
  if (usable_candidates(c.data)) return;
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

// Candidate i = (i, logits[i], 0), made as the candidate array's range insert reads it.
struct FromLogits {
  using iterator_category = std::forward_iterator_tag;
  using value_type = Candidate;
  using difference_type = std::ptrdiff_t;
  using pointer = const Candidate*;
  using reference = Candidate;
  const float* logits;
  std::int32_t i;
  Candidate operator*() const { return {i, logits[i], 0.0f}; }
  FromLogits& operator++() { ++i; return *this; }
  FromLogits operator++(int) { FromLogits t = *this; ++i; return t; }
  bool operator==(const FromLogits& o) const { return i == o.i; }
};

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

// The one stage loop behind sample() and distribution(), so that distribution() is exactly what
// sample() draws from (speculative decoding's acceptance test depends on it): refills the candidates
// from the logits, checks them, and runs stages [0, stop), each checked and shown to the observer.
// With stop == stages.size() (sample()) the loop ends at the first stage that selects. With stop
// short of the end (distribution(), stop = the selecting stage) every stage before it runs and the
// candidates left are normalised and shown to the observer as stage `stop`'s record, nothing selected.
// (A function of this file, not a member, taking the chain's parts: sampling.hpp, which most of the
// project includes, stays as it was.)
void apply_stages(const std::vector<std::unique_ptr<Sampler>>& stages, Candidates& cand, Rng& rng, int& step,
                  std::span<const float> logits, StageObserver* observer, std::size_t stop) {
  ++step;
  // Refilled in one range insert from a generating iterator, not resized: the stages shrank it, and
  // growing it back by resize() would zero every entry before the loop writes it (~1% of a 15M
  // decode step, for a 32k vocabulary); push_back reloads the vector's end at every entry (the
  // stores might alias it), the insert writes through a pointer of its own (32k entries: 13 µs, not 19).
  cand.data.clear();
  cand.data.insert(cand.data.end(), FromLogits{logits.data(), 0},
                   FromLogits{logits.data(), static_cast<std::int32_t>(logits.size())});
  cand.sorted = false;
  cand.selected = -1;
  cand.u = -1.0f;
  // The model's logits are checked in vectors; the candidate-by-candidate check, which names the
  // token, runs only when they fail.
  if (!usable_logits(logits)) check_finite(cand, step, [] { return std::string("the model"); });
  // The observer's end() comes however this returns (a stage may throw while its work runs beside).
  struct Ending {
    StageObserver* o;
    ~Ending() { if (o) o->end(); }
  } ending{observer};
  if (observer) observer->begin(logits);
  const bool whole_chain = stop == stages.size();
  for (std::size_t i = 0; i < stop; ++i) {
    cand.u = -1.0f;  // each stage's own draw, for its record; the last one's is the step's
    stages[i]->apply(cand, rng);
    if (cand.data.empty())
      throw PluginError("sampler stage '" + stages[i]->name() + "' removed every candidate");
    check_finite(cand, step, [&] { return "sampler stage '" + stages[i]->name() + "'"; });
    if (observer) observer->after_stage(i, *stages[i], cand);
    if (whole_chain && cand.selected >= 0) break;  // later stages cannot change a made choice
  }
  if (whole_chain) return;
  cand.u = -1.0f;
  cand.normalize();
  if (observer) observer->after_stage(stop, *stages[stop], cand);
}

}  // namespace

SampleResult SamplerChain::sample(std::span<const float> logits, StageObserver* observer) {
  apply_stages(stages_, cand_, rng_, step_, logits, observer, stages_.size());
  if (cand_.selected < 0 || cand_.selected >= static_cast<int>(cand_.data.size()))
    throw PluginError("sampler chain ended without selecting a token");
  return {cand_.data[cand_.selected].id, cand_.u};
}

Selection SamplerChain::selection() const {
  for (const auto& st : stages_)
    if (st->selects()) return st->selection();
  return Selection::None;
}

void check_fixed_distribution(const std::vector<std::unique_ptr<Sampler>>& stages) {
  for (const auto& st : stages) {
    if (!st->selects()) continue;
    if (st->selection() == Selection::Argmax || st->selection() == Selection::Draw) return;
    throw ConfigError("sampler stage '" + st->name() + "' selects the token with state of its own (it declares an adaptive "
                      "selection), but speculative decoding needs the fixed distribution a chain draws from: end the chain "
                      "with a stage that declares an argmax or a draw (greedy, dist)");
  }
  throw ConfigError("the sampler chain has no selecting stage: speculative decoding needs one that declares an argmax or a draw");
}

const Candidates& SamplerChain::distribution(std::span<const float> logits, StageObserver* observer) {
  check_fixed_distribution(stages_);
  std::size_t sel = 0;
  while (!stages_[sel]->selects()) ++sel;
  apply_stages(stages_, cand_, rng_, step_, logits, observer, sel);
  return cand_;
}

}  // namespace glassbox
