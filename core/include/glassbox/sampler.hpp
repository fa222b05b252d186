// The Sampler plugin interface: one stage of a llama.cpp-style chain over a candidate array.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "glassbox/params.hpp"
#include "glassbox/rng.hpp"

namespace glassbox {

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
  float u = -1.0f;              // the uniform number a drawing stage used (-1: none)

  // The canonical order: a before b when a.logit > b.logit, or equal logits and a.id < b.id.
  static bool before(const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }

  // Sorts (if needed) and sets prob = softmax(logit) over `data`.
  void softmax();
  // Sets prob = softmax(logit) over `data` without reordering it (one pass; max, then
  // exp(logit - max) / sum with the sum in double). -inf logits get probability 0.
  void normalize();
  // Sorts into canonical order if not sorted yet.
  void sort();
  // Makes data[0..n) the n first candidates in canonical order, in order; the rest stay
  // unordered. Cheaper than sort() when n is small (nth_element + sort of the prefix).
  void sort_prefix(std::size_t n);
  // Keeps only the first n entries (after sort() or sort_prefix(n)).
  void truncate(std::size_t n) { if (n < data.size()) data.resize(n); }
  // The index of the canonical first candidate (the argmax; ties: lower id), in one pass.
  int argmax() const;
  // Keeps the smallest prefix, in the order `first` defines, whose probability mass
  // reaches p (>= p - 1e-6, so that .4 + .3 reaches 0.7 despite float rounding); always at
  // least one entry. Needs normalize()d probs. Sorts only growing prefixes (64, 256, 1024,
  // ...) until the mass is reached, so a peaked distribution never pays for a full sort.
  // Returns the number kept; afterwards data is that prefix, in `first` order.
  template <class Less>
  std::size_t keep_mass_prefix(double p, Less first);
  // The weighted draw: u = rng.uniform(), then selects the first candidate, in canonical
  // order, whose cumulative probability (summed in double) exceeds u. Sorts only as far
  // as the draw reaches. Sets probs (normalize()), `u` and `selected`.
  void draw(Rng& rng);
};

template <class Less>
std::size_t Candidates::keep_mass_prefix(double p, Less first) {
  const std::size_t n = data.size();
  double cum = 0;
  std::size_t done = 0, m = std::min<std::size_t>(n, 64);
  while (done < n) {
    std::partial_sort(data.begin() + done, data.begin() + m, data.end(), first);
    for (std::size_t i = done; i < m; ++i) {
      cum += data[i].prob;
      if (cum >= p - 1e-6) {
        data.resize(i + 1);
        return i + 1;
      }
    }
    done = m;
    m = std::min(n, m * 4);
  }
  return n;  // rounding kept the mass just below p: everything stays
}

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string name() const = 0;
  virtual const Params& params() const = 0;
  // Edits the candidates; a selecting stage (greedy, dist, mirostat) sets `selected`.
  virtual void apply(Candidates& c, Rng& rng) = 0;
  // Called with each token the engine accepts (prompt tokens included), for stateful stages.
  virtual void accept(std::int32_t token) {}
  // Forgets state between sequences.
  virtual void reset() {}
  // True when this stage chooses the token; stages placed after it have no effect.
  virtual bool selects() const { return false; }
};

}  // namespace glassbox
