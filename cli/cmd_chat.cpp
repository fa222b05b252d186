// `glassbox chat`: a conversation read line by line; the whole history is re-tokenized every turn in the
// model's turn format, and the oldest turns are pruned (never --system) when it no longer fits, or, with
// --context-policy summarize, replaced by a summary a model writes (docs/attention.md). Every option
// `chat --help` lists acts on each turn's run as it does on `run` (docs/options.md).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <iostream>

#include "commands.hpp"
#include "glassbox/chat_template.hpp"
#include "glassbox/engine.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/pipeline.hpp"
#include "glassbox/traces/terminal.hpp"
#include "glassbox/traces/writer.hpp"
#include "chat_reply.hpp"
#include "interrupt.hpp"
#include "session.hpp"
#include "strategy_choice.hpp"
#include "streaming.hpp"

namespace glassbox::cli {

namespace {

struct Turn {
  bool user;
  std::string text;
};

// --context-policy summarize's words (docs/attention.md): the request the summary model answers, the
// line that heads its transcript with the summary being replaced, and the message that holds a summary
// in the conversation (a system message after --system's).
constexpr std::string_view kSummaryRequest =
    "Summarize this conversation in one sentence, keeping the names.";
constexpr std::string_view kSummaryEarlier = "Earlier: ";
constexpr std::string_view kSummaryHeading = "Summary: ";
// The least room for a summary that the default --summary-tokens gives way to ("Your name is Zoe." and its end).
constexpr long long kMinSummaryRoom = 8;

ChatMessage summary_message(const std::string& summary) { return {"system", std::string(kSummaryHeading) + summary}; }

// The conversation: the pinned system message, the summary of what was replaced (if any), the turns.
std::vector<ChatMessage> messages(const std::string& system, const std::optional<std::string>& summary, const std::vector<Turn>& turns,
                                  std::size_t first = 0) {
  std::vector<ChatMessage> m;
  if (!system.empty()) m.push_back({"system", system});
  if (summary) m.push_back(summary_message(*summary));
  for (std::size_t i = first; i < turns.size(); ++i) m.push_back({turns[i].user ? "user" : "assistant", turns[i].text});
  return m;
}

// Turn n's trace: chat.jsonl -> chat-turn3.jsonl (each turn is a run of its own, so every tool reads it).
std::string turn_trace_path(const std::string& path, int turn) {
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + "-turn" + std::to_string(turn) + p.extension().string())).string();
}
// The run that wrote turn n's summary: chat.jsonl -> chat-turn3-summary.jsonl.
std::string summary_trace_path(const std::string& path, int turn) {
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + "-turn" + std::to_string(turn) + "-summary" + p.extension().string())).string();
}

// One user turn: a line of at most kMaxTurnBytes, read in bounded pieces (`chat < /dev/zero` is one
// endless "line"); false at the end of the input.
constexpr std::size_t kMaxTurnBytes = std::size_t{1} << 20;
bool read_bounded_line(std::istream& in, std::string& line, const std::string& what, int turn) {
  line.clear();
  char buf[4096];
  while (true) {
    in.getline(buf, sizeof buf);
    const auto n = static_cast<std::size_t>(in.gcount());  // NUL bytes included: no strlen
    const bool full = in.fail() && !in.eof() && n == sizeof buf - 1;
    const bool delimited = !in.fail() && !in.eof();
    line.append(buf, delimited ? n - 1 : n);
    if (line.size() > kMaxTurnBytes)
      throw InputError(what + ": turn " + std::to_string(turn) + " is a line longer than " + std::to_string(kMaxTurnBytes >> 20) +
                       " MiB (one turn per line)");
    if (delimited) return true;
    if (full) {
      in.clear();  // the buffer filled before the newline: go on reading the line
      continue;
    }
    if (in.bad()) throw InputError(what + ": read failed");
    return !line.empty();  // the end of the input (a last line without a newline counts)
  }
}

// The turn marker of the plain format ("User: ...\nAssistant:"): a reply ends where the model starts it.
constexpr std::string_view kNextTurn = "\nUser:";

