// Trace reader: bounded lines, then each line through the typed schema (schema.cpp), then the sequence rules.
#include "glassbox/traces/reader.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/traces/writer.hpp"

namespace glassbox::traces {

using nlohmann::json;

namespace {

std::string where(const std::string& name, int line) { return name + ":" + std::to_string(line); }

// One line, at most kMaxTraceLineBytes. False at the end of the input.
bool read_line(std::istream& in, std::string& out, const std::string& name, int line) {
  out.clear();
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  for (;;) {
    const int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return any;
    }
    any = true;
    if (c == '\n') return true;
    if (out.size() >= kMaxTraceLineBytes)
      throw TraceError(where(name, line) + ": line longer than " + std::to_string(kMaxTraceLineBytes >> 20) +
                       " MiB (not a glassbox trace?)");
    out.push_back(static_cast<char>(c));
  }
}

// Opens a trace file for reading: regular files only (a FIFO or /dev/zero would block or never end).
std::ifstream open_trace(const std::string& path) {
  if (auto why = not_a_regular_file(path)) throw TraceError(path + ": " + *why + " (expected a trace file)");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw TraceError(path + ": cannot read trace file: " + std::strerror(errno));
  return f;
}

// Every entry of a beam-search step extends one of the previous step's `n_parents` live beams.
void check_beam_parents(const TraceBeams& b, int n_parents, const std::string& where) {
  for (const auto* l : {&b.live, &b.finished, &b.pruned})
    for (const auto& e : *l)
      if (e.parent < 0 || e.parent >= n_parents)
        throw TraceError(where + ": an entry's parent " + std::to_string(e.parent) + " is not one of the " + std::to_string(n_parents) +
                         " live beams of the step before");
}

// A beam search's step (step.beams): every step of the search records its beams, each entry extends a live beam
// of the step before, and the step's token is the winner's. `beam_path`: the live beam the winner's latest
// step went through; `ended`: its token finished the winner.
void check_step_beams(const Trace& t, const TraceStep& s, const std::string& w, int& beam_path, bool& beam_path_ended) {
  const int k = s.step;
  if (s.beams || (k > 0 && t.steps.back().beams)) {
    if (!s.beams || (k > 0 && !t.steps.back().beams))
      throw TraceError(w + ": step " + std::to_string(k) + (s.beams ? " has" : " lacks") +
                       " step.beams but the step before it " + (s.beams ? "does not" : "does") + " (a beam search records every step)");
    check_beam_parents(*s.beams, k == 0 ? 1 : static_cast<int>(t.steps.back().beams->live.size()), w + ": step.beams");
    if (beam_path_ended)
      throw TraceError(w + ": step " + std::to_string(k) + " follows a step whose token finished the winning hypothesis");
    // The step's token is the winner's: an entry extending the beam the previous step's token kept.
    int found = -1;
    for (std::size_t i = 0; i < s.beams->live.size() && found < 0; ++i)
      if (s.beams->live[i].parent == beam_path && s.beams->live[i].token == s.token) found = static_cast<int>(i);
    if (found < 0) {
      bool fin = false;
      for (const auto& e : s.beams->finished) fin = fin || (e.parent == beam_path && e.token == s.token);
      if (!fin)
        throw TraceError(w + ": step.token " + std::to_string(s.token) + " is neither a live beam nor a finished hypothesis "
                         "extending beam " + std::to_string(beam_path) + " of the step before (step.beams)");
      beam_path_ended = true;
    }
    beam_path = found;
  }
}

// Speculative rounds (docs/speculative.md): every step of a run with a draft says where its token
  // came from; a round's steps are consecutive and numbered, its tokens are its proposals until one
  // is refused, and its last step lists them all.
void check_step_speculative(const Trace& t, const TraceStep& s, const std::string& w) {
  const int k = s.step;
  if (s.speculative.has_value() != t.header.speculative.has_value())
    throw TraceError(w + ": step " + std::to_string(k) +
                     (s.speculative ? " has a speculative record but the header names no draft model"
                                    : " has no speculative record but the header names a draft model"));
  if (s.speculative) {
    const TraceSpeculative& sp = *s.speculative;
    const TraceSpeculative* prev = k > 0 && t.steps.back().speculative ? &*t.steps.back().speculative : nullptr;
    const bool opens = sp.index == 0;
    const int expect_round = !prev ? 0 : opens ? prev->round + 1 : prev->round;
    if (sp.round != expect_round || (!opens && (!prev || prev->proposals || sp.index != prev->index + 1)))
      throw TraceError(w + ": step.speculative: round " + std::to_string(sp.round) + " index " + std::to_string(sp.index) +
                       " does not follow the previous step's" +
                       (prev ? " (round " + std::to_string(prev->round) + " index " + std::to_string(prev->index) +
                                   (prev->proposals ? ", which ended its round)" : ")")
                             : std::string()));
    if (prev && opens && !prev->proposals)
      throw TraceError(w + ": step.speculative: round " + std::to_string(sp.round) + " opens before round " +
                       std::to_string(prev->round) + " listed its proposals on its last step");
    if (sp.draft && sp.draft->verdict == "accepted" && sp.draft->id != s.token)
      throw TraceError(w + ": step.speculative.draft.id " + std::to_string(sp.draft->id) + " was accepted but the step's token is " +
                       std::to_string(s.token));
    if (sp.proposals) {
      const auto& ps = *sp.proposals;
      if (static_cast<int>(ps.size()) > t.header.speculative->k)
        throw TraceError(w + ": step.speculative.proposals: " + std::to_string(ps.size()) + " in a round of at most k = " +
                         std::to_string(t.header.speculative->k));
      if (sp.outcome == "bonus" && static_cast<int>(ps.size()) != sp.index)
        throw TraceError(w + ": step.speculative: a bonus token at index " + std::to_string(sp.index) + " after " +
                         std::to_string(ps.size()) + " proposals");
      if (sp.outcome != "bonus" && sp.index >= static_cast<int>(ps.size()))
        throw TraceError(w + ": step.speculative: index " + std::to_string(sp.index) + " but the round lists only " +
                         std::to_string(ps.size()) + " proposals");
      for (std::size_t i = 0; i < ps.size(); ++i) {
        const int at = static_cast<int>(i);
        const std::string want = at < sp.index ? "accepted" : at == sp.index ? sp.draft->verdict : "unchecked";
        if (ps[i].verdict != want)
          throw TraceError(w + ": step.speculative.proposals[" + std::to_string(i) + "].verdict: '" + ps[i].verdict +
                           "', expected '" + want + "' in a round that ends at index " + std::to_string(sp.index));
      }
      // The steps of the round: each token was the proposal at its place.
      for (int back = 1; back <= sp.index; ++back) {
        const TraceStep& earlier = t.steps[t.steps.size() - static_cast<std::size_t>(back)];
        const std::size_t place = static_cast<std::size_t>(sp.index - back);
        if (place < ps.size() && earlier.token != ps[place].id)
          throw TraceError(w + ": step.speculative.proposals[" + std::to_string(place) + "].id " + std::to_string(ps[place].id) +
                           " but that place's step chose " + std::to_string(earlier.token));
      }
    }
  }
}

// The summary against the steps before it: their count, the beam search's winner and steps, the rounds' tokens.
void check_summary(const Trace& t, const TraceSummary& x, const std::string& w) {
  const int gen = x.generated;
  const std::string& reason = x.stop_reason;
  // stop_token / stop_text: the last step chose the token that ended the run, not counted.
  const int expect = reason == "stop_token" || reason == "stop_text" ? gen + 1 : gen;
  if (static_cast<int>(t.steps.size()) != expect)
    throw TraceError(w + ": summary says " + std::to_string(gen) + " generated (stop: " + reason + "), which means " +
                     std::to_string(expect) + " steps, but the trace has " + std::to_string(t.steps.size()));
  if (gen > t.header.max_tokens)
    throw TraceError(w + ": summary says " + std::to_string(gen) + " generated, more than max_tokens " + std::to_string(t.header.max_tokens));
  const bool beam_steps = !t.steps.empty() && t.steps.back().beams;
  if (x.beam.has_value() != beam_steps && !(x.beam && t.steps.empty()))
    throw TraceError(w + ": " + (x.beam ? "summary.beam present but the steps have no step.beams"
                                         : "the steps carry step.beams but the summary has no summary.beam"));
  if (x.beam && !t.steps.empty()) {
    const TraceBeamSummary& b = *x.beam;
    if (b.hypotheses.empty() || b.hypotheses[0].tokens != t.tokens())
      throw TraceError(w + ": summary.beam.hypotheses[0] (the winner) is not the steps' tokens " + ids_text(t.tokens()));
    if (b.search_steps != static_cast<int>(t.steps.size() + b.after.size()))
      throw TraceError(w + ": summary.beam.search_steps " + std::to_string(b.search_steps) + ", but the trace records " +
                       std::to_string(t.steps.size()) + " steps and " + std::to_string(b.after.size()) + " after them");
    int n_live = static_cast<int>(t.steps.back().beams->live.size());
    for (std::size_t i = 0; i < b.after.size(); ++i) {
      check_beam_parents(b.after[i], n_live, w + ": summary.beam.after[" + std::to_string(i) + "]");
      n_live = static_cast<int>(b.after[i].live.size());
    }
  }
  if (x.speculative.has_value() != t.header.speculative.has_value())
    throw TraceError(w + ": summary " + (x.speculative ? "has speculative figures but the header names no draft model"
                                                        : "has no speculative figures but the header names a draft model"));
  if (x.speculative && x.speculative->tokens != static_cast<int>(t.steps.size()))
    throw TraceError(w + ": summary.speculative.tokens " + std::to_string(x.speculative->tokens) + " but the trace has " +
                     std::to_string(t.steps.size()) + " steps");
}

}  // namespace

