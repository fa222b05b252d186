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
#include "streaming.hpp"

namespace glassbox::cli {

// Forwards nothing; after each step, stops the run if SIGINT/SIGTERM arrived (interrupt.hpp).
class InterruptSink final : public TraceSink {
 public:
  void header(const RunHeader&) override { check_interrupt(); }
  void step(const StepEvent&) override { check_interrupt(); }
  void summary(const Summary&) override {}
};

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

// The options the session is built from: with --beam-width, the greedy chain (the search does not sample);
// a chain other than greedy, --replay, or --length-penalty without --beam-width is a ConfigError.
RunOptions beam_session_options(const RunOptions& opt, bool length_penalty_given) {
  if (opt.beam_width == 0) {
    if (length_penalty_given) throw ConfigError("--length-penalty applies to beam search only: add --beam-width N");
    return opt;
  }
  for (const auto& p : opt.sampler)
    if (p.name != "greedy")
      throw ConfigError("--beam-width ranks continuations by the model's own log-probabilities; the sampler chain does not "
                        "apply: drop --sampler " + p.to_string() + " (docs/beam-search.md)");
  if (!opt.replay.empty()) throw ConfigError("--beam-width cannot replay a golden (--replay): a beam search chooses whole sequences");
  // A grammar is a sampler stage; the search ranks the raw distribution and would silently ignore it.
  if (!opt.grammar.empty() || !opt.json_schema.empty())
    throw ConfigError(std::string(opt.grammar.empty() ? "--json-schema" : "--grammar") +
                      " constrains the sampler chain, which beam search does not use (it ranks the model's own log-probabilities): "
                      "drop it, or drop --beam-width");
  // What BeamSearch itself would refuse, said before a model is read or a trace file opened.
  if (opt.context_policy.kind != ContextPolicy::Stop && opt.context_policy.kind != ContextPolicy::Refuse)
    throw ConfigError("--context-policy " + opt.context_policy.to_string() +
                      " drops tokens from one sequence; beam search keeps several: use stop or refuse with --beam-width");
  RunOptions o = opt;
  o.sampler = {PluginSpec{"greedy", {}}};
  return o;
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
    const RunOptions session_opt = beam_session_options(opt, binder->given("length_penalty"));
    if (opt.draft_model.empty() && (binder->given("draft_tokens") || binder->given("draft_tokenizer")))
      throw ConfigError(std::string(binder->given("draft_tokens") ? "--draft-tokens" : "--draft-tokenizer") +
                        " sets up speculative decoding: name the draft with --draft-model");
    if (!opt.draft_model.empty() && opt.beam_width > 0)
      throw ConfigError("--draft-model and --beam-width: speculative decoding samples one sequence, beam search keeps several; use one of them");
    auto s = open_session(session_opt);
    std::unique_ptr<Session> draft;
    if (!opt.draft_model.empty()) {
      draft = open_draft(opt, *s);
      s->header.speculative = SpeculativeSetup{draft->header.model_path, draft->header.tokenizer_path, opt.draft_tokens};
    }
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
    Engine engine(*s->model, *s->tokenizer, *s->attention, *s->sampler);
    std::unique_ptr<SpeculativeEngine> speculative;
    if (draft)
      speculative = std::make_unique<SpeculativeEngine>(*s->model, *s->tokenizer, *s->attention, *s->sampler,
                                                        DraftModel{*draft->model, *draft->attention, *draft->sampler, draft->header.model_path},
                                                        opt.draft_tokens);
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
      if (opt.beam_width > 0) {
        // One K/V store per beam (the session's is the first), or the one a module that keeps nothing needs.
        BeamOptions bo{opt.beam_width, opt.length_penalty, opt.ignore_eos, [] { check_interrupt(); }};
        check_beam_options(bo, s->config.vocab_size);
        check_beam_attention(*s->attention, s->attention->name());
        std::vector<std::int32_t> ids = s->tokenizer->encode(opt.prompt, s->tokenizer->add_bos(), false);
        // The other beams' stores hold only what a search can reach (it never truncates): the prompt and
        // max_tokens more, not the whole context; all of them together within the run memory bound.
        AttentionShape shape = s->config.attention_shape();
        shape.seq_len = static_cast<int>(std::clamp<long long>(static_cast<long long>(ids.size()) + opt.max_tokens, 1, shape.seq_len));
        if (s->attention->persistent()) check_beam_memory(s->config, shape.seq_len, opt.beam_width, s->header.model_path);
        std::vector<std::unique_ptr<KvStore>> extra;
        std::vector<KvStore*> stores{s->attention.get()};
        for (int i = 1; i < opt.beam_width && s->attention->persistent(); ++i) {
          extra.push_back(s->registry->make_attention(opt.attention, shape));
          stores.push_back(extra.back().get());
        }
        BeamSearch search(*s->model, *s->tokenizer, std::move(stores));
        sum = search.generate(std::move(ids), opt.prompt, g, bo, s->header, sinks, on_piece);
      } else if (speculative) {
        sum = speculative->generate(opt.prompt, g, s->header, sinks, on_piece);
      } else {
        sum = engine.generate(opt.prompt, g, s->header, sinks, on_piece);
      }
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