// chat's own options (the run options are the table's, through RunOptionsBinder).
struct ChatOpts {
  std::string system, system_file, input;
};

// The system message from --system-file, if given, into o.system; returns the words that name it in
// messages ("--system" or "--system-file FILE"). (An argument longer than 128 KiB never reaches us: the
// kernel refuses to start the process, "Argument list too long".)
std::string read_system_message(ChatOpts& o) {
  std::string system_flag = "--system";
  if (o.system_file.empty()) return system_flag;
  if (!o.system.empty()) throw ConfigError("--system and --system-file both given (one system message)");
  system_flag = "--system-file " + o.system_file;
  if (auto why = not_a_regular_file(o.system_file)) throw ConfigError(system_flag + ": " + *why);
  note_input(o.system_file);
  std::ifstream f(o.system_file, std::ios::binary);
  std::string text(kMaxTurnBytes + 1, '\0');
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (f.bad() || (!f && !f.eof())) throw ConfigError(system_flag + ": cannot read");
  text.resize(static_cast<std::size_t>(f.gcount()));
  if (text.size() > kMaxTurnBytes)
    throw ConfigError(system_flag + ": longer than " + std::to_string(kMaxTurnBytes >> 20) + " MiB (the bound of a message)");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();  // the file's last line end
  o.system = std::move(text);
  return system_flag;
}

// A tokenizer's turn format; with no template, the plain "User: …\nAssistant:".
ChatFormat turn_format(const Tokenizer& tok) {
  const ChatFormat fmt = detect_chat_format(tok.chat_template());
  return fmt == ChatFormat::None ? ChatFormat::Plain : fmt;
}

// A sink that records nothing: a turn's sinks are never empty.
struct NullSink final : TraceSink {
  void header(const RunHeader&) override {}
  void step(const StepEvent&) override {}
  void summary(const Summary&) override {}
};

// SIGINT/SIGTERM while a turn is worked on (a reply, a summary, a grammar walk) stop it between steps,
// as in `run`: its trace ends in an interrupted line and chat exits 128 + the signal. While chat waits
// for the next line, a signal ends it at once, as it ends any other command (interrupt.hpp).
// interrupted(sig) says so and sets the exit code; it returns sig.
int interrupted(int sig) {
  std::fflush(stdout);
  std::cerr << "\n[glassbox] interrupted by " << signal_name(sig) << "\n";
  g_exit_code = 128 + sig;
  return sig;
}

// One conversation: what every turn runs on (the session, its turn format, the strategy, the summary
// model of --context-policy summarize) and the history so far. run() reads the user's lines and
// answers each; a turn is fitted to the context (summarize_to_fit, prune_to_fit), then answered.
// Functions that return an int return the signal that stopped the turn (said by interrupted()), 0 when none did.
struct Chat {
  const RunOptions& opt;
  const std::string& system;       // the pinned system message ("" for none)
  const std::string& system_flag;  // the words naming it
  Session& s;
  const Tokenizer& tok;
  const ChatFormat fmt;
  StrategyChoice& strategy;
  const int limit;  // the context's positions
  GenerateOptions g;
  const std::chrono::microseconds pace;
  // --context-policy summarize: the pipeline that writes summaries (greedy).
  std::unique_ptr<Session> summ;
  std::unique_ptr<Engine> summ_engine;
  ChatFormat summ_fmt = ChatFormat::Plain;

  std::vector<Turn> turns;
  std::optional<std::string> summary;  // what replaced the oldest exchanges so far (summarize)
  int turn_no = 0;
  NullSink null;
  InterruptSink interrupt;

  Chat(const RunOptions& opt, const std::string& system, const std::string& system_flag, Session& s, ChatFormat fmt,
       StrategyChoice& strategy)
      : opt(opt), system(system), system_flag(system_flag), s(s), tok(*s.tokenizer), fmt(fmt), strategy(strategy),
        limit(strategy.context_limit()), g(generate_options(opt, s)), pace(pace_delay(opt)) {
    if (!opt.trace.empty())
      refuse_output_over_input(opt.trace, "--trace", {{"--model", s.header.model_path}, {"--tokenizer", s.header.tokenizer_path}});
    check_system_fits();
    if (opt.summarize) open_summary_model();
  }

