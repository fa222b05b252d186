// Comparing two traces step by step: tokens, distributions, sampler stages (docs/golden-traces.md).
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "glassbox/traces/reader.hpp"

namespace glassbox::traces {

// Defaults and their reasons: docs/golden-traces.md#tolerances.
struct DiffOptions {
  double atol = 1e-4;  // absolute part of every tolerance (logprob, logit)
  double rtol = 1e-5;  // relative part: |Δx| <= atol + rtol * |x_golden|
  double kl = 1e-6;    // largest KL per step, in nats, in either direction
  int top_k = 0;       // candidates compared per step; 0: as many as both traces list
  double nmse = 1e-6;  // largest NMSE of the (centred) logits where both traces have every logit
  // Whether a different token is a regression by itself. false (quantized profiles, other engines): only
  // when one side's token is not in the other's top-N list (vLLM's check); otherwise a note.
  bool tokens_exact = true;
  std::string profile;  // the profile these came from ("" : the defaults or flags), for the report
  // No --profile and no tolerance given (`trace diff`): on a regression, the result's hints propose the profile
  // of the models' weight types (proposed_profile below).
  bool propose_profile = false;
};

// Named tolerance profiles (docs/golden-traces.md#tolerance-profiles): f32, f16, q8_0, q4_0, q4_1, q4_k,
// q5_k, q6_k, llamacpp-server, openai. nullopt for an unknown name.
std::optional<DiffOptions> diff_profile(const std::string& name);
const std::vector<std::string>& diff_profile_names();

// The tolerance profile of a model's weights, from a trace header's model.weight_types ("F16:5, F32:11, Q4_0:31";
// docs/golden-traces.md#a-profile-from-the-weight-types): each type's own profile (F32 -> f32, F16 -> f16, Q8_0 ->
// q8_0, Q4_0 -> q4_0, Q4_1 -> q4_1, Q4_K -> q4_k, Q5_K -> q5_k, Q6_K -> q6_k) and, for a mix, the loosest of them.
struct WeightTypesProfile {
  std::vector<std::string> types;       // the type names as listed (counts dropped)
  std::string profile;                  // the loosest type's profile; empty when no type is listed or one has none
  std::string type;                     // the type that decided it ("Q4_0" in the example)
  std::vector<std::string> unprofiled;  // listed types no profile is measured for (BF16, Q5_0, Q2_K, IQ4_NL, ...)
};
WeightTypesProfile weight_types_profile(const std::string& weight_types);
// The profile `trace diff` proposes for GOLDEN and NEW (the loosest over both traces' weight types; an imported
// trace's header names the model given to `trace import`, not the engine's, and does not count), and the
// lines that say why: empty when there is nothing to propose (both models' weights are F32, or neither trace
// records its types).
struct ProfileProposal {
  std::string profile;             // empty: none to propose (the lines may still say why, e.g. BF16 weights)
  std::vector<std::string> lines;  // for the report, each one line
};
ProfileProposal proposed_profile(const Trace& golden, const Trace& next);

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
  bool reported = true;         // both sides give a distribution at this step (an engine may report none)
  double kl_reverse = 0;        // KL(new || golden), over the same partition as kl
  double nmse = -1;             // NMSE of the centred logits where both have every logit, else -1
  int shared = 0;               // candidates whose probability both sides know
  bool golden_in_new = true;    // golden's token is in new's listed top-N (vLLM's membership check) ...
  bool new_in_golden = true;    // ... and new's in golden's
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
  int history_divergence = -1;      // in a replay: the first step whose own pick differed from the forced token
                                    // (from the next step on, the compared histories are the golden's, not new's own)
  std::string compared;             // "raw", or "post" (an imported post-sampling distribution against new's last stage)
  bool imported = false;            // either side came from another engine (trace import)
  std::vector<std::string> regressions;  // each one line; any -> exit 1
  std::vector<std::string> notes;        // differences that are not regressions (other seed, model file, ...)
  std::vector<std::string> hints;        // after a regression, with DiffOptions::propose_profile: proposed_profile's lines

  bool regression() const { return !regressions.empty(); }
  int first_divergent_step() const;  // the earlier of the two "first"s, -1 if none
};

// Compares NEW against GOLDEN. Throws TraceError when they cannot be compared (other vocabulary).
DiffResult diff_traces(const Trace& golden, const Trace& next, const DiffOptions& opt = {});

// The human report: headers, the first divergent step side by side, the summary, the verdict.
void write_diff_report(std::ostream& out, const Trace& golden, const Trace& next, const DiffResult& r,
                       const DiffOptions& opt);

// One line per compared step: tokens, top-N membership both ways, KL both ways, max |Δlogprob|, NMSE, verdict.
void write_step_verdicts(std::ostream& out, const Trace& golden, const Trace& next, const DiffResult& r);

// A token's text for a one-line report: quoted, control characters escaped, at most `max` characters; a special
// token (token_text.hpp) by its bare name, unquoted (</s>).
std::string show_text(const std::string& text, std::size_t max = 16);

}  // namespace glassbox::traces
