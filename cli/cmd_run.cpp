// `glassbox run`: generate a continuation, streamed to stdout, with an optional step trace.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>

#include "commands.hpp"
#include "glassbox/beam_search.hpp"
#include "glassbox/engine.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/speculative.hpp"
#include "glassbox/traces/reader.hpp"
#include "glassbox/traces/terminal.hpp"
#include "glassbox/traces/writer.hpp"
#include "interrupt.hpp"
#include "session.hpp"
#include "strategy_choice.hpp"
#include "streaming.hpp"

namespace glassbox::cli {

// One line on stderr each time the context policy drops tokens, so the amnesia is seen, not only traced.
class PolicyNotice final : public TraceSink {
 public:
  explicit PolicyNotice(const Tokenizer& tok) : tok_(tok) {}
  void header(const RunHeader&) override {}
  void step(const StepEvent&) override {}
  void summary(const Summary&) override {}
  void policy(const PolicyEvent& e) override {
    std::string text;
    std::int32_t prev = -1;
    for (auto id : e.dropped_ids) text += tok_.decode(prev, id), prev = id;
    std::fflush(stdout);
    std::fprintf(stderr, "\n[glassbox] context full at %d positions (%s): %s: \"%s\"\n", e.limit, e.policy.c_str(),
                 e.detail.c_str(), text.c_str());
  }