  // The system message is pinned (never pruned, never summarized): one that leaves no room for a reply
  // is refused here, naming it, rather than cut by the engine's truncation on the first turn.
  void check_system_fits() const {
    if (system.empty()) return;
    const std::size_t n = encode_chat(tok, fmt, messages(system, std::nullopt, {})).size();
    if (static_cast<long long>(n) + g.max_tokens > limit)
      throw InputError(system_flag + ": the system message is " + std::to_string(n) + " tokens (" + std::to_string(system.size()) +
                       " bytes); with a reply of up to " + std::to_string(g.max_tokens) + " (--max-tokens) it does not fit the " +
                       std::to_string(limit) + " positions of the context, and a pinned message is never dropped");
  }

  // --context-policy summarize's pipeline, opened before any turn so that a bad --summary-model is said at once.
  void open_summary_model() {
    summ = open_summarizer(opt, s);
    if (!opt.trace.empty() && !opt.summary_model.empty())
      refuse_output_over_input(opt.trace, "--trace", {{"--summary-model", opt.summary_model}, {"--summary-tokenizer", opt.summary_tokenizer}});
    summ_fmt = turn_format(*summ->tokenizer);
    summ_engine = std::make_unique<Engine>(*summ->model, *summ->tokenizer, *summ->attention, *summ->sampler);
  }

  // The conversation's ids: the template's markers become control tokens, the messages' text never
  // does (a user typing "<|im_start|>" gets the characters).
  std::vector<std::int32_t> encode() const { return encode_chat(tok, fmt, messages(system, summary, turns)); }
  // The ids of BOS and the pinned system message: where dropped turns began.
  int pinned_tokens() const { return static_cast<int>(encode_chat(tok, fmt, messages(system, std::nullopt, {}), false).size()); }

  // The user's lines, one turn each, until the input ends or a signal stops a turn.
  void run(const std::string& input) {
    std::ifstream file;
    if (!input.empty()) {
      note_input(input);  // (a pipe or terminal is fine here: turns are read as they come)
      file.open(input);
      if (!file) throw ConfigError("--input " + input + ": cannot read");
    }
    std::istream& in = input.empty() ? std::cin : file;
    const bool tty = input.empty() && isatty(0);
    std::string line;
    while (true) {
      install_cleanup_handlers();
      if (const int sig = interrupt_signal()) {  // it came after the last turn's last check
        interrupted(sig);
        return;
      }
      if (tty) std::fputs("> ", stderr);
      if (!read_bounded_line(in, line, input.empty() ? "stdin" : input, turn_no + 1)) break;
      if (line.empty()) continue;
      install_interrupt_handlers();
      if (turn(line, tty) != 0) return;  // a signal stopped it (said)
    }
  }

  // One user turn: shown, fitted to the context, replied to; the reply joins the history.
  int turn(const std::string& line, bool tty) {
    turns.push_back({true, line});
    ++turn_no;
    show_user_turn(line, tty);
    std::vector<std::int32_t> ids = encode();
    int n = static_cast<int>(ids.size());
    if (n + g.max_tokens > limit && g.policy.kind == ContextPolicy::Refuse)
      throw InputError("chat turn " + std::to_string(turn_no) + ": the conversation is " + std::to_string(n) + " tokens; with a reply of up to " +
                       std::to_string(g.max_tokens) + " it does not fit the " + std::to_string(limit) +
                       " positions, and --context-policy refuse drops nothing (the other policies drop the oldest turns)");
    if (opt.summarize && n + g.max_tokens > limit && turns.size() >= 3) {
      if (const int sig = summarize_to_fit(ids, n)) return sig;
    } else {
      g.pruned.reset();
    }
    if (!opt.summarize) prune_to_fit(ids, n);
    return answer(std::move(ids), n);
  }

