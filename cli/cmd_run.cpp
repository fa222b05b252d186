// `glassbox run`: generate a continuation, streamed to stdout, with an optional step trace.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "commands.hpp"
#include "glassbox/engine.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/traces/reader.hpp"
#include "glassbox/traces/terminal.hpp"
#include "glassbox/traces/writer.hpp"
#include "interrupt.hpp"
#include "session.hpp"

namespace glassbox::cli {

// Forwards nothing; after each step, stops the run if SIGINT/SIGTERM arrived (interrupt.hpp).
class InterruptSink final : public TraceSink {
 public:
  void header(const RunHeader&) override { check_interrupt(); }
  void step(const StepEvent&) override { check_interrupt(); }
  void summary(const Summary&) override {}
};

// Streams a piece to stdout; a write error (disk full, closed stdout) stops the run.
void stream_out(std::string_view piece) {
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw OutputError(std::string("stdout: write failed: ") + std::strerror(errno));
}

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "generate text from a prompt, streaming it to stdout");
  auto binder = std::make_shared<RunOptionsBinder>(cmd, true);
  cmd->callback([binder] {
    const RunOptions opt = binder->finish();
    install_interrupt_handlers();
    auto s = open_session(opt);
    // A trace written over an input would destroy it (the model is memory-mapped: truncating it is SIGBUS).
    refuse_output_over_input(opt.trace, "--trace", {{"--model", s->header.model_path}, {"--tokenizer", s->header.tokenizer_path},
                                                    {"--config", opt.config}, {"--replay", opt.replay}});
    GenerateOptions g;
    g.max_tokens = opt.max_tokens;
    g.level = opt.trace_level;
    g.trace_top_k = opt.trace_top;
    g.seed = s->seed;
    g.record_stages = !opt.trace.empty() || opt.show_probs;  // per-stage records only when shown
    g.report_distribution = g.record_stages;
    if (!opt.replay.empty()) {
      // Teacher forcing: the golden's chosen tokens are appended whatever this run's sampler picks,
      // so that every step stays comparable with the golden (docs/golden-traces.md).
      const auto golden = traces::read_trace(opt.replay);
      const auto& gm = golden.header["model"];
      if (golden.vocab_size() != s->model->config().vocab_size)
        throw ConfigError("--replay " + opt.replay + ": its model has a vocabulary of " +
                          std::to_string(golden.vocab_size()) + " tokens, this one " +
                          std::to_string(s->model->config().vocab_size) + ": its tokens cannot be replayed here");
      if (gm["sha256"] != s->header.model_sha256)
        warn("--replay " + opt.replay + " was recorded with another model file (" + gm["path"].get<std::string>() +
             ", sha256 " + gm["sha256"].get<std::string>().substr(0, 12) + "…): distributions will differ");
      if (s->tokenizer->encode(opt.prompt, true, false) != golden.header["prompt_ids"].get<std::vector<std::int32_t>>())
        warn("--replay " + opt.replay + ": the prompt encodes differently from the golden's prompt_ids; "
             "the forced tokens follow another context");
      g.forced = golden.tokens();
      if (opt.max_tokens > golden.header["max_tokens"].get<int>() && golden.summary["stop_reason"] == "max_tokens")
        warn("--max-tokens " + std::to_string(opt.max_tokens) + " goes past the golden's " +
             std::to_string(golden.steps.size()) + " steps: later tokens are sampled, not forced");
    }

    std::unique_ptr<traces::JsonlWriter> writer;
    TeeSink sinks;
    InterruptSink interrupt;
    if (!opt.trace.empty()) {
      writer = std::make_unique<traces::JsonlWriter>(opt.trace, *s->tokenizer, opt.trace_keep_partial);
      sinks.add(writer.get());
    }
    std::unique_ptr<traces::ProbsSink> probs;  // --show-probs: bar charts on stderr, under each token
    if (opt.show_probs) {
      probs = std::make_unique<traces::ProbsSink>(std::cerr, *s->tokenizer);
      sinks.add(probs.get());
    }
    sinks.add(&interrupt);  // last: a step is recorded before the run stops after it
    Engine engine(*s->model, *s->tokenizer, *s->attention, *s->sampler);
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
      if (opt.echo) stream_out(opt.prompt);
      sum = engine.generate(opt.prompt, g, s->header, sinks, stream_out);
    } catch (const Interrupted& e) {
      cut_short([&] { return writer->interrupted(signal_name(e.signal)); });
      std::fflush(stdout);
      std::cerr << "\n[glassbox] " << e.what() << "\n";
      g_exit_code = 128 + e.signal;
      return;
    } catch (const std::exception& e) {
      cut_short([&] { return writer->error(e.what()); });
      throw;
    }
    if (std::fflush(stdout) != 0 || std::ferror(stdout))
      throw OutputError(std::string("stdout: write failed: ") + std::strerror(errno));
    std::cerr << "\n[glassbox] " << sum.generated << " tokens, stop: " << sum.stop_reason << ", ttft "
              << sum.ttft_ms << " ms, prefill " << sum.prefill_tok_s << " tok/s, decode " << sum.decode_tok_s
              << " tok/s, seed " << s->seed << "\n";
  });
}

}  // namespace glassbox::cli
