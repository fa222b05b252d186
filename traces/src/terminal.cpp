// The terminal view of a run: bar charts of each step's candidates, drawn with Unicode block characters.
#include "glassbox/traces/terminal.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "glassbox/traces/diff.hpp"

namespace glassbox::traces {

namespace {

// A bar of `frac` (0..1) of `width` cells, in eighths of a cell.
std::string bar(double frac, int width) {
  static const char* const kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int eighths = static_cast<int>(std::lround(std::clamp(frac, 0.0, 1.0) * width * 8));
  std::string s;
  for (int i = 0; i < eighths / 8; ++i) s += "█";
  s += kEighths[eighths % 8];
  const int used = eighths / 8 + (eighths % 8 ? 1 : 0);
  s.append(static_cast<std::size_t>(std::max(0, width - used)), ' ');
  return s;
}

// Pads a UTF-8 string to `cols` characters.
std::string pad(const std::string& s, std::size_t cols) {
  std::size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  return chars >= cols ? s : s + std::string(cols - chars, ' ');
}

std::string fixed(double x, int prec) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", prec, x);
  return buf;
}

// A token as shown: its text quoted, or, for a control token (BOS, EOS, <|eot_id|>), its bare name marked
// special: llama2.c's vocabulary spells EOS "\n</s>\n", which would read as text with two line breaks.
std::string token_label(const Tokenizer& tok, std::int32_t prev, std::int32_t id, std::size_t max) {
  if (tok.token_type(id) == TokenType::Control) {
    std::string name(tok.piece(id));
    const auto b = name.find_first_not_of(" \n\r\t"), e = name.find_last_not_of(" \n\r\t");
    name = b == std::string::npos ? "#" + std::to_string(id) : name.substr(b, e - b + 1);
    return name + " (special)";
  }
  return show_text(std::string(tok.decode(prev, id)), max);
}

// A speculative step in words: where its token came from, and at the round's end every verdict.
std::string speculative_lines(const SpeculativeStep& sp, const Tokenizer& tok, std::int32_t prev) {
  std::string s = "  speculative round " + std::to_string(sp.round) + ", token " + std::to_string(sp.index) + ": ";
  if (const SpecProposal* d = sp.draft) {
    s += "draft proposed " + token_label(tok, prev, d->id, 14) + " (q " + fixed(d->q, 3) + "), target p " + fixed(d->p, 3);
    if (d->verdict == SpecProposal::Accepted)
      s += d->u >= 0 ? " → accepted (u " + fixed(d->u, 3) + " < p/q " + fixed(d->p / d->q, 3) + ")" : std::string(" → accepted (the target's argmax)");
    else
      s += d->u >= 0 ? " → rejected (u " + fixed(d->u, 3) + " ≥ p/q " + fixed(d->p / d->q, 3) + ")" : std::string(" → rejected (not the target's argmax)");
    s += "\n";
  } else {
    s += "every proposal accepted: a bonus token drawn from the target's p\n";
  }
  if (!sp.residual.empty()) {
    s += "  resampled from norm(max(0, p − q)):";
    for (std::size_t i = 0; i < sp.residual.size() && i < 5; ++i)
      s += " " + token_label(tok, prev, sp.residual[i].id, 10) + " " + fixed(sp.residual[i].prob, 3);
    s += "\n";
  }
  if (sp.last) {
    s += "  round " + std::to_string(sp.round) + ": " + std::to_string(sp.accepted) + " of " + std::to_string(sp.proposals.size()) +
         " drafted tokens accepted:";
    for (const auto& x : sp.proposals)
      s += " " + token_label(tok, prev, x.id, 10) +
           (x.verdict == SpecProposal::Accepted ? " ✓" : x.verdict == SpecProposal::Rejected ? " ✗" : " ·");
    s += "\n";
  }
  return s;
}

}  // namespace

std::string beams_text(const BeamStep& b) {
  std::string s = "  beam search, width " + std::to_string(b.width) + ": " + std::to_string(b.live.size()) + " kept, " +
                  std::to_string(b.finished.size()) + " finished, " + std::to_string(b.pruned.size()) + " pruned\n";
  for (std::size_t i = 0; i < b.live.size(); ++i)
    s += "    beam " + pad(std::to_string(i), 3) + " ← " + pad(std::to_string(b.live[i].parent), 3) + " " +
         pad(show_text(b.live[i].text, 14), 18) + " Σ log p " + fixed(b.live[i].score, 3) + "\n";
  for (const auto& f : b.finished)
    s += "    done     ← " + pad(std::to_string(f.parent), 3) + " " + pad(show_text(f.text, 14), 18) + " Σ log p " +
         fixed(f.score, 3) + " · length " + std::to_string(f.length) + " · score " + fixed(f.normalized, 3) + "\n";
  if (!b.pruned.empty())
    s += "    pruned: best " + show_text(b.pruned[0].text, 14) + " (from beam " + std::to_string(b.pruned[0].parent) +
         ", Σ log p " + fixed(b.pruned[0].score, 3) + ")\n";
  return s;
}