  // The user's turn in the transcript: typed at a terminal it is on screen already; piped, it is
  // shown on stderr ("> TEXT", as the terminal would), or with --echo on stdout before the reply.
  void show_user_turn(const std::string& line, bool tty) const {
    if (opt.json) {
      JsonTokenSink::print({{"type", "user"}, {"turn", turn_no}, {"text", line}});
    } else if (opt.echo) {
      const std::string shown = "> " + line + "\n";
      std::fwrite(shown.data(), 1, shown.size(), stdout);
      note_streamed(shown);
      std::fflush(stdout);
    } else if (!tty) {
      std::fflush(stdout);
      std::fprintf(stderr, "> %s\n", line.c_str());
    }
  }

  // Summarize: the oldest exchange (and the summary before it) is replaced by a summary the summary
  // model writes; while the conversation still does not fit, the next exchange is folded in too
  // and the summary written again. Never the system message, never the newest user turn. Sets ids, n
  // and the turn's context event (g.pruned).
  int summarize_to_fit(std::vector<std::int32_t>& ids, int& n) {
    const std::optional<std::string> earlier = summary;
    std::size_t fold = 0;
    std::string written;
    std::vector<std::int32_t> with_summary;
    while (true) {
      fold += 2;  // a user turn and its reply
      try {
        written = write_summary(earlier, fold);
      } catch (const std::exception&) {
        if (const int sig = interrupt_signal()) return interrupted(sig);
        throw;
      }
      with_summary = encode_chat(tok, fmt, messages(system, written, turns, fold));
      if (static_cast<long long>(with_summary.size()) + g.max_tokens <= limit) break;
      if (turns.size() - fold < 3)
        throw InputError("chat turn " + std::to_string(turn_no) + ": --context-policy summarize: with every older turn summarized (\"" +
                         written + "\"), the conversation is " + std::to_string(with_summary.size()) + " tokens; with a reply of up to " +
                         std::to_string(g.max_tokens) + " it does not fit the " + std::to_string(limit) +
                         " positions (a smaller --summary-tokens or --max-tokens, or a larger --context)");
    }
    std::vector<ChatMessage> gone;
    if (earlier) gone.push_back(summary_message(*earlier));
    for (std::size_t i = 0; i < fold; ++i) gone.push_back({turns[i].user ? "user" : "assistant", turns[i].text});
    PolicyEvent ev;
    ev.policy = "prune-turns";  // turns dropped before encoding, as prune-turns drops them; `summary` says what took their place
    ev.step = 0;
    ev.limit = limit;
    ev.turns = static_cast<int>(fold);
    ev.dropped_ids = encode_chat(tok, fmt, gone, /*add_generation_prompt=*/false, /*bos=*/false);
    ev.dropped_from = pinned_tokens();
    ev.dropped_to = ev.dropped_from + static_cast<int>(ev.dropped_ids.size());
    ev.summary = PolicyEvent::Replacement{written, encode_chat(tok, fmt, {summary_message(written)}, false, false)};
    const std::string what = fold == 2 ? "the oldest exchange" : "the oldest " + std::to_string(fold / 2) + " exchanges";
    const std::string and_earlier = earlier ? " and the earlier summary" : "";
    const std::string by = opt.summary_model.empty() ? "the model" : "--summary-model " + opt.summary_model;
    turns.erase(turns.begin(), turns.begin() + static_cast<std::ptrdiff_t>(fold));
    summary = written;
    ids = std::move(with_summary);
    ev.kept = static_cast<int>(ids.size());
    ev.detail = "replaced " + what + and_earlier + " (" + std::to_string(ev.dropped_ids.size()) + " tokens) by a summary " + by +
                " wrote (" + std::to_string(ev.summary->ids.size()) + " tokens), to fit " + std::to_string(ids.size()) +
                " tokens and a reply of up to " + std::to_string(g.max_tokens) + " in " + std::to_string(limit) + " positions" +
                (system.empty() ? std::string() : "; the system message stays");
    std::cerr << "glassbox: chat: summarized " << what << and_earlier << " (" << ev.dropped_ids.size() << " tokens) in "
              << ev.summary->ids.size() << " tokens to fit the context of " << limit << " positions: \"" << written << "\"\n";
    n = static_cast<int>(ids.size());
    g.pruned = std::move(ev);
    return 0;
  }

