// Writes a run's trace as JSON Lines in the glassbox.trace/1 schema (docs/trace-format.md).
#pragma once
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "glassbox/tokenizer.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox::traces {

inline constexpr const char* kSchema = "glassbox.trace/1";

// float -> JSON number with the float's shortest round-trip text (0.45, not 0.449999988).
double json_float(float f);

// JSON dump that never throws on invalid UTF-8 (a byte-fallback piece may be half a character).
std::string dump(const nlohmann::json& j);

nlohmann::json header_json(const RunHeader& h);
nlohmann::json step_json(const StepEvent& e, const Tokenizer& tok);
nlohmann::json summary_json(const Summary& s);
nlohmann::json kv_json(const KvState& kv);
nlohmann::json context_json(const PolicyEvent& e, const Tokenizer& tok);

class JsonlWriter final : public TraceSink {
 public:
  // Opens (truncates) `path`; throws TraceError when it cannot be written.
  JsonlWriter(const std::string& path, const Tokenizer& tok);
  void header(const RunHeader& h) override;
  void step(const StepEvent& e) override;
  void summary(const Summary& s) override;
  void policy(const PolicyEvent& e) override;
  // Records why a run stopped early: the trace then ends with an error line, never a summary.
  void error(const std::string& message);

 private:
  void write(const nlohmann::json& j);
  std::string path_;
  std::ofstream out_;
  const Tokenizer& tok_;
};

}  // namespace glassbox::traces
