// `glassbox run`: generate a continuation, streamed to stdout, with an optional step trace.
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "glassbox/engine.hpp"
#include "glassbox/error.hpp"
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
    g.seed = s->seed;
    g.record_stages = !opt.trace.empty() || opt.show_probs;  // per-stage records only when shown

    std::unique_ptr<traces::JsonlWriter> writer;
    TeeSink sinks;
    NullSink null;
    sinks.add(&null);
    if (!opt.trace.empty()) {
      writer = std::make_unique<traces::JsonlWriter>(opt.trace, *s->tokenizer);
      sinks.add(writer.get());
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