  // The summary of the `fold` oldest turns (whole exchanges) and of the summary they follow, if any:
  // the summary model's greedy reply to kSummaryRequest over their transcript, on one line.
  std::string write_summary(const std::optional<std::string>& earlier, std::size_t fold) {
    std::string transcript;
    if (earlier) transcript += std::string(kSummaryEarlier) + *earlier + "\n";
    for (std::size_t i = 0; i < fold; ++i) transcript += (turns[i].user ? "User: " : "Assistant: ") + turns[i].text + "\n";
    const std::vector<ChatMessage> request = {{"user", std::string(kSummaryRequest) + "\n\n" + transcript}};
    const Tokenizer& stok = *summ->tokenizer;
    std::vector<std::int32_t> request_ids = encode_chat(stok, summ_fmt, request);
    const int slimit = summ_engine->context_limit();
    // --summary-tokens bounds the summary; left at its default, it gives way to the room the summary
    // model's context leaves after the request (a small model's 128 positions), down to kMinSummaryRoom.
    const long long room = slimit - static_cast<long long>(request_ids.size());
    const int budget = !opt.summary_tokens_given && room < opt.summary_tokens && room >= kMinSummaryRoom ? static_cast<int>(room)
                                                                                                       : opt.summary_tokens;
    if (static_cast<long long>(request_ids.size()) + budget > slimit)
      throw InputError("chat turn " + std::to_string(turn_no) + ": --context-policy summarize: the summary request is " +
                       std::to_string(request_ids.size()) + " tokens; with a summary of up to " + std::to_string(budget) +
                       " (--summary-tokens) it does not fit the summary model's " + std::to_string(slimit) + " positions");
    GenerateOptions sg;
    sg.max_tokens = budget;
    sg.seed = summ->seed;
    sg.watch.top_k = opt.trace_top;
    sg.watch.stages = sg.watch.distribution = !opt.trace.empty();  // what the summary's trace records
    sg.policy = parse_context_policy("refuse");  // (checked above, with the words of the summary options)
    TeeSink ssinks;
    std::unique_ptr<traces::JsonlWriter> swriter;
    if (!opt.trace.empty()) {
      swriter = std::make_unique<traces::JsonlWriter>(summary_trace_path(opt.trace, turn_no), stok, opt.trace_keep_partial,
                                                      trace_writer_thread(TraceLevel::Basic));
      ssinks.add(swriter.get());
    }
    ssinks.add(&null);
    ssinks.add(&interrupt);
    const std::string_view marker = summ_fmt == ChatFormat::Plain ? kNextTurn : std::string_view();
    std::string written;
    Summary ran;
    try {
      ran = summ_engine->generate(std::move(request_ids), render_chat(summ_fmt, request), sg, summ->header, ssinks, [&](std::string_view piece) {
        written.append(piece);
        if (marker.empty()) return;
        if (const ReplyCut cut = cut_reply(written, marker); cut.found) {
          written.resize(cut.show);
          throw StopGeneration{};
        }
      });
    } catch (const std::exception& e) {
      if (swriter) {
        if (const int sig = interrupt_signal()) swriter->interrupted(signal_name(sig));
        else swriter->error(e.what());
      }
      throw;
    }
    if (budget < opt.summary_tokens && ran.stop_reason == "max_tokens")
      warn("chat turn " + std::to_string(turn_no) + ": the summary was cut at " + std::to_string(budget) +
           " tokens, the room the summary model's " + std::to_string(slimit) + " positions leave after the request (" +
           std::to_string(slimit - budget) + " tokens)");
    written = finished_reply(written, marker);
    for (auto& c : written)
      if (c == '\n' || c == '\r') c = ' ';  // one line, as a turn is
    return written;
  }