std::string probs_chart(const StepEvent& e, const Tokenizer& tok, int top, int width) {
  const std::int32_t prev = e.input_ids.empty() ? -1 : e.input_ids.back();
  // The phase on every step: the prefill reads the whole prompt in one pass, each decode step one token.
  const bool prefill = std::string_view(e.phase) == "prefill";
  const std::string phase = prefill ? "prefill, " + std::to_string(e.input_ids.size()) + " prompt token" +
                                          (e.input_ids.size() == 1 ? "" : "s") + " read at once"
                                    : std::string("decode, 1 token in");
  std::string s = "── step " + std::to_string(e.step) + " · " + phase + " · pos " + std::to_string(e.pos) + " → " +
                  token_label(tok, prev, e.token, 24) + "  p " + fixed(e.prob, 3) + " · entropy " +
                  fixed(e.entropy, 2) + " nats · " +
                  (e.forced ? std::string("forced")
                   : e.speculative && std::string_view(e.speculative->outcome) == "accepted" ? std::string("draft's token accepted")
                   : e.draw_u < 0 ? std::string("argmax") : "draw u " + fixed(e.draw_u, 3)) +
                  " ──\n";
  if (const SpeculativeStep* sp = e.speculative) s += speculative_lines(*sp, tok, prev);
  const int n = std::min<int>(top, static_cast<int>(e.top.size()));
  // With more than one stage, a second column: each candidate's probability after the whole chain.
  const StageRecord* final_stage = e.stages.size() > 1 ? &e.stages.back() : nullptr;
  if (final_stage) s += "  " + pad("", 18) + pad("model", static_cast<std::size_t>(width) + 7) + "after chain\n";
  bool chosen_listed = false;
  for (int i = 0; i < n; ++i) {
    const auto& c = e.top[i];
    const bool chosen = c.id == e.token;
    chosen_listed |= chosen;
    s += "  " + pad(token_label(tok, prev, c.id, 14), 18) + bar(c.prob, width) + " " + fixed(c.prob, 3);
    if (final_stage) {
      auto it = std::find_if(final_stage->top.begin(), final_stage->top.end(), [&](const TokenProb& t) { return t.id == c.id; });
      const bool complete = final_stage->kept <= static_cast<int>(final_stage->top.size());
      s += it != final_stage->top.end() ? "  → " + fixed(it->prob, 3) : complete ? std::string("  → cut") : std::string("  → ?");
    }
    s += chosen ? " ◀\n" : "\n";
  }
  if (!chosen_listed)
    s += "  " + pad(token_label(tok, prev, e.token, 14), 18) + bar(e.prob, width) + " " + fixed(e.prob, 3) +
         " ◀ (chosen, not in the top " + std::to_string(n) + ")\n";
  // A grammar stage's cut, which the columns above hide when the model's favourites are all cut.
  for (const auto& st : e.stages)
    if (st.name == "grammar")
      s += "  grammar: kept " + std::to_string(st.kept) + " candidates holding " + fixed(st.mass, 3) +
           " of the model's probability (removed " + fixed(1.0 - st.mass, 3) + ")\n";
  if (e.beams) s += beams_text(*e.beams);
  return s;
}

ProbsSink::ProbsSink(std::ostream& out, const Tokenizer& tok, int top, int bar_width)
    : out_(out), tok_(tok), top_(top), width_(bar_width) {}

void ProbsSink::header(const RunHeader&) { pending_.clear(); }

void ProbsSink::step(const StepEvent& e) {
  flush();
  pending_ = probs_chart(e, tok_, top_, width_);
}

void ProbsSink::summary(const Summary& sum) {
  if (sum.beam && !sum.beam->hypotheses.empty()) {
    const BeamSummary& b = *sum.beam;
    pending_ += "── beam search: " + std::to_string(b.search_steps) + " steps, " + std::to_string(b.forwards) + " forwards, " +
                std::to_string(b.kv_copies) + " K/V copies; hypotheses, best first (score = Σ log p / length^" +
                fixed(b.length_penalty, 2) + ") ──\n";
    for (std::size_t i = 0; i < b.hypotheses.size(); ++i) {
      const BeamHypothesis& h = b.hypotheses[i];
      // Hypotheses share their start: show each one's end, where they differ.
      std::size_t from = h.text.size() > 48 ? h.text.size() - 48 : 0;
      while (from > 0 && from < h.text.size() && (static_cast<unsigned char>(h.text[from]) & 0xC0) == 0x80) ++from;
      pending_ += std::string(i == 0 ? "  ◀ " : "    ") + fixed(h.normalized, 3) + "  " + (from ? "…" : "") +
                  show_text(h.text.substr(from), 48) + " (" + h.ended + ")\n";
    }
  }
  flush();
}

void ProbsSink::flush() {
  if (pending_.empty()) return;
  std::fflush(stdout);  // the token this chart belongs to is already on stdout
  out_ << "\n" << pending_;
  out_.flush();
  pending_.clear();
}

}  // namespace glassbox::traces
