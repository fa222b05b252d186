// `glassbox chat`: a conversation read line by line; the whole history is re-tokenized every turn in the
// model's turn format, and the oldest turns are pruned (never --system) when it no longer fits.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "commands.hpp"
#include "glassbox/chat_template.hpp"
#include "glassbox/engine.hpp"
#include "glassbox/error.hpp"
#include "session.hpp"

namespace glassbox::cli {

namespace {

struct Turn {
  bool user;
  std::string text;
};

// The history as the model reads it, in its turn format (core/include/glassbox/chat_template.hpp),
// ending where the assistant's next reply begins.
std::string render(ChatFormat f, const std::string& system, const std::vector<Turn>& turns) {
  std::vector<ChatMessage> m;
  if (!system.empty()) m.push_back({"system", system});
  for (const auto& t : turns) m.push_back({t.user ? "user" : "assistant", t.text});
  return render_chat(f, m);
}

// Thrown from the stream callback to end a reply at the next turn's marker (plain format).
struct EndOfReply {};

}  // namespace

void add_chat_command(CLI::App& app) {
  struct Opts {
    std::string system, input;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("chat", "a conversation: one line per user turn, from the terminal, a pipe or --input");
  auto binder = std::make_shared<RunOptionsBinder>(cmd, true);
  cmd->add_option("--system", o->system, "a first message pinned at the top: pruning never drops it");
  cmd->add_option("--input", o->input, "read the user's turns from this file, one per line (default: stdin)");
  cmd->callback([o, binder] {
    RunOptions opt = binder->finish();
    if (opt.max_tokens == 256 && opt.context == 0) opt.max_tokens = 64;  // a reply, not a story
    opt.model_hash = false;  // chat writes no trace: no start-up spent hashing the model
    auto s = open_session(opt);
    ChatFormat fmt = detect_chat_format(s->tokenizer->chat_template());
    if (fmt == ChatFormat::None) fmt = ChatFormat::Plain;  // no template: "User: …\nAssistant:"
    if (fmt != ChatFormat::Plain)
      warn(std::string("chat: the model's template is ") + std::string(chat_format_name(fmt)) +
           "; its turn markers are encoded as text (this tokenizer does not parse control tokens from text)");
    Engine engine(*s->model, *s->tokenizer, *s->attention, *s->sampler);
    const int limit = engine.context_limit();
    GenerateOptions g;
    g.max_tokens = opt.max_tokens;
    g.seed = s->seed;
    g.record_stages = g.report_distribution = false;
    g.policy = opt.context_policy;

    std::ifstream file;
    if (!o->input.empty()) {
      file.open(o->input);
      if (!file) throw ConfigError("--input " + o->input + ": cannot read");
    }
    std::istream& in = o->input.empty() ? std::cin : file;
    std::vector<Turn> turns;
    std::string line;
    struct Null final : TraceSink {
      void header(const RunHeader&) override {}
      void step(const StepEvent&) override {}
      void summary(const Summary&) override {}
    } null;
    const bool tty = o->input.empty() && isatty(0);
    int turn_no = 0;
    while (true) {
      if (tty) std::fputs("> ", stderr);
      if (!std::getline(in, line)) break;
      if (line.empty()) continue;
      turns.push_back({true, line});
      ++turn_no;
      // Fit: the history plus room for a reply must hold in the context; drop the oldest turns.
      auto tokens = [&] { return static_cast<int>(s->tokenizer->encode(render(fmt, o->system, turns), true, false).size()); };
      int n = tokens();
      while (n + g.max_tokens > limit && turns.size() > 1) {
        const std::size_t drop = turns.size() >= 2 && !turns[1].user ? 2 : 1;  // a user turn and its reply
        turns.erase(turns.begin(), turns.begin() + static_cast<std::ptrdiff_t>(drop));
        const int before = n;
        n = tokens();
        std::cerr << "glassbox: chat: dropped the oldest " << (drop == 2 ? "exchange" : "turn") << " (" << before - n
                  << " tokens) to fit the context of " << limit << " positions\n";
      }
      if (n + g.max_tokens > limit && g.policy.kind == ContextPolicy::Refuse)
        throw InputError("chat turn " + std::to_string(turn_no) + " alone is " + std::to_string(n) + " tokens; with a reply of up to " +
                         std::to_string(g.max_tokens) + " it does not fit the " + std::to_string(limit) + " positions (--context-policy refuse)");
      if (g.policy.kind == ContextPolicy::Stop || g.policy.kind == ContextPolicy::Refuse) {
        // a single turn longer than the window: let the engine drop its oldest tokens rather than fail
        if (n > limit) g.policy = parse_context_policy("truncate-left");
      }
      std::string reply;
      std::size_t shown = 0;  // bytes of reply already on stdout
      // Show the reply up to `end`, holding back a tail that may be the start of the next turn's marker
      // (the model writes "\nUser:" piece by piece: "\n", "U", "s", "er", ":").
      auto show = [&](std::size_t end) {
        if (end > shown) std::fwrite(reply.data() + shown, 1, end - shown, stdout), shown = end;
        std::fflush(stdout);
      };
      static constexpr std::string_view kNextTurn = "\nUser:";
      try {
        engine.generate(render(fmt, o->system, turns), g, s->header, null, [&](std::string_view piece) {
          reply.append(piece);
          if (fmt != ChatFormat::Plain) return show(reply.size());
          if (const auto cut = reply.find(kNextTurn); cut != std::string::npos) {
            reply.resize(cut);
            show(cut);
            throw EndOfReply{};
          }
          std::size_t hold = std::min(reply.size(), kNextTurn.size() - 1);
          while (hold > 0 && reply.compare(reply.size() - hold, hold, kNextTurn.substr(0, hold)) != 0) --hold;
          show(reply.size() - hold);
        });
      } catch (const EndOfReply&) {
      }
      show(reply.size());
      std::fputs("\n", stdout);
      std::fflush(stdout);
      while (!reply.empty() && (reply.front() == ' ')) reply.erase(0, 1);
      while (!reply.empty() && (reply.back() == '\n' || reply.back() == ' ')) reply.pop_back();
      turns.push_back({false, reply});
    }
  });
}

}  // namespace glassbox::cli