  // Fit (the policies other than summarize): the history plus room for a reply must hold in the context;
  // drop the oldest turns, and say so in the turn's context event (g.pruned). Sets ids and n.
  void prune_to_fit(std::vector<std::int32_t>& ids, int& n) {
    std::size_t dropped_turns = 0;
    std::vector<Turn> dropped;
    while (n + g.max_tokens > limit && turns.size() > 1) {
      const std::size_t drop = turns.size() >= 2 && !turns[1].user ? 2 : 1;  // a user turn and its reply
      dropped.insert(dropped.end(), turns.begin(), turns.begin() + static_cast<std::ptrdiff_t>(drop));
      turns.erase(turns.begin(), turns.begin() + static_cast<std::ptrdiff_t>(drop));
      dropped_turns += drop;
      // Counted as the trace's context line counts them (those messages encoded on their own), not as the
      // conversation's shrinkage, which differs by the tokens merged across the cut (26 said, 27 traced).
      std::vector<ChatMessage> now;
      for (std::size_t i = dropped.size() - drop; i < dropped.size(); ++i) now.push_back({dropped[i].user ? "user" : "assistant", dropped[i].text});
      const std::size_t gone_tokens = encode_chat(tok, fmt, now, /*add_generation_prompt=*/false, /*bos=*/false).size();
      ids = encode();
      n = static_cast<int>(ids.size());
      std::cerr << "glassbox: chat: dropped the oldest " << (drop == 2 ? "exchange" : "turn") << " (" << gone_tokens
                << " tokens) to fit the context of " << limit << " positions\n";
    }
    if (dropped_turns == 0) return;
    // The trace's context line: what was dropped, as those messages encode on their own, at the
    // positions after BOS and the pinned system message.
    PolicyEvent ev;
    ev.policy = "prune-turns";
    ev.step = 0;
    ev.limit = limit;
    ev.turns = static_cast<int>(dropped_turns);
    std::vector<ChatMessage> gone;
    for (const auto& t : dropped) gone.push_back({t.user ? "user" : "assistant", t.text});
    ev.dropped_ids = encode_chat(tok, fmt, gone, /*add_generation_prompt=*/false, /*bos=*/false);
    ev.dropped_from = pinned_tokens();
    ev.dropped_to = ev.dropped_from + static_cast<int>(ev.dropped_ids.size());
    ev.kept = n;
    ev.detail = "dropped the oldest " + std::to_string(dropped_turns) + " turns to fit " + std::to_string(n) + " tokens and a reply of up to " +
                std::to_string(g.max_tokens) + " in " + std::to_string(limit) + " positions" +
                (system.empty() ? std::string() : "; the system message stays");
    g.pruned = std::move(ev);
  }