Trace parse_trace(std::istream& in, const std::string& name, const ReadOptions& opt) {
  Trace t;
  t.path = name;
  std::string text;
  int line = 0;
  int last_step_line = 0;
  bool ended = false;  // summary seen
  int vocab = 0;
  bool full = false;
  std::optional<TraceContext> context;      // a context line not yet followed by its step
  std::optional<TraceContext> pruned_then;  // the engine's context line after a chat's prune-turns line, both before step 0
  int beam_path = 0;             // beam search: the live beam the winner's latest step went through
  bool beam_path_ended = false;  // ... or its token finished the winner
  while (read_line(in, text, name, line + 1)) {
    ++line;
    const std::string w = where(name, line);
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (ended) throw TraceError(w + ": line after the summary (the summary is the last line)");
    if (text.empty()) throw TraceError(w + ": empty line (JSON Lines has one object per line)");
    const json j = parse_trace_line(text, w);
    const std::string type = line_type(j);
    if (type == "error" || type == "interrupted") {
      TraceEnd end = parse_end(j);
      const std::string& msg = end.message;
      if (line == 1) throw TraceError(w + ": the run failed before it started: " + msg);
      if (opt.require_summary)
        throw TraceError(w + ": cut short: the run " +
                         (type == "error" ? std::string("stopped with an error") : "was " + msg) + " after " +
                         std::to_string(t.steps.size()) + " steps" + (type == "error" ? ": " + msg : std::string()));
      // tolerated: the trace ends here, summary stays absent
      if (read_line(in, text, name, line + 1)) throw TraceError(where(name, line + 1) + ": line after the " + type + " line");
      t.end = std::move(end);
      return t;
    }
    if (line == 1) {
      if (type != "header") throw TraceError(w + ": expected the header first, got a " + type + " line");
      t.header = parse_header(j, w);
      vocab = t.vocab_size();
      full = t.full();
      continue;
    }
    if (type == "header") throw TraceError(w + ": a second header (a trace holds one run)");
    if (type == "step") {
      TraceStep s = parse_step(j, w, vocab, full);
      const int k = s.step;
      const int expect = static_cast<int>(t.steps.size());
      if (k != expect)
        throw TraceError(w + ": step " + std::to_string(k) + " out of order (expected step " + std::to_string(expect) +
                         (expect > 0 ? " after step " + std::to_string(expect - 1) + " on line " + std::to_string(last_step_line) : std::string()) + ")");
      if ((k == 0) != (s.phase == TracePhase::Prefill))
        throw TraceError(w + ": step " + std::to_string(k) + " has phase " + phase_name(s.phase) +
                         " (step 0 is the prefill, later steps decode)");
      std::vector<std::int32_t> ids = t.header.prompt_ids;
      int expect_pos = k == 0 ? static_cast<int>(ids.size()) - 1 : t.steps.back().pos + 1;
      if (context && context->policy == "prune-turns") {
        // The chat dropped turns before encoding: the header's prompt is what the prefill holds.
        if (context->kept != static_cast<int>(ids.size()))
          throw TraceError(w + ": the prune-turns line before it keeps " + std::to_string(context->kept) +
                           " tokens but the header's prompt_ids hold " + std::to_string(ids.size()));
        context = pruned_then;
        pruned_then.reset();
      }
      if (context) {  // a context policy dropped tokens just before this step
        if (k == 0) {
          const int from = context->dropped_from, to = context->dropped_to;
          if (to > static_cast<int>(ids.size()))
            throw TraceError(w + ": the context line before it drops positions up to " + std::to_string(to) + " of a " +
                             std::to_string(ids.size()) + "-token prompt");
          ids.erase(ids.begin() + from, ids.begin() + to);
          expect_pos = context->kept - 1;
        } else {
          expect_pos = context->kept;
        }
        context.reset();
      }
      if (s.pos != expect_pos)
        throw TraceError(w + ": step " + std::to_string(k) + " at pos " + std::to_string(s.pos) + ", expected pos " + std::to_string(expect_pos));
      const std::vector<std::int32_t> expect_in = k == 0 ? ids : std::vector<std::int32_t>{t.steps.back().token};
      if (s.input_ids != expect_in)
        throw TraceError(w + ": step " + std::to_string(k) + " input_ids " + ids_text(s.input_ids) + ", expected " +
                         (k == 0 ? "the header's prompt_ids " : "the previous step's token ") + ids_text(expect_in));
      if (s.lens) {
        const int n_layers = t.header.model.config.n_layers;
        for (std::size_t i = 0; i < s.lens->size(); ++i)
          if ((*s.lens)[i].layer > n_layers)
            throw TraceError(w + ": step.lens[" + std::to_string(i) + "].layer: " + std::to_string((*s.lens)[i].layer) +
                             " (expected 1.." + std::to_string(n_layers) + ", the model's layers)");
      }
      check_step_beams(t, s, w, beam_path, beam_path_ended);
      check_step_speculative(t, s, w);
      t.steps.push_back(std::move(s));
      t.step_lines.push_back(line);
      last_step_line = line;
      continue;
    }
    if (type == "context") {
      TraceContext x = parse_context(j, w);
      if (x.step != static_cast<int>(t.steps.size()))
        throw TraceError(w + ": context line for step " + std::to_string(x.step) + " (expected step " + std::to_string(t.steps.size()) +
                         ", the next one)");
      // A chat's prune-turns line may be followed by the engine's own cut of a prompt still too long.
      if (context && context->policy == "prune-turns" && x.policy != "prune-turns" && !pruned_then) {
        pruned_then = x;
        t.context.push_back(std::move(x));
        continue;
      }
      if (context) throw TraceError(w + ": two context lines without a step between them");
      context = x;
      t.context.push_back(std::move(x));
      continue;
    }
    if (type == "summary") {
      TraceSummary x = parse_summary(j, w);
      check_summary(t, x, w);
      t.summary = std::move(x);
      t.summary_line = line;
      ended = true;
      continue;
    }
    throw TraceError(w + ": unknown line type '" + type + "' (expected header, step, summary, error or interrupted)");
  }
  if (in.bad()) throw TraceError(name + ": read failed");
  if (line == 0) throw TraceError(name + ":1: empty file (expected a glassbox.trace header)");
  if (!ended && opt.require_summary)
    throw TraceError(where(name, line) + ": cut short: the trace ends after " +
                     (t.steps.empty() ? std::string("the header") : "step " + std::to_string(t.steps.size() - 1)) +
                     " on line " + std::to_string(line) + " without its summary line (the run did not complete)");
  return t;
}

