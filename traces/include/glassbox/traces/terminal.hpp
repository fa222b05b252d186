// `glassbox run --show-probs`: each token's top candidates as a bar chart, on stderr, under the token.
#pragma once
#include <ostream>
#include <string>

#include "glassbox/tokenizer.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox::traces {

// A TraceSink drawing, for each step, the raw distribution's top candidates:
//
//   ── step 3 · pos 7 → " girl"  p 0.620 · entropy 1.23 nats · argmax ──
//     " girl"        ████████████████████████▊      0.620 ◀
//     " boy"         ███████▏                       0.181
//
// A step's chart is written when the next step arrives (or at the summary), that is after its token
// was streamed to stdout, so that in a terminal each chart sits under its token.
class ProbsSink final : public TraceSink {
 public:
  ProbsSink(std::ostream& out, const Tokenizer& tok, int top = 5, int bar_width = 30);
  void header(const RunHeader& h) override;
  void step(const StepEvent& e) override;
  void summary(const Summary& s) override;
  void flush() override;  // writes the pending chart now (when a run fails)

 private:
  std::ostream& out_;
  const Tokenizer& tok_;
  int top_, width_;
  std::string pending_;
};

// A beam-search step's record as lines of text (probs_chart appends it to a beam step's chart).
std::string beams_text(const BeamStep& b);

// One chart, as ProbsSink draws it (for tests and other front ends).
std::string probs_chart(const StepEvent& e, const Tokenizer& tok, int top = 5, int bar_width = 30);

}  // namespace glassbox::traces