  // The reply to the conversation `ids` (n of them): generated through the turn's sinks, as run's (its
  // trace, --show-probs' charts, --json's token lines, the pace), streamed to stdout up to the next
  // turn's marker, and kept in the history.
  int answer(std::vector<std::int32_t> ids, int n) {
    GenerateOptions turn_opt = g;
    if (g.policy.kind == ContextPolicy::Stop || g.policy.kind == ContextPolicy::Refuse) {
      // a single turn longer than the window: let the engine drop its oldest tokens rather than fail
      if (n > limit) turn_opt.policy = parse_context_policy("truncate-left");
    }
    TeeSink sinks;
    std::unique_ptr<traces::JsonlWriter> writer;
    if (!opt.trace.empty()) {
      writer = std::make_unique<traces::JsonlWriter>(turn_trace_path(opt.trace, turn_no), tok, opt.trace_keep_partial,
                                                     trace_writer_thread(opt.trace_level, opt.trace_attention.on || opt.trace_lens != LensPoints::Off), opt.trace_logits);
      sinks.add(writer.get());
    }
    std::unique_ptr<traces::ProbsSink> probs;
    if (opt.show_probs) {
      probs = std::make_unique<traces::ProbsSink>(std::cerr, tok);
      sinks.add(probs.get());
    }
    std::unique_ptr<JsonTokenSink> json_out;
    if (opt.json) {
      json_out = std::make_unique<JsonTokenSink>(tok, opt.top_logprobs);
      json_out->extra["turn"] = turn_no;
      sinks.add(json_out.get());
    }
    sinks.add(&null);
    sinks.add(&interrupt);  // last: a step is recorded before the turn stops after it
    std::string reply;
    const std::string text = render_chat(fmt, messages(system, summary, turns));
    std::size_t shown = 0;  // bytes of reply already on stdout
    // Show the reply up to `end`, holding back a tail that may be the start of the next turn's marker
    // (the model writes "\nUser:" piece by piece: "\n", "U", "s", "er", ":").
    auto show = [&](std::size_t end) {
      if (opt.json) return;  // --json: the reply is in the token lines and the turn's summary line
      if (end > shown) {
        std::fwrite(reply.data() + shown, 1, end - shown, stdout);
        note_streamed(std::string_view(reply).substr(shown, end - shown));
        shown = end;
      }
      std::fflush(stdout);
    };
    const std::string_view marker = fmt == ChatFormat::Plain ? kNextTurn : std::string_view();
    PacedStream paced(pace, [&](std::string_view piece) {
      reply.append(piece);
      if (marker.empty()) return show(reply.size());
      const ReplyCut cut = cut_reply(reply, marker);
      show(cut.show);
      if (cut.found) {
        reply.resize(cut.show);
        throw StopGeneration{};
      }
    }, /*announce=*/!opt.json, PassCost::of(s.source->weights(), s.config));
    sinks.add(&paced);
    Summary sum;
    try {
      sum = strategy.generate(std::move(ids), text, turn_opt, sinks, [&](std::string_view piece) { paced.piece(piece); });
      try {
        paced.finish();
      } catch (const StopGeneration&) {  // the piece held back for the pace completed the marker
      }
    } catch (const std::exception& e) {
      if (probs) probs->flush();
      if (const int sig = interrupt_signal()) {  // between steps, or a grammar walk stopped for it
        if (writer) writer->interrupted(signal_name(sig));
        return interrupted(sig);
      }
      if (writer) writer->error(e.what());
      throw;
    }
    // A marker begun but not finished when the reply ended (--max-tokens) is no one's: not shown,
    // not kept in the history.
    reply = finished_reply(reply, marker);
    if (opt.json) {
      JsonTokenSink::print({{"type", "summary"}, {"turn", turn_no}, {"text", reply}, {"generated", sum.generated},
                            {"stop_reason", sum.stop_reason}, {"ttft_ms", sum.ttft_ms}, {"prefill_tok_s", sum.prefill_tok_s},
                            {"decode_tok_s", sum.decode_tok_s}});
    } else {
      std::fputs("\n", stdout);
      note_streamed("\n");
      std::fflush(stdout);
    }
    turns.push_back({false, reply});
    return 0;
  }
};

}  // namespace

void add_chat_command(CLI::App& app) {
  auto o = std::make_shared<ChatOpts>();
  auto* cmd = app.add_subcommand("chat", "a conversation: one line per user turn, from the terminal, a pipe or --input; "
                                         "--trace FILE writes one trace per turn, FILE-turnN");
  auto binder = std::make_shared<RunOptionsBinder>(cmd, kChat);
  cmd->add_option("--system", o->system, "a first message pinned at the top: pruning never drops it");
  cmd->add_option("--system-file", o->system_file,
                  "read the system message from this file (at most 1 MiB; one command-line argument is at most 128 KiB on Linux)");
  cmd->add_option("--input", o->input, "read the user's turns from this file, one per line (default: stdin)");
  cmd->callback([o, binder] {
    RunOptions opt = binder->finish();
    const std::string system_flag = read_system_message(*o);
    if (opt.max_tokens == 256 && opt.context == 0) opt.max_tokens = 64;  // a reply, not a story
    opt.model_hash = !opt.trace.empty();  // only a turn trace records the model's digest: no start-up spent hashing otherwise
    // Sampled, beam search (--beam-width) or speculative decoding (--draft-model), for every turn.
    auto s = open_session(StrategyChoice::session_options(opt, [&](const char* key) { return binder->given(key); }));
    const ChatFormat fmt = turn_format(*s->tokenizer);
    StrategyChoice strategy(opt, *s);
    Chat chat(opt, o->system, system_flag, *s, fmt, strategy);
    chat.run(o->input);
  });
}

}  // namespace glassbox::cli