 private:
  const Tokenizer& tok_;
};

// Notes whether any step drew a random number: a greedy run's seed changes nothing, so it is not announced.
class DrawWatch final : public TraceSink {
 public:
  void header(const RunHeader& h) override { n_prompt = static_cast<int>(h.prompt_ids.size()); }
  void step(const StepEvent& e) override { drew = drew || e.draw_u >= 0; }
  void summary(const Summary&) override {}
  bool drew = false;
  int n_prompt = 0;  // the prompt's tokens, for the summary line's per-token prefill cost
};

// Streams a piece to stdout; a write error (disk full, closed stdout) stops the run.
void stream_out(std::string_view piece) {
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  note_streamed(piece);
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw OutputError(std::string("stdout: write failed: ") + std::strerror(errno));
}

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "generate text from a prompt, streaming it to stdout");
  auto binder = std::make_shared<RunOptionsBinder>(cmd, kRun);
  cmd->callback([binder] {
    const RunOptions opt = [&] {
      RunOptions o = binder->finish();
      o.model_hash = !o.trace.empty() || !o.replay.empty();  // only a trace and a golden check use the digest
      o.defer_model_hash = o.replay.empty();  // a trace alone can wait for it: the run starts meanwhile
      return o;
    }();
    install_interrupt_handlers();
    // Beam search ranks by the model's own log-probabilities: the session's chain is greedy (what width 1
    // equals), named so in the header; any other chain is refused rather than silently ignored.
    const RunOptions session_opt = StrategyChoice::session_options(opt, [&](const char* key) { return binder->given(key); });
    auto s = open_session(session_opt);
    StrategyChoice strategy(opt, *s);  // sampled, beam search or speculative; opens the draft
    // A trace written over an input would destroy it (the model is memory-mapped: truncating it is SIGBUS).
    refuse_output_over_input(opt.trace, "--trace", {{"--model", s->header.model_path}, {"--tokenizer", s->header.tokenizer_path},
                                                    {"--config", opt.config}, {"--replay", opt.replay}});
    GenerateOptions g = generate_options(opt, *s);
    if (!opt.replay.empty()) {
      // Teacher forcing: the golden's chosen tokens are appended whatever this run's sampler picks,
      // so that every step stays comparable with the golden (docs/golden-traces.md).
      const auto golden = traces::read_trace(opt.replay);
      const traces::TraceModel& gm = golden.header.model;
      if (golden.vocab_size() != s->model->config().vocab_size)
        throw ConfigError("--replay " + opt.replay + ": its model has a vocabulary of " +
                          std::to_string(golden.vocab_size()) + " tokens, this one " +
                          std::to_string(s->model->config().vocab_size) + ": its tokens cannot be replayed here");
      if (gm.sha256 != s->header.model_sha256)
        warn("--replay " + opt.replay + " was recorded with another model file (" + gm.path + ", sha256 " +
             gm.sha256.substr(0, 12) + "…): distributions will differ");
      if (s->tokenizer->encode(opt.prompt, s->tokenizer->add_bos(), false) != golden.header.prompt_ids)
        warn("--replay " + opt.replay + ": the prompt encodes differently from the golden's prompt_ids; "
             "the forced tokens follow another context");
      g.forced = golden.tokens();
      if (opt.max_tokens > golden.header.max_tokens && golden.summary->stop_reason == "max_tokens")
        warn("--max-tokens " + std::to_string(opt.max_tokens) + " goes past the golden's " +
             std::to_string(golden.steps.size()) + " steps: later tokens are sampled, not forced");
    }

    std::unique_ptr<traces::JsonlWriter> writer;
    TeeSink sinks;
    DrawWatch draws;
    sinks.add(&draws);
    InterruptSink interrupt;
    PolicyNotice notice(*s->tokenizer);
    sinks.add(&notice);
    if (!opt.trace.empty()) {
      writer = std::make_unique<traces::JsonlWriter>(opt.trace, *s->tokenizer, opt.trace_keep_partial,
                                                     trace_writer_thread(opt.trace_level, opt.trace_attention.on || opt.trace_lens != LensPoints::Off),
                                                     opt.trace_logits);
      sinks.add(writer.get());
    }
    std::unique_ptr<traces::ProbsSink> probs;  // --show-probs: bar charts on stderr, under each token
    if (opt.show_probs) {
      probs = std::make_unique<traces::ProbsSink>(std::cerr, *s->tokenizer);
      sinks.add(probs.get());
    }
    std::unique_ptr<JsonTokenSink> json_out;
    if (opt.json) {
      json_out = std::make_unique<JsonTokenSink>(*s->tokenizer, opt.top_logprobs);
      sinks.add(json_out.get());
    }
    sinks.add(&interrupt);  // last: a step is recorded before the run stops after it
    // The trace of a run cut short ends in an error or interrupted line, never a summary.
    auto cut_short = [&](auto&& end_trace) {
      if (probs) probs->flush();
      if (!writer) return;
      try {
        const std::string where = end_trace();
        if (where != opt.trace)
          warn("the run was cut short: its trace is in " + where + "; " + opt.trace +
               " (complete) is untouched (--trace-keep-partial replaces it)");
      } catch (const std::exception& e) {
        warn("the cut-short trace could not be kept: " + std::string(e.what()));
      }
    };
    Summary sum;
    try {
      if (opt.echo && !opt.json) stream_out(opt.prompt);
      std::string text;
      // SIGINT ends even a 60 s pause; the prefill's token waits its cost in decode steps by the cost model.
      PacedStream paced(pace_delay(opt), [&](std::string_view piece) {
        if (opt.json) text += piece;
        else stream_out(piece);
      }, /*announce=*/!opt.json, PassCost::of(s->source->weights(), s->config));
      sinks.add(&paced);
      const StreamFn on_piece = [&](std::string_view piece) { paced.piece(piece); };
      sum = strategy.generate(opt.prompt, g, sinks, on_piece);
      paced.finish();
      if (opt.json) {
        JsonTokenSink::Json j = {{"type", "summary"}, {"text", text}, {"generated", sum.generated},
                                 {"stop_reason", sum.stop_reason}, {"ttft_ms", sum.ttft_ms},
                                 {"prefill_tok_s", sum.prefill_tok_s}, {"decode_tok_s", sum.decode_tok_s}};
        if (draws.drew) j["seed"] = s->seed;
        if (sum.speculative)
          j["speculative"] = {{"k", sum.speculative->k}, {"rounds", sum.speculative->rounds},
                              {"proposed", sum.speculative->proposed}, {"accepted", sum.speculative->accepted},
                              {"acceptance_rate", sum.speculative->acceptance_rate()},
                              {"tokens_per_target_forward", sum.speculative->tokens_per_target_forward()}};
        JsonTokenSink::print(j);
      }
    } catch (const Interrupted& e) {
      cut_short([&] { return writer->interrupted(signal_name(e.signal)); });
      std::fflush(stdout);
      std::cerr << "\n[glassbox] " << e.what() << "\n";
      g_exit_code = 128 + e.signal;
      return;
    } catch (const std::exception& e) {
      if (const int sig = interrupt_signal()) {  // a walk inside a module (the grammar's) stopped for the signal
        cut_short([&] { return writer->interrupted(signal_name(sig)); });
        std::fflush(stdout);
        std::cerr << "\n[glassbox] interrupted by " << signal_name(sig) << "\n";
        g_exit_code = 128 + sig;
        return;
      }
      cut_short([&] { return writer->error(e.what()); });
      throw;
    }
    std::cout.flush();  // --json writes through std::cout
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout))
      throw OutputError(std::string("stdout: write failed: ") + std::strerror(errno));
    // The continuation ends its line, so the shell's prompt does not run into the text.
    if (!opt.json && g_stdout_mid_line) {
      std::fputs("\n", stdout);
      note_streamed("\n");
      std::fflush(stdout);
    }
    std::cerr << "[glassbox] " << summary_line(sum, draws.n_prompt, s->config.dim);
    if (draws.drew) std::cerr << ", seed " << s->seed;
    std::cerr << "\n";
    if (sum.speculative) {  // docs/speculative.md
      const SpeculativeSummary& sp = *sum.speculative;
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "[glassbox] speculative K=%d: %d of %d drafted tokens accepted (%.0f%%), %.2f tokens per target forward (%d rounds)\n",
                    sp.k, sp.accepted, sp.proposed, 100 * sp.acceptance_rate(), sp.tokens_per_target_forward(), sp.rounds);
      std::cerr << buf;
    }
  });
}

}  // namespace glassbox::cli
