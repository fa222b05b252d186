// The Sampler plugin interface: one stage of a llama.cpp-style chain over a candidate array.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "glassbox/params.hpp"
#include "glassbox/rng.hpp"

namespace glassbox {

class Tokenizer;

struct Candidate {
  std::int32_t id;
  float logit;
  float prob;  // valid after Candidates::softmax()
};

// One step's candidates. Stages edit it in place: rescale logits, drop entries, or select.
// Logits are the source of truth; probs are derived from them by softmax() or normalize()
// over what remains, and are stale after any stage that changes logits or drops entries.
//
// The canonical order is descending logit, ties broken by the lower id ("before" below).
// Stages avoid sorting the whole array: sort_prefix() and keep_mass_prefix() sort only as
// much as they need, so a 128k-entry step with top-k or top-p stays cheap.
struct Candidates {
  std::vector<Candidate> data;  // reserved to vocab size once; never reallocated in the loop
  bool sorted = false;          // data is in canonical order (descending logit, ties: lower id)
  int selected = -1;            // index into data of the chosen token, once a stage selects
  float u = -1.0f;              // the uniform number the last stage drew (-1: none; reset before each stage)

  // The canonical order: a before b when a.logit > b.logit, or equal logits and a.id < b.id.
  static bool before(const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
  // The same order as a function object (inlined by the standard algorithms, unlike &before).
  struct Before {
    bool operator()(const Candidate& a, const Candidate& b) const { return before(a, b); }
  };

  // Sorts (if needed) and sets prob = softmax(logit) over `data`.
  void softmax();
  // Sets prob = softmax(logit) over `data` without reordering it (max, then exp(logit - max) / sum
  // with the sum in double, in index order; the exponentials are libm's expf bits, computed in
  // vector lanes where the CPU has them). -inf logits get probability 0.
  void normalize();
  // Sorts into canonical order if not sorted yet.
  void sort();
  // Makes data[0..n) the n first candidates in canonical order, in order; the rest stay
  // unordered. Cheaper than sort() when n is small (a bounded heap or nth_element + sort).
  void sort_prefix(std::size_t n);
  // Keeps only the first n entries (after sort() or sort_prefix(n)).
  void truncate(std::size_t n) { if (n < data.size()) data.resize(n); }
  // The index of the canonical first candidate (the argmax; ties: lower id), without sorting.
  int argmax() const;
  // Keeps the smallest prefix, in the order `first` defines (a strict total order), whose
  // probability mass reaches p (>= p - 1e-6, so that .4 + .3 reaches 0.7 despite float
  // rounding); always at least one entry. Needs normalize()d probs. Expected O(n): the
  // boundary is found by quickselect on the mass (mass_select) — in canonical order (Before)
  // over more than 256 entries, by a histogram of the mass over the logits — and only the kept
  // prefix is sorted. Returns the number kept; afterwards data is that prefix, in `first` order.
  template <class Less>
  std::size_t keep_mass_prefix(double p, Less first);
  // The weighted draw: u = rng.uniform(), then selects the first candidate, in canonical
  // order, whose cumulative probability exceeds u (inverse CDF, most likely first). O(n), no
  // full sort (a histogram of the mass over the logits, then only the boundary's bucket sorted;
  // mass_select for small or nearly flat arrays); may reorder `data`. Sets probs (normalize()),
  // `u` and `selected`.
  void draw(Rng& rng);
};

// Quickselect on probability mass: finds k, the first position in `first` order at which the
// cumulative probability satisfies reaches(cum), and rearranges d so that d[0..k] are the
// first k+1 candidates in that order (d[k] the boundary one; the others unordered) and the
// rest come after. Returns d.size() - 1 when no position reaches. Partitions around a
// median-of-three pivot, keeping the side that holds the boundary; small ranges are sorted.
// Cumulative sums are in double; their grouping differs from a sequential sum only in rounding.
template <class Less, class Reaches>
std::size_t mass_select(std::vector<Candidate>& d, Less first, Reaches reaches) {
  if (d.empty()) return 0;
  std::size_t lo = 0, hi = d.size();
  double before = 0;  // mass of d[0, lo), all of which precede d[lo, hi)
  bool first_round = true;
  while (hi - lo > 32) {
    std::size_t piv;
    if (first_round && hi - lo > 4096) {
      // A pivot from 128 evenly spaced samples, just past where their scaled cumulative mass
      // reaches: the first partition is then lopsided, which the branch predictor likes, and
      // the boundary usually lies in the small side. (A bad guess only costs another round.)
      constexpr std::size_t S = 128;
      std::size_t idx[S];
      for (std::size_t i = 0; i < S; ++i) idx[i] = lo + i * (hi - lo) / S;
      std::sort(idx, idx + S, [&](std::size_t a, std::size_t b) { return first(d[a], d[b]); });
      const double scale = static_cast<double>(hi - lo) / S;
      double est = before;
      std::size_t j = 0;
      while (j < S - 1 && !reaches(est += d[idx[j]].prob * scale)) ++j;
      piv = idx[std::min(S - 1, j + 4)];
    } else {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (first(d[mid], d[lo])) std::swap(d[mid], d[lo]);
      if (first(d[hi - 1], d[lo])) std::swap(d[hi - 1], d[lo]);
      if (first(d[hi - 1], d[mid])) std::swap(d[hi - 1], d[mid]);
      piv = mid;  // the median of three
    }
    first_round = false;
    std::swap(d[piv], d[hi - 1]);
    const Candidate pivot = d[hi - 1];
    const auto it = std::partition(d.begin() + lo, d.begin() + (hi - 1),
                                   [&](const Candidate& x) { return first(x, pivot); });
    const std::size_t a = static_cast<std::size_t>(it - d.begin());
    std::swap(d[a], d[hi - 1]);  // the pivot between the two sides
    double mass_a = 0;
    for (std::size_t i = lo; i < a; ++i) mass_a += d[i].prob;
    if (a > lo && reaches(before + mass_a)) {
      hi = a;  // the boundary is among those before the pivot
    } else if (reaches(before + mass_a + pivot.prob)) {
      return a;
    } else {
      before += mass_a + pivot.prob;
      lo = a + 1;
    }
  }
  std::sort(d.begin() + lo, d.begin() + hi, first);
  for (std::size_t i = lo; i < hi; ++i) {
    before += d[i].prob;
    if (reaches(before)) return i;
  }
  return hi - 1;  // rounding: the boundary is known to lie in [lo, hi), or nothing reaches
}

// keep_mass_prefix in canonical order over more than 256 candidates, by a histogram of the mass over
// the logits (sampling.cpp): keeps the canonical prefix whose sequential cumulative probability
// first reaches `threshold`, sorted, and returns its length; -1 when it leaves the array unchanged
// but for its order (small arrays; rounding past the last bucket), for the quickselect to decide.
long keep_canonical_mass_prefix(std::vector<Candidate>& data, double threshold);

template <class Less>
std::size_t Candidates::keep_mass_prefix(double p, Less first) {
  if (data.empty()) return 0;
  const double threshold = p - 1e-6;
  if constexpr (std::is_same_v<Less, Before>) {
    const long kept = keep_canonical_mass_prefix(data, threshold);
    if (kept > 0) return static_cast<std::size_t>(kept);
  }
  const std::size_t k = mass_select(data, first, [threshold](double cum) { return cum >= threshold; });
  data.resize(k + 1);
  std::sort(data.begin(), data.end(), first);
  return k + 1;
}

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string name() const = 0;
  virtual const Params& params() const = 0;
  // Edits the candidates; a selecting stage (greedy, dist, mirostat) sets `selected`.
  virtual void apply(Candidates& c, Rng& rng) = 0;
  // The run's vocabulary, once, before the first step (the engine, or `explain`'s entries), for stages
  // that work on token texts (dry's sequence breakers). The stage may keep the reference for as
  // long as it lives. Without a call, such a stage says what it is missing when it first runs.
  virtual void bind(const Tokenizer& vocab) {}
  // Called with each token the engine accepts (prompt tokens included), for stateful stages.
  virtual void accept(std::int32_t token) {}
  // Forgets state between sequences.
  virtual void reset() {}
  // True when this stage chooses the token; stages placed after it have no effect.
  virtual bool selects() const { return false; }
};

}  // namespace glassbox
