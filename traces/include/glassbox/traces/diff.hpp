// Comparing two traces step by step: tokens, distributions, sampler stages (docs/golden-traces.md).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "glassbox/traces/reader.hpp"

namespace glassbox::traces {

// Defaults and their reasons: docs/golden-traces.md#tolerances.
struct DiffOptions {
  double atol = 1e-4;  // absolute part of every tolerance (logprob, logit)
  double rtol = 1e-5;  // relative part: |Δx| <= atol + rtol * |x_golden|
  double kl = 1e-6;    // largest KL(golden || new) per step, in nats
  int top_k = 0;       // candidates compared per step; 0: as many as both traces list
};

// One compared step.
struct StepDiff {
  int step = 0;
  bool tokens_agree = true;     // same appended token and same sampler pick
  double dlogprob = 0;          // max |Δlogprob| over the top-K union (raw distribution)
  std::int32_t dlogprob_id = -1;
  bool dlogprob_bound = false;  // the max is a lower bound (a candidate missing from one side's top-K)
  double dlogit = 0;            // max |Δlogit| (over every logit when both traces have them, else the top-K)
  std::int32_t dlogit_id = -1;
  double kl = 0;                // KL(golden || new): exact with full logits, else a lower bound over the top-K
  bool kl_exact = false;
  double dstage = 0;            // max |Δlogprob| over the top-K of any sampler stage's distribution
  std::string dstage_name;
  int stage_index = -1;         // the first sampler stage whose distribution is out of tolerance (-1: none)
  bool raw_within = true;       // the model's own distribution agrees (a difference, if any, is in a stage)
  // The logit lens, where both traces have it: per point (after block l, or inside it after attention),
  // max |Δlogprob| over the union of the two top lists; a point out of tolerance is a failure naming its layer.
  struct LensPoint {
    int layer = 0;
    bool attn = false;
    double dlogprob = 0;
  };
  std::vector<LensPoint> lens;
  std::vector<std::string> failures;  // why this step is out of tolerance (empty: within)
};

struct DiffResult {
  int golden_steps = 0, new_steps = 0;
  int top_k = 0;                    // K used
  bool full_logits = false;         // both traces have every logit
  std::vector<StepDiff> steps;      // the compared steps, in order
  int token_agree = 0;              // compared steps whose tokens agree
  int first_token_divergence = -1;  // first compared step whose tokens differ
  int first_out_of_tolerance = -1;  // first compared step with a failure
  int context_divergence = -1;      // first step whose appended tokens differ: later steps are not comparable
  std::vector<std::string> regressions;  // each one line; any -> exit 1
  std::vector<std::string> notes;        // differences that are not regressions (other seed, model file, ...)

  bool regression() const { return !regressions.empty(); }
  int first_divergent_step() const;  // the earlier of the two "first"s, -1 if none
};

// Compares NEW against GOLDEN. Throws TraceError when they cannot be compared (other vocabulary).
DiffResult diff_traces(const Trace& golden, const Trace& next, const DiffOptions& opt = {});

// The human report: headers, the first divergent step side by side, the summary, the verdict.
void write_diff_report(std::ostream& out, const Trace& golden, const Trace& next, const DiffResult& r,
                       const DiffOptions& opt);

// A token's text for a one-line report: quoted, control characters escaped, at most `max` characters.
std::string show_text(const std::string& text, std::size_t max = 16);

}  // namespace glassbox::traces