Trace read_trace(const std::string& path, const ReadOptions& opt) {
  std::ifstream f = open_trace(path);
  return parse_trace(f, path, opt);
}

TraceHeader read_trace_header(const std::string& path) {
  std::ifstream f = open_trace(path);
  std::string text;
  if (!read_line(f, text, path, 1)) throw TraceError(path + ":1: empty file (expected a glassbox.trace header)");
  if (!text.empty() && text.back() == '\r') text.pop_back();
  const std::string w = where(path, 1);
  const json j = parse_trace_line(text, w);
  const std::string type = line_type(j);
  if (type == "error") throw TraceError(w + ": the run failed before it started: " + parse_end(j).message);
  if (type != "header") throw TraceError(w + ": expected the header first, got a " + type + " line");
  return parse_header(j, w);
}

int Trace::legacy_base64_line() const {
  if (schema_version(schema()) != 1) return 0;
  for (std::size_t k = 0; k < steps.size(); ++k)
    if (steps[k].written.logits == LogitsEncoding::Base64) return k < step_lines.size() ? step_lines[k] : static_cast<int>(k) + 2;  // no line numbers: as written
  return 0;
}

std::vector<std::int32_t> Trace::tokens() const {
  std::vector<std::int32_t> out;
  out.reserve(steps.size());
  for (const auto& s : steps) out.push_back(s.token);
  return out;
}

std::string Trace::sampler_chain() const {
  std::string out;
  for (const auto& s : header.samplers) out += (out.empty() ? "" : " -> ") + plugin_text(s);
  return out;
}

std::vector<json> Trace::lines() const {
  std::vector<json> out;
  out.reserve(steps.size() + context.size() + 3);
  out.push_back(to_json(header));
  std::size_t c = 0;
  for (const auto& s : steps) {
    for (; c < context.size() && context[c].step <= s.step; ++c) out.push_back(to_json(context[c]));
    out.push_back(to_json(s));
  }
  for (; c < context.size(); ++c) out.push_back(to_json(context[c]));
  if (summary) out.push_back(to_json(*summary));
  if (end) out.push_back(to_json(*end));
  return out;
}

}  // namespace glassbox::traces
