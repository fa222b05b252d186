// The Sampler plugin interface: one stage of a llama.cpp-style chain over a candidate array.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
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
// much as they need, so a 128k-entry step with top-k or top-p stays cheap. The methods are
// compiled once, in libglassbox (sampling.cpp), which every module links.
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
  // Keeps the smallest canonical prefix (most likely first) whose probability mass reaches p
  // (>= p - 1e-6, so that .4 + .3 reaches 0.7 despite float rounding); always at least one entry.
  // Needs normalize()d probs. Expected O(n): over more than 256 entries the boundary is found by a
  // histogram of the mass over the logits, otherwise by quickselect on the mass (mass_select), and
  // only the kept prefix is sorted. Returns the number kept; afterwards data is that prefix, in
  // canonical order. The same cut-off in an order of your own: keep_mass_prefix in mass_select.hpp.
  std::size_t keep_mass_prefix(double p);
  // The weighted draw: u = rng.uniform(), then selects the first candidate, in canonical
  // order, whose cumulative probability exceeds u (inverse CDF, most likely first). O(n), no
  // full sort (a histogram of the mass over the logits, then only the boundary's bucket sorted;
  // mass_select for small or nearly flat arrays); may reorder `data`. Sets probs (normalize()),
  // `u` and `selected`.
  void draw(Rng& rng);
};

// How a stage chooses the token, as it declares it (core asks the stage, never its name):
//   None     it reshapes or trims the candidates and leaves the choice to a later stage;
//   Argmax   it selects the canonical first candidate of what it is given (greedy): its distribution is
//            the one-hot of that candidate;
//   Draw     it draws from the normalised probabilities of what it is given, with no state of its own
//            (dist): its distribution is exactly its input, which speculative decoding can compare;
//   Adaptive it selects with state that moves with each token (mirostat): it has no fixed distribution
//            to hand out.
enum class Selection { None, Argmax, Draw, Adaptive };

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
  // How this stage chooses the token (Selection above); stages placed after a selecting one have no effect.
  virtual Selection selection() const { return Selection::None; }
  bool selects() const { return selection() != Selection::None; }
  // True for a stage that must see the raw distribution before any other stage: a grammar, whose mask
  // must come before truncation (llama.cpp applies the grammar first). When an option other than
  // --sampler adds the stage (RunSpec::extra_stages), the chain's assembly puts it in front; stages the
  // user wrote in --sampler keep the user's order.
  virtual bool runs_first() const { return false; }
  // Why this stage, with the parameters it was made with, leaves every step's candidates as they are,
  // and a value that turns it on ("probability = 0 (off, its default): xtc:probability=0.5 turns it
  // on"); empty when it acts. Stages that are off by default (xtc, dry, dynamic-temperature) say so, so
  // that a chain naming one warns instead of changing nothing in silence (build_sampler_stages).
  virtual std::string noop_reason() const { return {}; }
};

}  // namespace glassbox
