// Mass-based cut-offs in an order of a stage's own: quickselect on probability mass (mass_select) and
// keep_mass_prefix over any strict total order. Templates over the order, so they live here rather than
// in sampler.hpp: only the stages (and core) that cut in another order than the canonical one
// (Candidates::keep_mass_prefix, compiled in libglassbox) include this and compile them.
#pragma once
#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "glassbox/sampler.hpp"

namespace glassbox {

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

// Candidates::keep_mass_prefix in the order `first` defines (a strict total order): keeps the smallest
// prefix in that order whose mass reaches p (>= p - 1e-6); always at least one entry. Needs
// normalize()d probs. Expected O(n) by mass_select; only the kept prefix is sorted. Returns the number
// kept; afterwards c.data is that prefix, in `first` order.
template <class Less>
std::size_t keep_mass_prefix(Candidates& c, double p, Less first) {
  if constexpr (std::is_same_v<Less, Candidates::Before>) {
    return c.keep_mass_prefix(p);  // the canonical order has a faster way (a histogram of the mass)
  } else {
    if (c.data.empty()) return 0;
    const double threshold = p - 1e-6;
    const std::size_t k = mass_select(c.data, first, [threshold](double cum) { return cum >= threshold; });
    c.data.resize(k + 1);
    std::sort(c.data.begin(), c.data.end(), first);
    return k + 1;
  }
}

}  // namespace glassbox
