// Writes a run's trace as JSON Lines in the glassbox.trace/2 schema (kSchema; docs/trace-format.md).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "glassbox/file_io.hpp"
#include "glassbox/tokenizer.hpp"
#include "glassbox/traces/schema.hpp"
#include "glassbox/trace_events.hpp"

namespace glassbox::traces {

struct StepLine;  // a step line being built (writer.cpp)

// float -> JSON number with the float's shortest round-trip text (0.45, not 0.449999988), for building
// nlohmann::json values (whose printer then occasionally adds a digit: 0.9687944000000001).
double json_float(float f);

// Appends the float's shortest round-trip text (std::to_chars) in nlohmann-json's layout: "0.45",
// "100.0", "1.5e-05", "-0.0"; "null" for NaN and infinities (as nlohmann-json writes them).
void append_json_float(std::string& out, float f);

// The engine's events as schema records (schema.hpp): exactly what the writer writes, so that a reader
// gets these values back. Texts are the tokenizer's pieces, numbers the floats' shortest decimal forms.
// step_record is parse_step of the step's written line: it throws TraceError for an event no reader would take.
TraceHeader header_record(const RunHeader& h);
TraceStep step_record(const StepEvent& e, const Tokenizer& tok);
TraceKv kv_record(const KvState& kv);
TraceContext context_record(const PolicyEvent& e, const Tokenizer& tok);
TraceSummary summary_record(const Summary& s);

// The same as JSON lines (to_json of the records).
nlohmann::json header_json(const RunHeader& h);
nlohmann::json step_json(const StepEvent& e, const Tokenizer& tok);
// The same step as one line of text (no newline), written without building a json value: what JsonlWriter
// writes (step_text.cpp's write_step, the one serializer of a step). step_json(e, tok) is this text, read
// back and written again.
// With LogitsEncoding::Base64 a full step's logits are one base64 string instead (docs/trace-format.md).
std::string step_line(const StepEvent& e, const Tokenizer& tok, LogitsEncoding logits = LogitsEncoding::Decimal);
nlohmann::json summary_json(const Summary& s);
nlohmann::json kv_json(const KvState& kv);
nlohmann::json context_json(const PolicyEvent& e, const Tokenizer& tok);

// The trace goes to a temporary file beside `path` (file_io.hpp's OutputFile): the summary line renames
// it over `path`. A run cut short ends it with an error or interrupted line (so it stays valid and says
// so) and, when `path` already holds a file, puts it beside it as PATH.partial instead of replacing it,
// unless `keep_partial`. Destroyed before either, the temporary file is removed and `path` is untouched.
//
// Where step lines are built and written (WriterThread): on the calling thread, or on a writer thread:
// step() copies the event into a recycled buffer (its numbers, and the texts of the tokens it names,
// decoded there: the tokenizer is only called from the caller's thread) and returns; the thread builds
// the line (formatting the floats, the costly part of a full-logit trace) and writes it. `EveryLine`
// wakes the thread for each line (a full-logit line is worth it). With `Batched` (basic lines, cheap
// to build once the thread runs, costly to wake it for) the thread wakes itself while lines come: every
// 2 ms while a core is spare (kernels::spare_core), every 16 ms while none is. Into a device or FIFO,
// where someone may be reading live, it then writes what was handed over with one write(); into a
// regular file, a temporary file read by nobody until the summary renames it, only while a core is
// spare: otherwise when half its ring of up to 1,024 steps (about 8 MiB of them) waits, and at every
// flush. After 20 ms without lines it sleeps until step() wakes it. Lines keep their order; step()
// blocks when the ring is full. Every other call first waits for the queued steps, so the file is the
// same as without the thread. An error of the writer thread (disk full, ...) is thrown, unchanged, by
// the next step(), flush(), summary(), error() or interrupted().
enum class WriterThread { None, EveryLine, Batched };

struct StepCopy;  // (writer.cpp) the writer thread's copy of a step: the typed TraceStep, filled by step_into

// A writer thread's step copies, with the buffers the steps grew them to. A program that writes one
// trace after another with a thread (serve: one per request, on each slot) hands the same StepCopies
// to each writer, one writer at a time: after the first trace, step() then allocates nothing and
// touches no fresh memory, as in a long `run`. (A fresh writer's first steps grow their copies' buffers:
// measured on synth256-q8_0, ~2 us of a 40 us step; docs/performance.md.)
class StepCopies {
 public:
  StepCopies();
  ~StepCopies();
  StepCopies(const StepCopies&) = delete;
  StepCopies& operator=(const StepCopies&) = delete;

 private:
  friend class JsonlWriter;
  std::vector<std::unique_ptr<StepCopy>> copies_;  // the last used first
};

class JsonlWriter final : public TraceSink {
 public:
  // Throws OutputError when `path` cannot be written.
  // `logits`: how a full trace writes every logit (the default, base64 of the float32 bytes, is exact and
  // costs ~1/15 of the decimal text to write).
  // `spare_core`: whether the Batched thread may write a regular file's lines at a poll (default
  // kernels::spare_core; tests pass their own).
  // `live`: a trace is a stream someone may read as it is made, so by default a device or FIFO is written
  // in place; a command whose trace is a product (trace import) passes Live::Refused (file_io.hpp).
  JsonlWriter(const std::string& path, const Tokenizer& tok, bool keep_partial = false,
              WriterThread thread = WriterThread::EveryLine, LogitsEncoding logits = LogitsEncoding::Base64,
              std::function<bool()> spare_core = {}, OutputFile::Live live = OutputFile::Live::Allowed,
              StepCopies* reuse = nullptr);  // the thread's step copies are taken from and given back to it
  // Runs on the complete temporary trace before summary() renames it into place (OutputFile::check_before_commit).
  void check_before_commit(std::function<void(const std::filesystem::path& tmp)> check) { out_.check_before_commit(std::move(check)); }
  ~JsonlWriter() override;
  void header(const RunHeader& h) override;
  void step(const StepEvent& e) override;
  void flush() override;                    // returns when every step so far is in the file
  void summary(const Summary& s) override;  // writes the last line and renames the file into place
  void policy(const PolicyEvent& e) override;
  // Records why a run stopped early: the trace then ends with an error line, never a summary.
  // Returns where the trace went (`path`, or PATH.partial beside an existing file).
  std::string error(const std::string& message);
  // The same for a run stopped by a signal ("SIGINT", "SIGTERM"): an interrupted line.
  std::string interrupted(const std::string& signal);

 private:
  struct Pipe;
  void write(const nlohmann::json& j);
  void write_pending_header();
  std::string finish_cut_short();
  std::string path_;
  OutputFile out_;
  const Tokenizer& tok_;
  bool keep_partial_ = false;
  LogitsEncoding logits_ = LogitsEncoding::Base64;
  std::unique_ptr<StepLine> line_;  // without the thread: the one line being built ...
  std::unique_ptr<StepCopy> now_;   // ... from this step
  std::string text_;            // without the thread: its finished text
  std::unique_ptr<Pipe> pipe_;  // with it
  StepCopies* reuse_ = nullptr;  // where the thread's copies come from and go back to
  // A header whose model digest was still being computed: written, digest included, before the next
  // line (by whichever thread writes it).
  std::unique_ptr<TraceHeader> pending_header_;
  std::function<std::string()> pending_digest_;
};

}  // namespace glassbox::traces
