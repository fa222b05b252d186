// Reading and validating glassbox.trace files (every version in kReadableSchemas) (docs/trace-format.md, docs/trace.schema.json).
#pragma once
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "glassbox/traces/schema.hpp"

namespace glassbox::traces {

// A whole trace, every line checked and converted to the typed schema (schema.hpp).
// Errors are TraceErrors reading "FILE:LINE: what is wrong".
struct Trace {
  std::string path;                   // as given (for messages)
  TraceHeader header;                 // line 1
  std::vector<TraceStep> steps;       // steps[k].step == k
  std::vector<int> step_lines;        // 1-based line number of each step
  std::vector<TraceContext> context;  // context-policy firings, in order (each before the step it names)
  std::optional<TraceSummary> summary;  // the last line; absent only when read with require_summary = false
  int summary_line = 0;
  // A trace cut short (read with require_summary = false): its last line (type "error" or "interrupted");
  // absent for a complete trace or one that just stops (a crash).
  std::optional<TraceEnd> end;

  int vocab_size() const { return header.model.config.vocab_size; }
  bool full() const { return header.level == TraceLevel::Full; }
  bool complete() const { return summary.has_value(); }
  // The token appended after each step (the golden's in a replay).
  std::vector<std::int32_t> tokens() const;
  // "greedy", "top-k(k=40) -> temperature(temperature=0.8) -> dist": the sampler chain, for messages.
  std::string sampler_chain() const;
  // The version the header names (one of kReadableSchemas), e.g. "glassbox.trace/1".
  const std::string& schema() const { return header.written.schema; }
  // The legacy allowance (docs/trace-format.md, "Versions"): the file line of the first step whose logits are
  // base64 although the header says glassbox.trace/1 (written between --trace-logits base64 and the bump to
  // /2), or 0 when there is none.
  int legacy_base64_line() const;
  // Every line again, in file order, as the writer writes it (the trace's bytes, for one glassbox wrote).
  std::vector<nlohmann::json> lines() const;
};

struct ReadOptions {
  // A trace without a summary (cut short by an error or a crash) is a TraceError unless false;
  // with false, a trailing error or interrupted line or a missing summary is accepted and summary stays null.
  bool require_summary = true;
};

// Reads and validates every line and the sequence rules. Throws TraceError naming the line.
Trace read_trace(const std::string& path, const ReadOptions& opt = {});
Trace parse_trace(std::istream& in, const std::string& name, const ReadOptions& opt = {});

// Reads and validates only line 1 (cheap: for picking defaults from a golden trace).
TraceHeader read_trace_header(const std::string& path);

}  // namespace glassbox::traces
