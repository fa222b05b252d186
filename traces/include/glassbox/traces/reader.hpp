// Reading and validating glassbox.trace/1 files (docs/trace-format.md, docs/trace.schema.json).
#pragma once
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::traces {

// A whole trace, every line checked. Errors are TraceErrors reading "FILE:LINE: what is wrong".
struct Trace {
  std::string path;                   // as given (for messages)
  nlohmann::json header;              // line 1
  std::vector<nlohmann::json> steps;  // steps[k]["step"] == k
  std::vector<int> step_lines;        // 1-based line number of each step
  std::vector<nlohmann::json> context;  // context-policy firings ("type": "context"), in order
  nlohmann::json summary;             // the last line; null only when read with require_summary = false
  int summary_line = 0;
  // A trace cut short (read with require_summary = false): its last line's type ("error" or
  // "interrupted") and message; empty for a complete trace or one that just stops (a crash).
  std::string end_type, end_message;

  int vocab_size() const { return header["model"]["config"]["vocab_size"].get<int>(); }
  bool full() const { return header["trace_level"] == "full"; }
  bool complete() const { return summary.is_object(); }
  // The token appended after each step (the golden's in a replay).
  std::vector<std::int32_t> tokens() const;
  // "greedy", "top-k(k=40) -> temperature(temperature=0.8) -> dist": the sampler chain, for messages.
  std::string sampler_chain() const;
};

// Limits on what a trace file may ask of the reader (docs/reliability.md): a longer line or deeper
// nesting is a TraceError naming the line, before anything is allocated for it.
inline constexpr std::size_t kMaxTraceLineBytes = std::size_t{64} << 20;  // a full step of a 1M-token vocabulary fits
inline constexpr int kMaxTraceJsonDepth = 64;                                // the schema itself needs 5

struct ReadOptions {
  // A trace without a summary (cut short by an error or a crash) is a TraceError unless false;
  // with false, a trailing error or interrupted line or a missing summary is accepted and summary stays null.
  bool require_summary = true;
};

// Reads and validates every line and the sequence rules. Throws TraceError naming the line.
Trace read_trace(const std::string& path, const ReadOptions& opt = {});
Trace parse_trace(std::istream& in, const std::string& name, const ReadOptions& opt = {});

// Reads and validates only line 1 (cheap: for picking defaults from a golden trace).
nlohmann::json read_trace_header(const std::string& path);

// The per-line shape checks, as in docs/trace.schema.json. `where` prefixes messages ("t.jsonl:3").
// check_step needs the header's vocab_size and trace level.
void check_header(const nlohmann::json& j, const std::string& where);
void check_step(const nlohmann::json& j, const std::string& where, int vocab_size, bool full);
void check_summary(const nlohmann::json& j, const std::string& where);
void check_context(const nlohmann::json& j, const std::string& where);

}  // namespace glassbox::traces
