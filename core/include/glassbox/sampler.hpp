// The Sampler plugin interface: one stage of a llama.cpp-style chain over a candidate array.
#pragma once
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
// Logits are the source of truth; probs are derived by softmax() over what remains.
struct Candidates {
  std::vector<Candidate> data;  // reserved to vocab size once; never reallocated in the loop
  bool sorted = false;          // data is in descending logit order (ties: lower id first)
  int selected = -1;            // index into data of the chosen token, once a stage selects
  float u = -1.0f;              // the uniform number a drawing stage used (-1: none)

  // Sorts by descending logit if needed and sets prob = softmax(logit) over `data`.
  void softmax();
  // Sorts by descending logit (ties by lower id) if not sorted yet.
  void sort();
  // Keeps only the first n entries (after sort()).
  void truncate(std::size_t n) { if (n < data.size()) data.resize(n); }
};

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
