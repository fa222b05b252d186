// `glassbox run`: generate a continuation, streamed to stdout, with an optional step trace.
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "glassbox/engine.hpp"
#include "glassbox/error.hpp"
#include "glassbox/traces/reader.hpp"
#include "glassbox/traces/terminal.hpp"
#include "glassbox/traces/writer.hpp"
#include "session.hpp"

namespace glassbox::cli {

// Forwards nothing: the sink used when no trace is written.
class NullSink final : public TraceSink {
 public:
  void header(const RunHeader&) override {}
  void step(const StepEvent&) override {}
  void summary(const Summary&) override {}
};

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "generate text from a prompt, streaming it to stdout");
  auto binder = std::make_shared<RunOptionsBinder>(cmd, true);
  cmd->callback([binder] {
    const RunOptions opt = binder->finish();
    auto s = open_session(opt);
    GenerateOptions g;
    g.max_tokens = opt.max_tokens;
    g.level = opt.trace_level;
    g.trace_top_k = opt.trace_top;
    g.seed = s->seed;
    g.record_stages = !opt.trace.empty() || opt.show_probs;  // per-stage records only when shown
    g.report_distribution = g.record_stages;
    g.policy = opt.context_policy;
    g.trace_attention = opt.trace_attention;
    if (g.trace_attention.on && opt.trace.empty()) warn("--trace-attention records into the trace: name one with --trace");
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
    NullSink null;
    sinks.add(&null);
    if (!opt.trace.empty()) {
      writer = std::make_unique<traces::JsonlWriter>(opt.trace, *s->tokenizer);
      sinks.add(writer.get());
    }
    std::unique_ptr<traces::ProbsSink> probs;  // --show-probs: bar charts on stderr, under each token
    if (opt.show_probs) {
      probs = std::make_unique<traces::ProbsSink>(std::cerr, *s->tokenizer);
      sinks.add(probs.get());
    }
    Engine engine(*s->model, *s->tokenizer, *s->attention, *s->sampler);
    if (opt.echo) {
      std::fwrite(opt.prompt.data(), 1, opt.prompt.size(), stdout);
      std::fflush(stdout);
    }
    Summary sum;
    try {
      sum = engine.generate(opt.prompt, g, s->header, sinks, [](std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      });
    } catch (const std::exception& e) {
      if (probs) probs->flush();
      if (writer) writer->error(e.what());  // the trace ends in an error line, never a summary
      throw;
    }
    std::fflush(stdout);
    std::cerr << "\n[glassbox] " << sum.generated << " tokens, stop: " << sum.stop_reason << ", ttft "
              << sum.ttft_ms << " ms, prefill " << sum.prefill_tok_s << " tok/s, decode " << sum.decode_tok_s
              << " tok/s, seed " << s->seed << "\n";
  });
}

}  // namespace glassbox::cli
