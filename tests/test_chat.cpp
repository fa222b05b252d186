// `glassbox chat` honours every option it lists: one case per entry of the run option table that chat
// takes (data-driven over the table, so a new chat option without a case fails here), each showing the
// option's effect on a conversation; and the transcript's own rules (echoed turns, no half-written marker).
#define BOOST_TEST_MODULE chat
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <sstream>

#include "../cli/chat_reply.hpp"
#include "../cli/run_options.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
namespace bdata = boost::unit_test::data;
using nlohmann::json;
using gbtest::CliResult;
BOOST_TEST_DONT_PRINT_LOG_VALUE(std::vector<std::string>)

namespace {

const std::string kTurns = "My name is Lily.\nWhat is my name?\n";

// The toy model's own files, named explicitly (the default is the installed copy of them).
std::string toy(const std::string& f) { return (fs::path(GLASSBOX_SOURCE_DIR) / "models" / "toy" / f).string(); }

struct Chat {
  fs::path dir;
  // `glassbox chat` over kTurns (two turns) with `more`.
  CliResult operator()(std::vector<std::string> more, const std::string& env = "") const {
    std::vector<std::string> a = {"chat", "--input", (dir / "turns.txt").string()};
    // a seed and a short reply unless the case sets its own
    if (std::find(more.begin(), more.end(), "--seed") == more.end()) a.insert(a.end(), {"--seed", "1"});
    if (std::find(more.begin(), more.end(), "--max-tokens") == more.end()) a.insert(a.end(), {"--max-tokens", "6"});
    a.insert(a.end(), more.begin(), more.end());
    return gbtest::run_cli(a, env);
  }
  std::string trace() const { return (dir / "c.jsonl").string(); }
  std::vector<json> turn(int n) const { return gbtest::read_jsonl(dir / ("c-turn" + std::to_string(n) + ".jsonl")); }
  json header(int n = 1) const { return turn(n).front(); }
  // The run that wrote turn n's summary (--context-policy summarize).
  std::vector<json> summary_run(int n) const { return gbtest::read_jsonl(dir / ("c-turn" + std::to_string(n) + "-summary.jsonl")); }
  json first_step(int n = 1) const {
    for (const auto& l : turn(n))
      if (l["type"] == "step") return l;
    return {};
  }
};

std::vector<json> lines_of(const std::string& out) {
  std::vector<json> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) v.push_back(json::parse(line));
  return v;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// One case per chat option: the option's effect, checked. Each case runs chat itself.
using Case = std::function<void(const Chat&)>;

// A constraint on the replies (--grammar, --json-schema) given in a file: chat runs the grammar stage,
// and every reply is a sentence of the constraint, ended by the end-of-generation token once complete.
struct Constraint {
  std::string flag, file, text;
  std::vector<std::string> sentences;  // each reply starts with one of these
};
Case constrained(Constraint k) {
  return [k](const Chat& c) {
    gbtest::write_file(c.dir / k.file, k.text);
    const auto r = c({k.flag, (c.dir / k.file).string(), "--max-tokens", "12", "--trace", c.trace()});
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    BOOST_TEST(c.header()["plugins"]["sampler"][0]["name"] == "grammar");
    for (int t = 1; t <= 2; ++t) {
      std::string text;
      for (const auto& l : c.turn(t))
        if (l["type"] == "step") text += l["token"]["text"].get<std::string>();
      BOOST_TEST(std::any_of(k.sentences.begin(), k.sentences.end(), [&](const std::string& s) { return text.rfind(s, 0) == 0; }),
                 k.flag << " turn " << t << ": '" << text << "'");
      BOOST_TEST(c.turn(t).back()["stop_reason"] == "stop_token", k.flag << " turn " << t);
    }
  };
}
const std::map<std::string, Case>& cases() {
  static const std::map<std::string, Case> m = {
      {"config",
       [](const Chat& c) {
         gbtest::write_file(c.dir / "c.yaml", "sampler: [greedy]\ntrace_top: 2\nprompt: not for chat\n");
         const auto r = c({"--config", (c.dir / "c.yaml").string(), "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.header()["plugins"]["sampler"][0]["name"] == "greedy");
         BOOST_TEST(c.header()["schema"] == "glassbox.trace/2");  // per-turn traces: the version glassbox writes
         BOOST_TEST(c.first_step()["top"].size() == 2u);
         BOOST_TEST(has(r.err, "prompt is not an option of chat (ignored)"), r.err);
       }},
      {"model",
       [](const Chat& c) {
         const auto r = c({"--model", toy("toy.bin"), "--tokenizer", toy("toy-tok.bin"), "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.header()["model"]["path"] == toy("toy.bin"));
       }},
      {"tokenizer",
       [](const Chat& c) {
         const auto r = c({"--model", toy("toy.bin"), "--tokenizer", toy("toy-tok.bin"), "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.header()["tokenizer"]["path"] == toy("toy-tok.bin"));
       }},
      {"tokenizer_plugin",
       [](const Chat& c) {
         const auto r = c({"--tokenizer-plugin", "bpe"});  // the toy's vocabulary is no byte-level BPE file
         BOOST_TEST(r.rc == 2, r.err);
         BOOST_TEST(has(r.err, "not valid JSON"), r.err);  // read as a tokenizer.json: the plugin was used
       }},
      {"context",
       [](const Chat& c) {
         const auto r = c({"--context", "40", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.header()["model"]["config"]["seq_len"] == 40);
       }},
      {"attention",
       [](const Chat& c) {
         const auto r = c({"--attention", "kv-cache:64", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.header()["plugins"]["attention"]["params"]["capacity"] == 64);
       }},
      {"plugin_path",
       [](const Chat& c) {
         const auto r = c({"--plugin-path", (fs::path(GLASSBOX_TEST_PLUGIN_DIR) / "bad_abi").string()});
         BOOST_TEST(r.rc == 0, r.err);
         BOOST_TEST(has(r.err, "bad_abi.so: ABI version 999"), r.err);
       }},
      {"context_policy",
       [](const Chat& c) {
         // 40 positions hold the first turn and its reply, not the second turn with them: the default
         // drops the oldest exchange, refuse drops nothing and stops.
         const auto pruned = c({"--context", "40"});
         BOOST_TEST(pruned.rc == 0, pruned.err);
         BOOST_TEST(has(pruned.err, "dropped the oldest exchange"), pruned.err);
         const auto refused = c({"--context", "40", "--context-policy", "refuse"});
         BOOST_TEST(refused.rc == 2, refused.err);
         BOOST_TEST(has(refused.err, "chat turn 2: the conversation is "), refused.err);
         BOOST_TEST(has(refused.err, "--context-policy refuse drops nothing"), refused.err);
         BOOST_TEST(!has(refused.err, "dropped the oldest"), refused.err);
         // summarize: the first exchange is replaced by a summary the model writes, and the chat goes on
         const auto summarized = c({"--context", "48", "--context-policy", "summarize", "--summary-tokens", "8"});
         BOOST_TEST(summarized.rc == 0, summarized.err);
         BOOST_TEST(has(summarized.err, "glassbox: chat: summarized the oldest exchange ("), summarized.err);
         BOOST_TEST(!has(summarized.err, "dropped the oldest"), summarized.err);
         BOOST_TEST(std::count(summarized.out.begin(), summarized.out.end(), '\n') == 2, summarized.out);  // both replies
       }},
      // --summary-model, --summary-tokenizer, --summary-tokens: who writes the summary, and how long it may be
      // (the toy model's files named again: the summary model may be the chat's own file).
      {"summary_model",
       [](const Chat& c) {
         const auto r = c({"--context", "48", "--context-policy", "summarize", "--summary-tokens", "8", "--summary-model", toy("toy.bin"),
                           "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.summary_run(2).front()["model"]["path"] == toy("toy.bin"));
         BOOST_TEST(c.summary_run(2).front()["plugins"]["sampler"][0]["name"] == "greedy");
         BOOST_TEST(has(c.turn(2)[1]["detail"].get<std::string>(), "by a summary --summary-model " + toy("toy.bin") + " wrote"),
                    c.turn(2)[1].dump());
       }},
      {"summary_tokenizer",
       [](const Chat& c) {
         const auto r = c({"--context", "48", "--context-policy", "summarize", "--summary-tokens", "8", "--summary-model", toy("toy.bin"),
                           "--summary-tokenizer", toy("toy-tok.bin"), "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.summary_run(2).front()["tokenizer"]["path"] == toy("toy-tok.bin"));
       }},
      {"summary_tokens",
       [](const Chat& c) {
         const auto r = c({"--context", "48", "--context-policy", "summarize", "--summary-tokens", "3", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.summary_run(2).front()["max_tokens"] == 3);
         BOOST_TEST(c.summary_run(2).back()["generated"].get<int>() <= 3);
       }},
      {"gelu",
       [](const Chat& c) {
         // Only a GELU model has a GELU: the GPT-2 test model's first logprob moves with its form.
         if (!gbtest::shared_dir()) {
           BOOST_TEST_MESSAGE("gelu: skipped, ../shared is absent");
           return;
         }
         const std::string model = gbtest::shared("gguf/arch/gpt2-synth-f32.gguf").string();
         const CliResult with_tanh = c({"--model", model, "--json", "--sampler", "greedy"});
         const CliResult with_erf = c({"--model", model, "--json", "--sampler", "greedy", "--gelu", "erf"});
         BOOST_TEST_REQUIRE(with_tanh.rc == 0, with_tanh.err);
         BOOST_TEST_REQUIRE(with_erf.rc == 0, with_erf.err);
         const std::vector<json> lt = lines_of(with_tanh.out), le = lines_of(with_erf.out);
         BOOST_TEST_REQUIRE(lt.size() > 1u);
         BOOST_TEST_REQUIRE(le.size() > 1u);
         const double pa = lt[1].value("logprob", 0.0), pb = le[1].value("logprob", 0.0);
         BOOST_TEST(pa != pb, "tanh and erf GELU give the same first logprob " << pa);
       }},
      {"threads",
       [](const Chat& c) {
         const auto r = c({"--threads", "1", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.header()["threads"] == 1);
       }},
      {"max_tokens",
       [](const Chat& c) {
         const auto r = c({"--max-tokens", "2", "--ignore-eos", "--json"});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         int summaries = 0;
         for (const auto& l : lines_of(r.out))
           if (l["type"] == "summary") {
             ++summaries;
             BOOST_TEST(l["generated"].get<int>() <= 2, l.dump());
           }
         BOOST_TEST(summaries == 2);
       }},
      {"sampler",
       [](const Chat& c) {
         const auto r = c({"--sampler", "greedy", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.header()["plugins"]["sampler"][0]["name"] == "greedy");
         BOOST_TEST(c.header()["plugins"]["sampler"].size() == 1u);
         BOOST_TEST(!has(r.err, "changes nothing"), r.err);
         // a stage that is off with its defaults is named in a warning, once, with a value that turns it on
         const auto xtc = c({"--sampler", "xtc"});
         BOOST_TEST_REQUIRE(xtc.rc == 0, xtc.err);
         BOOST_TEST(has(xtc.err, "warning: sampler stage 'xtc' changes nothing: probability = 0"), xtc.err);
         BOOST_TEST(has(xtc.err, "xtc:probability=0.5 turns it on"), xtc.err);
         BOOST_TEST(xtc.err.find("changes nothing") == xtc.err.rfind("changes nothing"), xtc.err);
       }},
      {"ignore_eos",
       [](const Chat& c) {
         const auto r = c({"--ignore-eos", "--max-tokens", "20", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.header()["plugins"]["sampler"][0]["name"] == "logit-bias");
         BOOST_TEST(c.turn(1).back()["stop_reason"] != "stop_token");
       }},
      // --grammar and --json-schema: one case over the two constraints (constrained(), above).
      {"grammar", constrained({"--grammar", "yn.gbnf", "root ::= (\"yes\" | \"no\") \".\"\n", {"yes.", "no."}})},
      {"json_schema", constrained({"--json-schema", "b.json", R"({"type": "boolean"})", {"true", "false"}})},
      {"seed",
       [](const Chat& c) {
         const auto r = c({"--seed", "42", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.header()["seed"] == 42);
       }},
      {"trace",
       [](const Chat& c) {
         const auto r = c({"--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.turn(1).back()["type"] == "summary");
         BOOST_TEST(c.turn(2).back()["type"] == "summary");
       }},
      {"trace_keep_partial",
       [](const Chat& c) {
         // A turn that fails (a temperature that overflows the logits) ends its trace in an error line:
         // kept beside an existing trace without the option, written over it with.
         const fs::path t1 = c.dir / "c-turn1.jsonl";
         const std::vector<std::string> failing = {"--sampler", "temperature:1.5e-38,dist", "--trace", c.trace()};
         gbtest::write_file(t1, "old\n");
         const auto kept = c(failing);
         BOOST_TEST(kept.rc == 2, kept.err);
         BOOST_TEST(gbtest::read_file(t1) == "old\n");
         BOOST_TEST(fs::exists(t1.string() + ".partial"));
         auto with = failing;
         with.push_back("--trace-keep-partial");
         const auto replaced = c(with);
         BOOST_TEST(replaced.rc == 2, replaced.err);
         BOOST_TEST(has(gbtest::read_file(t1), "\"type\":\"error\""), gbtest::read_file(t1));
       }},
      {"trace_level",
       [](const Chat& c) {
         const auto r = c({"--trace-level", "full", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.first_step().contains("logits"));
       }},
      {"trace_logits",
       [](const Chat& c) {
         const auto r = c({"--trace-level", "full", "--trace-logits", "decimal", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.first_step()["logits"].is_array());
       }},
      {"trace_top",
       [](const Chat& c) {
         const auto r = c({"--trace-top", "3", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.first_step()["top"].size() == 3u);
       }},
      {"echo",
       [](const Chat& c) {
         const auto r = c({"--echo"});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(r.out.rfind("> My name is Lily.\n", 0) == 0u, r.out);
         BOOST_TEST(has(r.out, "\n> What is my name?\n"), r.out);
         BOOST_TEST(!has(r.err, "> My name"), r.err);  // on stdout, not twice
       }},
      {"show_probs",
       [](const Chat& c) {
         const auto plain = c({});
         const auto r = c({"--show-probs"});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(has(r.err, "█"), r.err);
         BOOST_TEST(!has(plain.err, "█"), plain.err);
       }},
      {"json",
       [](const Chat& c) {
         const auto r = c({"--json"});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         std::vector<json> lines;
         BOOST_REQUIRE_NO_THROW(lines = lines_of(r.out));
         std::vector<std::string> kinds;
         for (const auto& l : lines)
           if (kinds.empty() || kinds.back() != l["type"]) kinds.push_back(l["type"]);
         BOOST_TEST(kinds == (std::vector<std::string>{"user", "token", "summary", "user", "token", "summary"}),
                    boost::test_tools::per_element());
         BOOST_TEST(lines.front()["text"] == "My name is Lily.");
         BOOST_TEST(lines.front()["turn"] == 1);
         // a turn's summary text is its tokens' text, without the marker and spaces around it
         std::string text;
         for (const auto& l : lines)
           if (l["type"] == "token" && l["turn"] == 1 && !l.contains("special")) text += l["token"].get<std::string>();
           else if (l["type"] == "summary" && l["turn"] == 1) BOOST_TEST(has(text, l["text"].get<std::string>()), text);
       }},
      {"top_logprobs",
       [](const Chat& c) {
         const auto r = c({"--json", "--top-logprobs", "2"});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         for (const auto& l : lines_of(r.out))
           if (l["type"] == "token") BOOST_TEST(l["top_logprobs"].size() == 2u);
       }},
      {"pace",
       [](const Chat& c) {
         // n tokens at 120 ms take at least (n - 1) × 120 ms (the first waits as long as the prefill really took, scaled)
         const auto t0 = std::chrono::steady_clock::now();
         const auto r = c({"--pace", "120", "--ignore-eos", "--max-tokens", "4"});
         const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(ms >= 2 * 3 * 120, ms);
         // each turn's prefill (its new tokens) is shown by the cost model, as fewer decode steps than tokens
         std::istringstream lines(r.err);
         int prefills = 0;
         for (std::string l; std::getline(lines, l);)
           if (l.rfind("[glassbox] prefill: ", 0) == 0) {
             ++prefills;
             BOOST_TEST(has(l, " decode steps by the cost model"), l);
             const int n = std::stoi(l.substr(20));
             const double steps = std::stod(l.substr(l.find(" = ") + 3));
             BOOST_TEST((steps > 0 && steps < n), l);
           }
         BOOST_TEST(prefills == 2, r.err);
       }},
      {"pace_tps",
       [](const Chat& c) {
         const auto t0 = std::chrono::steady_clock::now();
         const auto r = c({"--pace-tps", "8", "--ignore-eos", "--max-tokens", "4"});
         const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(ms >= 2 * 3 * 125, ms);
       }},
      {"trace_attention",
       [](const Chat& c) {
         const auto r = c({"--trace-attention", "0:1", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.first_step().contains("attention"), c.first_step().dump());
       }},
      {"trace_lens",
       [](const Chat& c) {
         const auto r = c({"--trace-lens", "all", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.first_step()["lens"].size() == 8u, c.first_step().dump());  // the toy's 4 layers, 2 points each
       }},
      // Beam search and speculative decoding in chat (#40): each turn is the strategy `run` runs over the same
      // prompt, and its trace says so.
      {"beam_width",
       [](const Chat& c) {
         const auto r = c({"--beam-width", "3", "--max-tokens", "10", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         for (int t = 1; t <= 2; ++t) {
           const auto lines = c.turn(t);
           BOOST_TEST_REQUIRE(lines.back()["type"] == "summary");
           BOOST_TEST(lines.back()["beam"]["width"] == 3, "turn " << t);
           BOOST_TEST(lines.back()["beam"]["hypotheses"].size() >= 1u, "turn " << t);
           // `run --beam-width 3` on the turn's prompt decides the same tokens (chat may stop earlier, at the
           // next turn's marker): the search is the same search.
           const fs::path rt = c.dir / ("run-" + std::to_string(t) + ".jsonl");
           const auto run = gbtest::run_cli({"run", "--beam-width", "3", "--max-tokens", "10", "--prompt", lines.front()["prompt"].get<std::string>(),
                                            "--trace", rt.string()});
           BOOST_TEST_REQUIRE(run.rc == 0, run.err);
           const auto run_lines = gbtest::read_jsonl(rt);
           BOOST_TEST_REQUIRE(run_lines.front()["prompt_ids"] == lines.front()["prompt_ids"]);
           std::vector<int> chat_ids, run_ids;
           for (const auto& l : lines)
             if (l["type"] == "step") chat_ids.push_back(l["token"]["id"].get<int>());
           for (const auto& l : run_lines)
             if (l["type"] == "step") run_ids.push_back(l["token"]["id"].get<int>());
           BOOST_TEST_REQUIRE(!chat_ids.empty());
           BOOST_TEST_REQUIRE(chat_ids.size() <= run_ids.size());
           BOOST_TEST(std::equal(chat_ids.begin(), chat_ids.end(), run_ids.begin()), "turn " << t);
           BOOST_TEST(lines.back()["beam"]["hypotheses"] == run_lines.back()["beam"]["hypotheses"], "turn " << t);
         }
       }},
      {"length_penalty",
       [](const Chat& c) {
         const auto r = c({"--beam-width", "2", "--length-penalty", "0.5", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.turn(1).back()["beam"]["length_penalty"] == 0.5);
         const auto alone = c({"--length-penalty", "0.5"});  // without beams it would do nothing: refused
         BOOST_TEST(alone.rc == 2, alone.err);
         BOOST_TEST(has(alone.err, "--length-penalty applies to beam search only"), alone.err);
       }},
      {"draft_model",
       [](const Chat& c) {
         // Greedy speculative decoding decides the model's own greedy tokens: the same replies as without a draft.
         const auto plain = c({"--sampler", "greedy", "--max-tokens", "8"});
         const auto r = c({"--sampler", "greedy", "--max-tokens", "8", "--draft-model", toy("toy.bin"), "--trace", c.trace()});
         BOOST_TEST_REQUIRE(plain.rc == 0, plain.err);
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(r.out == plain.out);
         BOOST_TEST(c.header(2)["speculative"]["draft_model"] == toy("toy.bin"));
         BOOST_TEST(c.turn(2).back()["speculative"]["proposed"].get<int>() > 0);
         const auto both = c({"--draft-model", toy("toy.bin"), "--beam-width", "2"});
         BOOST_TEST(both.rc == 2, both.err);
         BOOST_TEST(has(both.err, "--draft-model and --beam-width"), both.err);
       }},
      {"draft_tokenizer",
       [](const Chat& c) {
         const auto r = c({"--draft-model", toy("toy.bin"), "--draft-tokenizer", toy("toy-tok.bin"), "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.header()["speculative"]["draft_tokenizer"] == toy("toy-tok.bin"));
       }},
      {"draft_tokens",
       [](const Chat& c) {
         const auto r = c({"--draft-model", toy("toy.bin"), "--draft-tokens", "2", "--trace", c.trace()});
         BOOST_TEST_REQUIRE(r.rc == 0, r.err);
         BOOST_TEST(c.turn(1).back()["speculative"]["k"] == 2);
         const auto alone = c({"--draft-tokens", "2"});
         BOOST_TEST(alone.rc == 2, alone.err);
         BOOST_TEST(has(alone.err, "name the draft with --draft-model"), alone.err);
       }},
  };
  return m;
}

std::vector<std::string> chat_keys() {
  std::vector<std::string> keys;
  for (const auto& e : glassbox::cli::run_option_table())
    if (e.commands & glassbox::cli::kChat) keys.push_back(e.key);
  return keys;
}

}  // namespace

// Every option chat lists has a case here showing its effect in chat.
BOOST_DATA_TEST_CASE(every_option_chat_lists_acts_in_chat, bdata::make(chat_keys()), key) {
  const auto it = cases().find(key);
  BOOST_TEST_REQUIRE((it != cases().end()), "chat lists --" << key << " but no test shows its effect in chat: add a case, or stop listing it");
  Chat c{gbtest::temp_dir("chat-" + key)};
  gbtest::write_file(c.dir / "turns.txt", kTurns);
  it->second(c);
  fs::remove_all(c.dir);
}

// A system message that cannot fit with a reply (the toy model's 128 positions) is refused up front, one
// line naming --system (or --system-file), its size and the context; before, it was accepted and the
// engine's truncation silently kept its first token and the newest ones. One longer than a command-line
// argument may be (128 KiB on Linux: the kernel refused to start glassbox, "Argument list too long",
// naming nothing) comes from --system-file.
BOOST_AUTO_TEST_CASE(a_system_message_that_cannot_fit_is_refused_naming_it) {
  const fs::path dir = gbtest::temp_dir("chat-system");
  gbtest::write_file(dir / "turns.txt", "hi\n");
  const std::vector<std::string> base = {"chat", "--input", (dir / "turns.txt").string(), "-n", "4", "--seed", "1"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return gbtest::run_cli(more);
  };
  std::string big;
  for (int i = 0; i < 25000; ++i) big += "a b ";  // 100 KB
  auto r = with({"--system", big});
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(has(r.err, "--system: the system message is 50016 tokens (100000 bytes); with a reply of up to 4 (--max-tokens) it does not fit the 128 positions"), r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
  std::string wide;
  for (int i = 0; i < 100000; ++i) wide += "\xc3\xa9";  // 200 KB of "é"
  gbtest::write_file(dir / "system.txt", wide + "\n");
  r = with({"--system-file", (dir / "system.txt").string()});
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(has(r.err, "--system-file " + (dir / "system.txt").string() + ": the system message is "), r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
  gbtest::write_file(dir / "kind.txt", "Be kind.\n");
  r = with({"--system-file", (dir / "kind.txt").string(), "--trace", (dir / "c.jsonl").string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(gbtest::read_jsonl(dir / "c-turn1.jsonl").front()["prompt"] == "System: Be kind.\nUser: hi\nAssistant:");
  r = with({"--system-file", (dir / "kind.txt").string(), "--system", "x"});
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(has(r.err, "--system and --system-file both given"), r.err);
  fs::remove_all(dir);
}

// Options chat does not take are refused, not ignored.
BOOST_DATA_TEST_CASE(options_chat_does_not_list_are_refused, bdata::make({"--prompt", "--replay"}), flag) {
  const auto r = gbtest::run_cli({"chat", flag, "x"});
  BOOST_TEST(r.rc != 0);
  BOOST_TEST(has(r.err, std::string(flag)), r.err);
}

// Turns piped in are shown on stderr as the terminal would show them typed; a reply never leaks a
// half-written "User" marker (toy model, seed 1, 8 tokens: the reply ends "...Lily!\nUs").
BOOST_AUTO_TEST_CASE(piped_turns_are_echoed_and_no_half_marker_leaks) {
  const fs::path dir = gbtest::temp_dir("chat-pipe");
  gbtest::write_file(dir / "turns.txt", kTurns);
  const auto r = gbtest::run_cli({"chat", "--input", (dir / "turns.txt").string(), "--seed", "1", "--max-tokens", "8", "--trace",
                                  (dir / "c.jsonl").string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(has(r.err, "> My name is Lily.\n"), r.err);
  BOOST_TEST(has(r.err, "> What is my name?\n"), r.err);
  // The first reply's tokens spell the start of a marker; neither stdout nor the next turn's prompt has it.
  std::string tokens;
  for (const auto& l : gbtest::read_jsonl(dir / "c-turn1.jsonl"))
    if (l["type"] == "step") tokens += l["token"]["text"].get<std::string>();
  BOOST_TEST_MESSAGE("turn 1 tokens: " << json(tokens).dump());
  const std::string prompt2 = gbtest::read_jsonl(dir / "c-turn2.jsonl").front()["prompt"];
  BOOST_TEST(!has(prompt2, "\nUs\n"), prompt2);
  BOOST_TEST(!has(r.out, "Us\n"), r.out);
  fs::remove_all(dir);
}

// The toy model copies any name from the context (models/toy/grammar.py: made-up names in training, a
// copying head): chat has no list of names to warn about, and a name it never saw comes back
// (tests/test_recall.cpp measures this over many names and windows).
BOOST_AUTO_TEST_CASE(toy_model_recalls_a_name_it_never_saw_without_a_warning) {
  const fs::path dir = gbtest::temp_dir("chat-names");
  for (const std::string name : {"Priya", "Lily"}) {
    gbtest::write_file(dir / "turns.txt", "My name is " + name + ".\nWhat is my name?\n");
    const auto r = gbtest::run_cli({"chat", "--input", (dir / "turns.txt").string(), "--sampler", "greedy", "-n", "12"});
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    BOOST_TEST(!has(r.err, "warning"), r.err);
    BOOST_TEST(has(r.out, " Hello, " + name + "!\n Your name is " + name + ".\n"), r.out);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(reply_cut_holds_back_a_marker_begun) {
  using glassbox::cli::cut_reply, glassbox::cli::finished_reply;
  const std::string_view m = "\nUser:";
  BOOST_TEST(cut_reply("Hello", m).show == 5u);
  BOOST_TEST(cut_reply("Hello\nUs", m).show == 5u);
  BOOST_TEST(!cut_reply("Hello\nUs", m).found);
  BOOST_TEST(cut_reply("Hello\nUser: hi", m).show == 5u);
  BOOST_TEST(cut_reply("Hello\nUser: hi", m).found);
  BOOST_TEST(cut_reply("Hello\nUsed", m).show == 10u);
  BOOST_TEST(finished_reply(" Hello, Lily!\nUs", m) == "Hello, Lily!");
  BOOST_TEST(finished_reply(" Hello\n", m) == "Hello");
  BOOST_TEST(finished_reply(" Hi <|im", "") == "Hi <|im");
  BOOST_TEST(finished_reply("  \n", m).empty());
}

// --context-policy summarize (docs/attention.md): when the conversation no longer fits, the oldest
// exchanges (never --system, never the newest user turn) are replaced by a summary the model writes
// greedily from the documented request; the turn's trace says what was replaced by what, the next
// prompts hold the summary where the turns were, and the chat goes on.
namespace {
const std::string kLongTurns = "My name is Lily.\nHow are you?\nWhere should we go?\nWhat is my name?\n";
std::vector<std::string> summarize_args(const fs::path& dir) {
  return {"chat", "--input", (dir / "turns.txt").string(), "--seed", "3", "--max-tokens", "12", "--context", "72",
          "--context-policy", "summarize", "--summary-tokens", "12", "--system", "Be kind.", "--trace", (dir / "c.jsonl").string()};
}
// A trace's lines without what the clock decides.
std::vector<json> untimed(const fs::path& f) {
  std::vector<json> lines = gbtest::read_jsonl(f);
  for (auto& l : lines)
    for (const char* k : {"ms", "ttft_ms", "prefill_tok_s", "decode_tok_s"}) l.erase(k);
  return lines;
}
std::string steps_text(const std::vector<json>& lines) {
  std::string t;
  for (const auto& l : lines)
    if (l["type"] == "step") t += l["token"]["text"].get<std::string>();
  return t;
}
}  // namespace

BOOST_AUTO_TEST_CASE(summarize_replaces_the_oldest_exchanges_and_the_chat_goes_on) {
  const fs::path dir = gbtest::temp_dir("chat-summarize");
  gbtest::write_file(dir / "turns.txt", kLongTurns);
  const auto r = gbtest::run_cli(summarize_args(dir));
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(std::count(r.out.begin(), r.out.end(), '\n') == 4, r.out);  // every turn answered
  int summarized = 0;
  std::optional<std::string> current;  // the summary the conversation holds
  for (int t = 1; t <= 4; ++t) {
    const fs::path f = dir / ("c-turn" + std::to_string(t) + ".jsonl");
    const auto v = gbtest::run_cli({"trace", "validate", f.string()});
    BOOST_TEST(v.rc == 0, f << ": " << v.out << v.err);
    const auto lines = gbtest::read_jsonl(f);
    const std::string prompt = lines.front()["prompt"];
    BOOST_TEST(prompt.rfind("System: Be kind.\n", 0) == 0u, prompt);  // the system message stays first
    BOOST_TEST(lines.back()["type"] == "summary");                      // the turn was answered
    const fs::path sf = dir / ("c-turn" + std::to_string(t) + "-summary.jsonl");
    const bool fired = lines[1]["type"] == "context";
    BOOST_TEST(fs::exists(sf) == fired, sf);  // a summary was written for this turn exactly when one replaced turns
    if (fired) {
      ++summarized;
      const json& ctx = lines[1];
      BOOST_TEST(ctx["policy"] == "prune-turns");
      BOOST_TEST_REQUIRE(ctx.contains("summary"), ctx.dump());
      const std::string text = ctx["summary"]["text"], dropped = ctx["dropped"]["text"];
      BOOST_TEST(ctx["kept"] == lines.front()["prompt_ids"].size());
      BOOST_TEST(ctx["turns"].get<int>() % 2 == 0);  // whole exchanges
      BOOST_TEST(has(dropped, "User: "), dropped);
      BOOST_TEST(!has(dropped, "Be kind."), dropped);
      BOOST_TEST(!has(dropped, "What is my name?"), dropped);  // never the newest user turn (the last one)
      if (current) BOOST_TEST(has(dropped, "Summary: " + *current), dropped);  // the earlier summary is replaced too
      else BOOST_TEST(has(dropped, "My name is Lily."), dropped);
      // the prompt holds the summary where the turns were, and not the turns
      BOOST_TEST(prompt.rfind("System: Be kind.\nSystem: Summary: " + text + "\nUser: ", 0) == 0u, prompt);
      BOOST_TEST(!has(prompt, "My name is Lily."), prompt);
      BOOST_TEST(has(r.err, "glassbox: chat: summarized the oldest "), r.err);
      BOOST_TEST(has(r.err, "positions: \"" + text + "\"\n"), r.err);
      // the summary's own run: greedy, over the documented request and the replaced turns' transcript
      const auto sv = gbtest::run_cli({"trace", "validate", sf.string()});
      BOOST_TEST(sv.rc == 0, sf << ": " << sv.out << sv.err);
      const auto srun = gbtest::read_jsonl(sf);
      const std::string request = srun.front()["prompt"];
      BOOST_TEST(has(request, "Summarize this conversation in one sentence, keeping the names.\n\n"), request);
      if (current) BOOST_TEST(has(request, "Earlier: " + *current + "\n"), request);
      BOOST_TEST(srun.front()["plugins"]["sampler"].size() == 1u);
      BOOST_TEST(srun.front()["plugins"]["sampler"][0]["name"] == "greedy");
      BOOST_TEST(srun.front()["max_tokens"] == 12);
      std::string written = steps_text(srun);
      std::replace(written.begin(), written.end(), '\n', ' ');
      BOOST_TEST(has(written, text), written << " / " << text);
      current = text;
    } else if (current) {
      BOOST_TEST(has(prompt, "System: Summary: " + *current + "\n"), prompt);  // a summary stays until replaced
    }
  }
  BOOST_TEST(summarized >= 1);
  BOOST_TEST(!has(r.err, "dropped the oldest"), r.err);
  fs::remove_all(dir);
}

// The same seed, the same chat: transcript, notices and every trace (the summaries' too) but their timings.
BOOST_AUTO_TEST_CASE(summarize_is_deterministic) {
  std::vector<fs::path> dirs = {gbtest::temp_dir("chat-summarize-a"), gbtest::temp_dir("chat-summarize-b")};
  std::vector<gbtest::CliResult> runs;
  for (const auto& d : dirs) {
    gbtest::write_file(d / "turns.txt", kLongTurns);
    runs.push_back(gbtest::run_cli(summarize_args(d)));
    BOOST_TEST_REQUIRE(runs.back().rc == 0, runs.back().err);
  }
  BOOST_TEST(runs[0].out == runs[1].out);
  std::string err1 = runs[1].err;
  for (std::size_t at; (at = err1.find(dirs[1].string())) != std::string::npos;) err1.replace(at, dirs[1].string().size(), dirs[0].string());
  BOOST_TEST(runs[0].err == err1);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dirs[0])) {
    if (e.path().extension() != ".jsonl") continue;
    ++files;
    BOOST_TEST_REQUIRE(fs::exists(dirs[1] / e.path().filename()), e.path().filename());
    BOOST_TEST(untimed(e.path()) == untimed(dirs[1] / e.path().filename()), e.path().filename());
  }
  BOOST_TEST(files >= 5);  // four turns and at least one summary
  for (const auto& d : dirs) fs::remove_all(d);
}

// Misuse: one line naming the option or value, exit 2, never a crash.
BOOST_DATA_TEST_CASE(summarize_misuse_is_one_clear_error,
                     bdata::make(std::vector<std::vector<std::string>>{
                         {"--summary-model", "x.bin"},
                         {"--summary-tokens", "4"},
                         {"--context-policy", "summarize", "--summary-tokenizer", "tok.bin"},
                         {"--context-policy", "summarize", "--summary-model", "no-such-model.bin"},
                         {"--context-policy", "summarize", "--summary-model", "@TOY", "--summary-tokenizer", "no-such-tok.bin"},
                         {"--context-policy", "summarize:3"},
                         {"--context-policy", "summarise"},
                         {"--context-policy", "summarize", "--context", "40", "--summary-tokens", "8"},
                         {"--context-policy", "summarize", "--context", "48", "--summary-tokens", "100"}}) ^
                         bdata::make({"--summary-model x.bin: only --context-policy summarize writes a summary (the policy is stop)",
                                      "--summary-tokens 4: only --context-policy summarize writes a summary",
                                      "--summary-tokenizer tok.bin: it is --summary-model's tokenizer, and no --summary-model is given",
                                      "--summary-model no-such-model.bin: no such file",
                                      "--summary-tokenizer no-such-tok.bin: no such file",
                                      "--context-policy: context policy 'summarize:3': summarize takes no value",
                                      "(expected refuse, stop, truncate-left or shift[:n_keep]); chat also takes summarize",
                                      "chat turn 2: --context-policy summarize: with every older turn summarized (",
                                      "chat turn 2: --context-policy summarize: the summary request is "}),
                     extra, message) {
  const fs::path dir = gbtest::temp_dir("chat-summarize-bad");
  gbtest::write_file(dir / "turns.txt", kTurns);
  std::vector<std::string> a = {"chat", "--input", (dir / "turns.txt").string(), "--seed", "1", "--max-tokens", "6"};
  for (const auto& x : extra) a.push_back(x == "@TOY" ? toy("toy.bin") : x);
  const auto r = gbtest::run_cli(a);
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(has(r.err, "glassbox: error: "), r.err);
  BOOST_TEST(has(r.err, message), r.err);
  const auto at = r.err.find("glassbox: error: ");
  BOOST_TEST((at != std::string::npos && r.err.find('\n', at) == r.err.size() - 1), r.err);  // one line, the last
  fs::remove_all(dir);
}

// docs/attention.md's amnesia demo at --context 96 summarizes two exchanges; their request leaves the toy's
// 128 positions less than the default 32 tokens of summary, and the default gives way (a given
// --summary-tokens does not: the misuse case above).
BOOST_AUTO_TEST_CASE(default_summary_tokens_give_way_to_the_summary_models_context) {
  const fs::path dir = gbtest::temp_dir("chat-summarize-room");
  gbtest::write_file(dir / "turns.txt", "My name is Zoe.\nHow are you?\nWhere should we go?\nWhat is my name?\n");
  const auto r = gbtest::run_cli({"chat", "--input", (dir / "turns.txt").string(), "--sampler", "greedy", "--max-tokens", "12",
                                  "--context", "96", "--context-policy", "summarize"});
  BOOST_TEST(r.rc == 0, r.err);
  BOOST_TEST(has(r.err, "glassbox: chat: summarized the oldest 2 exchanges ("), r.err);
  const auto given = gbtest::run_cli({"chat", "--input", (dir / "turns.txt").string(), "--sampler", "greedy", "--max-tokens", "12",
                                      "--context", "96", "--context-policy", "summarize", "--summary-tokens", "32"});
  BOOST_TEST(given.rc == 2, given.err);
  BOOST_TEST(has(given.err, "with a summary of up to 32 (--summary-tokens) it does not fit the summary model's 128 positions"), given.err);
  fs::remove_all(dir);
}

// Only chat has exchanges to summarize: run refuses the policy.
BOOST_AUTO_TEST_CASE(run_refuses_summarize) {
  const auto r = gbtest::run_cli({"run", "--prompt", "Hi", "--context-policy", "summarize"});
  BOOST_TEST(r.rc == 2, r.err);
  BOOST_TEST(has(r.err, "--context-policy summarize replaces a chat's oldest exchanges with a summary: only chat has exchanges"), r.err);
}

// The summary model need not share the chat model's vocabulary: its text is encoded again in the chat.
// The toy model's chat, summarized by stories260K (512 tokens, its own tokenizer file).
BOOST_AUTO_TEST_CASE(a_summary_model_with_another_vocabulary) {
  if (!gbtest::shared_dir()) {
    BOOST_TEST_MESSAGE("a_summary_model_with_another_vocabulary: skipped, ../shared is absent");
    return;
  }
  const fs::path dir = gbtest::temp_dir("chat-summary-model");
  gbtest::write_file(dir / "turns.txt", kTurns);
  const std::string model = gbtest::shared("models/stories260K.bin").string(), tokenizer = gbtest::shared("models/tok512.bin").string();
  const auto r = gbtest::run_cli({"chat", "--input", (dir / "turns.txt").string(), "--seed", "1", "--max-tokens", "6", "--context", "48",
                                  "--context-policy", "summarize", "--summary-tokens", "8", "--summary-model", model,
                                  "--summary-tokenizer", tokenizer, "--trace", (dir / "c.jsonl").string()});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto srun = gbtest::read_jsonl(dir / "c-turn2-summary.jsonl");
  BOOST_TEST(srun.front()["model"]["config"]["vocab_size"] == 512);
  BOOST_TEST(srun.front()["tokenizer"]["path"] == tokenizer);
  const auto turn = gbtest::read_jsonl(dir / "c-turn2.jsonl");
  BOOST_TEST(turn.front()["model"]["config"]["vocab_size"] == 1024);  // the chat's own model answers
  const std::string text = turn.at(1)["summary"]["text"];
  BOOST_TEST(has(turn.front()["prompt"].get<std::string>(), "Summary: " + text + "\n"));
  BOOST_TEST(has(turn.at(1)["detail"].get<std::string>(), "--summary-model " + model + " wrote"));
  fs::remove_all(dir);
}
