// `glassbox serve` end to end: the binary on an ephemeral loopback port, spoken to with cpp-httplib's client;
// its answers checked against `glassbox run` (content, logprobs, traces), under load, and against hostile requests.
#define BOOST_TEST_MODULE serve
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include <httplib.h>

#include "browser.hpp"
#include "support.hpp"

extern char** environ;

namespace fs = std::filesystem;
using nlohmann::json;
using gbtest::run_cli;

namespace {

// A `glassbox serve` process on a port of its choosing; stopped (SIGTERM) by the destructor.
class ServerProcess {
 public:
  // `with_model`: stories260K's --model and --tokenizer first (else `extra` or the default says which).
  explicit ServerProcess(std::vector<std::string> extra, bool with_model = true) {
    dir_ = gbtest::temp_dir("serve");
    std::vector<std::string> args = {GLASSBOX_BIN, "serve"};
    if (with_model)
      for (auto& a : gbtest::stories_args()) args.push_back(a);
    for (auto& a : {"--port", "0", "--threads", "1"}) args.push_back(a);
    for (auto& a : extra) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, (dir_ / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&pid_, GLASSBOX_BIN, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    BOOST_TEST_REQUIRE(rc == 0);
    // "glassbox serve: listening on http://127.0.0.1:PORT", then "ready" once the model is loaded.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      const std::string err = stderr_text();
      // (Only once the line is whole: read between two writes, "...127.0.0.1:" alone made stoi throw, and the
      // server this constructor had started was left running, holding ctest's output pipe open.)
      if (auto at = err.find("listening on http://127.0.0.1:"); at != std::string::npos && port_ == 0 && err.find('\n', at) != std::string::npos)
        port_ = std::stoi(err.substr(at + 30));
      if (err.find("ready:") != std::string::npos) break;
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        BOOST_FAIL("glassbox serve exited: " << err);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    BOOST_TEST_REQUIRE(port_ > 0, "no port announced: " << stderr_text());
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      wait_exit();
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(static_cast<time_t>(60 * gbtest::kTimeScale));  // a hostile grammar under ASan on a busy machine
    return c;
  }
  std::string stderr_text() const { return gbtest::read_file(dir_ / "err"); }
  // SIGTERM, then the exit status (-1 if it had not exited within 20 s).
  int stop() {
    kill(pid_, SIGTERM);
    return wait_exit();
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  int wait_exit() {
    for (int i = 0; i < 2000; ++i) {
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }
  fs::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

json post(httplib::Client& c, const std::string& path, const json& body, int expect = 200) {
  auto r = c.Post(path, body.dump(), "application/json");
  BOOST_TEST_REQUIRE(static_cast<bool>(r), path << ": no response (" << httplib::to_string(r.error()) << ")");
  BOOST_TEST(r->status == expect, path << " " << body.dump().substr(0, 200) << ": status " << r->status << ": " << r->body);
  return json::parse(r->body);
}

// The `data: ` events of an SSE body, in order ("[DONE]" kept as a string).
std::vector<json> sse_events(const std::string& body) {
  std::vector<json> out;
  std::size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const auto end = body.find("\n\n", at);
    const std::string d = body.substr(at + 6, end - at - 6);
    out.push_back(d == "[DONE]" ? json("[DONE]") : json::parse(d));
    at = end;
  }
  return out;
}

std::vector<std::string> run_args(std::vector<std::string> more) {
  std::vector<std::string> a = {"run"};
  for (auto& x : gbtest::stories_args()) a.push_back(x);
  a.push_back("--threads");
  a.push_back("1");
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// A trace with what legitimately differs between two runs of the same computation removed: timings,
// and the file-system paths of the model (the same file either way).
json comparable(json line) {
  for (const char* k : {"ms", "ttft_ms", "prefill_tok_s", "decode_tok_s", "wall_ms", "created", "time"}) line.erase(k);
  if (line.contains("summary")) {
    for (const char* k : {"ttft_ms", "prefill_tok_s", "decode_tok_s"}) line["summary"].erase(k);
  }
  return line;
}

void check_healthy(httplib::Client& c) {
  auto h = c.Get("/health");
  BOOST_TEST_REQUIRE(static_cast<bool>(h));
  BOOST_TEST(h->status == 200);
  BOOST_TEST(h->body == R"({"status":"ok"})");
}

}  // namespace

// `glassbox run` ends its stdout's last line (the shell prompt must not run into the text); the served text is
// the continuation alone: equal when that newline is put back.
std::string as_run_prints(std::string text) {
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text;
}

BOOST_AUTO_TEST_SUITE(serve, *boost::unit_test::precondition(gbtest::NeedsShared{}))

BOOST_AUTO_TEST_CASE(greedy_content_logprobs_and_trace_equal_glassbox_run) {
  ServerProcess s({});
  auto c = s.client();
  check_healthy(c);
  const std::string prompt = "Once upon a time";
  const json j = post(c, "/completion", {{"prompt", prompt}, {"n_predict", 24}, {"temperature", 0}, {"n_probs", 5}});
  const auto cli = run_cli(run_args({"--sampler", "greedy", "-n", "24", "--prompt", prompt}));
  BOOST_TEST_REQUIRE(cli.rc == 0, cli.err);
  BOOST_TEST(as_run_prints(j["content"].get<std::string>()) == cli.out);
  BOOST_TEST(j["stop_type"] == "limit");
  BOOST_TEST(j["tokens_predicted"] == 24);
  BOOST_TEST(j["glassbox"]["sampler"] == "greedy");

  // n_probs equal run --json's top_logprobs, id by id, logprob by logprob.
  const auto js = run_cli(run_args({"--sampler", "greedy", "-n", "24", "--prompt", prompt, "--json", "--top-logprobs", "5"}));
  BOOST_TEST_REQUIRE(js.rc == 0, js.err);
  std::vector<json> lines;
  std::istringstream in(js.out);
  for (std::string l; std::getline(in, l);)
    if (auto x = json::parse(l); x["type"] == "token" && !x.value("stop", false)) lines.push_back(x);
  const auto& entries = j["completion_probabilities"];
  BOOST_TEST_REQUIRE(entries.size() == lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    BOOST_TEST(entries[i]["id"] == lines[i]["id"]);
    BOOST_TEST(entries[i]["bytes"] == lines[i]["bytes"]);
    BOOST_TEST(std::abs(entries[i]["logprob"].get<double>() - lines[i]["logprob"].get<double>()) < 1e-6);
    BOOST_TEST_REQUIRE(entries[i]["top_logprobs"].size() == 5u);
    for (std::size_t k = 0; k < 5; ++k) {
      BOOST_TEST(entries[i]["top_logprobs"][k]["id"] == lines[i]["top_logprobs"][k]["id"]);
      BOOST_TEST(std::abs(entries[i]["top_logprobs"][k]["logprob"].get<double>() - lines[i]["top_logprobs"][k]["logprob"].get<double>()) < 1e-6);
    }
  }

  // The same request's trace equals run --trace's, timings apart.
  const fs::path dir = gbtest::temp_dir("serve-trace");
  const auto traced = run_cli(run_args({"--sampler", "greedy", "-n", "24", "--prompt", prompt, "--seed", "7", "--trace", (dir / "t.jsonl").string()}));
  BOOST_TEST_REQUIRE(traced.rc == 0, traced.err);
  const json k = post(c, "/completion", {{"prompt", prompt}, {"n_predict", 24}, {"sampler", "greedy"}, {"seed", 7}});
  auto t = c.Get(k["glassbox"]["trace_url"].get<std::string>());
  BOOST_TEST_REQUIRE(static_cast<bool>(t));
  BOOST_TEST_REQUIRE(t->status == 200);
  gbtest::write_file(dir / "served.jsonl", t->body);
  const auto a = gbtest::read_jsonl(dir / "t.jsonl"), b = gbtest::read_jsonl(dir / "served.jsonl");
  BOOST_TEST_REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) BOOST_TEST(comparable(a[i]) == comparable(b[i]), "line " << i << "\n" << a[i].dump().substr(0, 600) << "\n" << b[i].dump().substr(0, 600));
  BOOST_TEST(b.front()["schema"] == "glassbox.trace/2");  // the version glassbox writes (docs/trace-format.md, Versions)
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(streams_join_to_the_whole_and_openai_shapes) {
  ServerProcess s({});
  auto c = s.client();
  const json body = {{"prompt", "The little bird"}, {"n_predict", 20}, {"temperature", 0.8}, {"seed", 42}, {"n_probs", 3}};
  const json whole = post(c, "/completion", body);
  json sb = body;
  sb["stream"] = true;
  auto r = c.Post("/completion", sb.dump(), "application/json");
  BOOST_TEST_REQUIRE(static_cast<bool>(r));
  BOOST_TEST(r->get_header_value("Content-Type").find("text/event-stream") == 0);
  const auto events = sse_events(r->body);
  BOOST_TEST_REQUIRE(events.size() >= 2u);
  std::string joined;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    joined += events[i]["content"].get<std::string>();
    BOOST_TEST(events[i]["stop"] == false);
    BOOST_TEST(events[i]["completion_probabilities"].size() == 1u);
  }
  BOOST_TEST(joined == whole["content"].get<std::string>());
  BOOST_TEST(events.back()["stop"] == true);
  BOOST_TEST(events.back()["glassbox"]["seed"] == 42);
  BOOST_TEST(events.back()["glassbox"]["trace_url"].get<std::string>().rfind("/traces/", 0) == 0);

  // OpenAI: /v1/completions, streamed, ends with [DONE]; joined text equals the non-streamed one.
  const json oa = {{"prompt", "The little bird"}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 2}};
  const json one = post(c, "/v1/completions", oa);
  BOOST_TEST(one["object"] == "text_completion");
  BOOST_TEST(one["choices"][0]["logprobs"]["content"].size() == 12u);
  BOOST_TEST(one["usage"]["completion_tokens"] == 12);
  json os = oa;
  os["stream"] = true;
  auto rs = c.Post("/v1/completions", os.dump(), "application/json");
  BOOST_TEST_REQUIRE(static_cast<bool>(rs));
  const auto ev = sse_events(rs->body);
  BOOST_TEST_REQUIRE(ev.size() >= 3u);
  BOOST_TEST(ev.back() == json("[DONE]"));
  std::string text;
  for (std::size_t i = 0; i + 2 < ev.size(); ++i) text += ev[i]["choices"][0]["text"].get<std::string>();
  BOOST_TEST(text == one["choices"][0]["text"].get<std::string>());
  BOOST_TEST(ev[ev.size() - 2]["choices"][0]["finish_reason"] == "length");

  // Chat: the model's template (stories260K has none: "User: …\nAssistant:"), streamed with [DONE].
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story about a cat."}}}}, {"max_tokens", 10},
                     {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}};
  const json cj = post(c, "/v1/chat/completions", chat);
  BOOST_TEST(cj["object"] == "chat.completion");
  BOOST_TEST(cj["choices"][0]["message"]["role"] == "assistant");
  json cs = chat;
  cs["stream"] = true;
  auto rc = c.Post("/v1/chat/completions", cs.dump(), "application/json");
  BOOST_TEST_REQUIRE(static_cast<bool>(rc));
  const auto cev = sse_events(rc->body);
  BOOST_TEST_REQUIRE(cev.size() >= 3u);
  BOOST_TEST(cev.back() == json("[DONE]"));
  std::string reply;
  for (std::size_t i = 0; i + 2 < cev.size(); ++i) reply += cev[i]["choices"][0]["delta"]["content"].get<std::string>();
  BOOST_TEST(reply == cj["choices"][0]["message"]["content"].get<std::string>());

  // Tokenizer endpoints, as llama.cpp's server answers them (captures in ../shared).
  const auto cap = [](const std::string& stem) {
    return json::parse(gbtest::read_file(gbtest::shared("golden/engines/llamacpp-server/" + stem + ".response.json")));
  };
  const auto req = [](const std::string& stem) {
    return json::parse(gbtest::read_file(gbtest::shared("golden/engines/llamacpp-server/" + stem + ".request.json")))["request_body"];
  };
  for (const std::string stem : {"tokenize-P1-pieces", "tokenize-nonascii-pieces", "tokenize-P1-plain"})
    BOOST_TEST(post(c, "/tokenize", req(stem)) == cap(stem), stem);
  for (const std::string stem : {"detokenize-P1-bos", "detokenize-greedy-P1", "detokenize-nonascii"})
    BOOST_TEST(post(c, "/detokenize", req(stem)) == cap(stem), stem);
  auto m = c.Get("/v1/models");
  BOOST_TEST_REQUIRE(static_cast<bool>(m));
  BOOST_TEST(json::parse(m->body)["data"][0]["id"] == "stories260K.bin");
  auto met = c.Get("/metrics");
  BOOST_TEST_REQUIRE(static_cast<bool>(met));
  BOOST_TEST(met->body.find("glassbox:tokens_predicted_total") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(sixteen_concurrent_seeded_requests_equal_glassbox_run) {
  ServerProcess s({"--parallel", "4"});
  const std::vector<std::string> prompts = {"Once upon a time", "The little bird", "Lily wanted to", "One day"};
  std::vector<std::future<std::string>> got;
  for (int i = 0; i < 16; ++i)
    got.push_back(std::async(std::launch::async, [&, i] {
      auto c = s.client();
      const json body = {{"prompt", prompts[i % 4]}, {"n_predict", 40}, {"seed", 1000 + i}, {"stream", i % 2 == 1}};
      auto r = c.Post("/completion", body.dump(), "application/json");
      if (!r) return "<failed: " + httplib::to_string(r.error()) + ">";
      if (r->status != 200) return "<failed: " + std::to_string(r->status) + " " + r->body + ">";
      if (i % 2 == 0) return json::parse(r->body)["content"].get<std::string>();
      std::string text;
      for (const auto& e : sse_events(r->body)) text += e["content"].get<std::string>();
      return text;
    }));
  for (int i = 0; i < 16; ++i) {
    const std::string served = got[i].get();
    // The server's default fields are glassbox's default chain (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8).
    const auto cli = run_cli(run_args({"-n", "40", "--seed", std::to_string(1000 + i), "--prompt", prompts[i % 4]}));
    BOOST_TEST_REQUIRE(cli.rc == 0, cli.err);
    BOOST_TEST(as_run_prints(served) == cli.out, "request " << i << "\nserved: " << served << "\nrun:    " << cli.out);
  }
  auto c = s.client();
  check_healthy(c);
  // The four slots decoded in shared passes (continuous batching): more than one token per pass on average.
  auto m = c.Get("/metrics");
  BOOST_TEST_REQUIRE(static_cast<bool>(m));
  auto value = [&](const std::string& name) {
    const auto at = m->body.find("\nglassbox:" + name + " ");
    BOOST_TEST_REQUIRE(at != std::string::npos, name);
    return std::stod(m->body.substr(at + name.size() + 11));
  };
  const double passes = value("batch_passes_total"), rows = value("batch_rows_total");
  BOOST_TEST(passes > 0);
  BOOST_TEST(rows / passes > 1.5, "mean batch " << rows / passes);
}

// A batched slot's trace is `glassbox run`'s, line for line (timings aside), with full logits: the batch
// changes when a step runs, never what it computes. With --no-batch, nothing is batched.
BOOST_AUTO_TEST_CASE(batched_slots_trace_as_glassbox_run) {
  for (const bool batched : {true, false}) {
    int batched_steps = 0;  // steps whose trace says they ran in a pass of several
    int reused = 0;         // prefills that copied a shared prefix's K/V (prompts 0 and 2 begin alike)
    ServerProcess s(batched ? std::vector<std::string>{"--parallel", "3"} : std::vector<std::string>{"--parallel", "3", "--no-batch"});
    const std::vector<std::string> prompts = {"Once upon a time", "The little bird", "Once upon a time there was a"};
    std::vector<std::future<json>> got;
    for (int i = 0; i < 3; ++i)
      got.push_back(std::async(std::launch::async, [&, i] {
        auto c = s.client();
        json body = {{"prompt", prompts[i]}, {"n_predict", 20 + 7 * i}, {"seed", 50 + i}, {"stream", i == 1},
                     {"trace", "full"}};
        if (i == 1) body["glassbox"] = {{"steps", true}};  // the page's view: each chunk's step says its batch
        auto r = c.Post("/completion", body.dump(), "application/json");
        if (!r || r->status != 200) return json{{"failed", r ? r->body : httplib::to_string(r.error())}};
        if (i != 1) return json::parse(r->body);
        const auto events = sse_events(r->body);
        json last = events.back();
        last["batch_per_step"] = json::array();  // each streamed step's `batch` (0: alone)
        for (const auto& e : events)
          if (e.contains("glassbox") && e["glassbox"].contains("step")) last["batch_per_step"].push_back(e["glassbox"]["step"].value("batch", 0));
        return last;
      }));
    for (int i = 0; i < 3; ++i) {
      const json served = got[i].get();
      BOOST_TEST_REQUIRE(!served.contains("failed"), served.dump());
      auto c = s.client();
      auto t = c.Get(served["glassbox"]["trace_url"].get<std::string>());
      BOOST_TEST_REQUIRE(static_cast<bool>(t));
      BOOST_TEST_REQUIRE(t->status == 200);
      const auto dir = gbtest::temp_dir("serve-batch");
      const auto cli = run_cli(run_args({"-n", std::to_string(20 + 7 * i), "--seed", std::to_string(50 + i), "--prompt", prompts[i],
                                         "--trace-level", "full", "--trace", (dir / "t.jsonl").string()}));
      BOOST_TEST_REQUIRE(cli.rc == 0, cli.err);
      std::istringstream a(t->body);
      std::ifstream b(dir / "t.jsonl");
      std::string la, lb;
      int n = 0;
      json trace_batch = json::array();  // each step's `batch` in the served trace (0: alone)
      while (std::getline(a, la)) {
        BOOST_TEST_REQUIRE(static_cast<bool>(std::getline(b, lb)), "request " << i << ": the run's trace ends at line " << n);
        json ja = comparable(json::parse(la)), jb = comparable(json::parse(lb));
        if (ja.contains("phase")) trace_batch.push_back(ja.value("batch", 0));  // a step line
        if (batched && ja.contains("batch")) ++batched_steps;
        ja.erase("batch");  // the served step's pass (additive: absent when it ran alone)
        if (ja.contains("prefix_reused")) {  // the prefill copied the first positions' K/V: less attention done
          ++reused;
          ja.erase("prefix_reused");
          ja.erase("attention_dots");
          jb.erase("attention_dots");
        }
        if (ja.value("type", "") == "header") {  // where the model was named (the same file) and the trace's own name
          for (auto* j : {&ja, &jb}) {
            j->erase("model");
            j->erase("tokenizer");
            j->erase("plugins");
          }
        }
        BOOST_TEST(ja == jb, (batched ? "batched" : "--no-batch") << " request " << i << " line " << n << "\nserved: " << la.substr(0, 400)
                                                                  << "\nrun:    " << lb.substr(0, 400));
        ++n;
      }
      BOOST_TEST(!std::getline(b, lb), "the run's trace is longer");
      // the streamed steps say the batch their trace records (the class-room page shows it)
      if (i == 1) BOOST_TEST(served["batch_per_step"] == trace_batch, served["batch_per_step"].dump() << "\n" << trace_batch.dump());
      if (!batched) BOOST_TEST(batched_steps == 0);
      BOOST_TEST(n >= 10);
    }
    auto m = s.client().Get("/metrics");
    BOOST_TEST_REQUIRE(static_cast<bool>(m));
    BOOST_TEST((m->body.find("glassbox:batch_passes_total 0\n") == std::string::npos) == batched, m->body);
    BOOST_TEST((m->body.find("glassbox:prefix_cache_hits_total 0\n") == std::string::npos) == batched, m->body);
    if (batched) BOOST_TEST(batched_steps > 0);
    BOOST_TEST((reused == 1) == batched, reused << " prefills reused a prefix");
  }
}

// Beam search (glassbox.beam_width) and speculative decoding (--draft-model) in serve (#40): each request's
// trace is `glassbox run --beam-width` / `run --draft-model`'s with the same prompt, chain and seed, beside the
// batch; a chain a draft cannot serve decodes plainly and says so; sampling fields with beams are refused.
BOOST_AUTO_TEST_CASE(beams_and_drafts_trace_as_glassbox_run) {
  const std::string draft = gbtest::shared("models/stories260K.bin").string();  // its own draft: every proposal accepted
  ServerProcess s({"--parallel", "2", "--draft-model", draft, "--draft-tokens", "3"});
  struct Case {
    json body;
    std::vector<std::string> run;  // run's options for the same computation
  };
  const std::vector<Case> cases = {
      {{{"prompt", "Once upon a time"}, {"n_predict", 16}, {"glassbox", {{"beam_width", 3}, {"length_penalty", 0.5}}}},
       {"--beam-width", "3", "--length-penalty", "0.5", "-n", "16", "--prompt", "Once upon a time"}},
      {{{"prompt", "The little bird"}, {"n_predict", 16}, {"seed", 7}, {"temperature", 0.9}, {"top_k", 20}, {"top_p", 1}, {"min_p", 0}},
       {"--draft-model", draft, "--draft-tokens", "3", "-n", "16", "--seed", "7", "--prompt", "The little bird", "--sampler",
        "top-k:20,temperature:0.9"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto c = s.client();
    const json served = post(c, "/completion", cases[i].body);
    auto t = c.Get(served["glassbox"]["trace_url"].get<std::string>());
    BOOST_TEST_REQUIRE(static_cast<bool>(t));
    BOOST_TEST_REQUIRE(t->status == 200);
    const auto dir = gbtest::temp_dir("serve-strategy");
    std::vector<std::string> more = cases[i].run;
    more.insert(more.end(), {"--trace", (dir / "t.jsonl").string()});
    const auto cli = run_cli(run_args(more));
    BOOST_TEST_REQUIRE(cli.rc == 0, cli.err);
    BOOST_TEST(served["content"].get<std::string>() + "\n" == cli.out, "case " << i);
    std::istringstream a(t->body);
    std::ifstream b(dir / "t.jsonl");
    std::string la, lb;
    int n = 0, beams = 0, rounds = 0;
    while (std::getline(a, la)) {
      BOOST_TEST_REQUIRE(static_cast<bool>(std::getline(b, lb)), "case " << i << ": the run's trace ends at line " << n);
      json ja = comparable(json::parse(la)), jb = comparable(json::parse(lb));
      if (ja.value("type", "") == "header") {
        if (cases[i].body.contains("seed")) BOOST_TEST(ja.value("seed", 0ULL) == jb.value("seed", 0ULL));  // (a search draws nothing)
        for (auto* j : {&ja, &jb})
          for (const char* k : {"model", "tokenizer", "plugins", "seed", "threads"}) j->erase(k);
        if (ja.contains("speculative")) {  // the same draft, named by the server's path and by run's
          BOOST_TEST(ja["speculative"]["k"] == jb["speculative"]["k"]);
          ja.erase("speculative");
          jb.erase("speculative");
        }
      }
      if (ja.contains("beams")) ++beams;
      if (ja.contains("speculative")) ++rounds;
      BOOST_TEST(ja == jb, "case " << i << " line " << n << "\nserved: " << la.substr(0, 400) << "\nrun:    " << lb.substr(0, 400));
      ++n;
    }
    BOOST_TEST(!std::getline(b, lb), "case " << i << ": the run's trace is longer");
    BOOST_TEST(n >= 5);
    BOOST_TEST((i == 0 ? beams : rounds) > 0, "case " << i << ": its steps record no " << (i == 0 ? "beams" : "rounds"));
  }
  auto c = s.client();
  // mirostat adapts its own state to each draw: no fixed distribution to speculate with; the request decodes alone.
  const json miro = post(c, "/completion", {{"prompt", "Once"}, {"n_predict", 4}, {"mirostat", 2}});
  BOOST_TEST_REQUIRE(miro["glassbox"].contains("warnings"), miro.dump());
  BOOST_TEST(miro["glassbox"]["warnings"].dump().find("speculative decoding not used") != std::string::npos, miro.dump());
  // With beams the chain does not apply: a sampling field is refused, naming it, not ignored.
  const json refused = post(c, "/completion", {{"prompt", "Once"}, {"temperature", 0.7}, {"glassbox", {{"beam_width", 2}}}}, 400);
  BOOST_TEST(refused.dump().find("'temperature' sets the sampler chain") != std::string::npos, refused.dump());
  const json lp = post(c, "/completion", {{"prompt", "Once"}, {"glassbox", {{"length_penalty", 2}}}}, 400);
  BOOST_TEST(lp.dump().find("beam search only") != std::string::npos, lp.dump());
}

BOOST_AUTO_TEST_CASE(queue_bound_disconnect_and_sigterm) {
  // One slot, one place in the queue, 40 ms per streamed token: a long request holds the slot for seconds.
  const fs::path traces = gbtest::temp_dir("serve-traces");
  ServerProcess s({"--parallel", "1", "--queue", "1", "--pace", "40", "--trace-dir", traces.string()});
  std::atomic<int> chunks{0};
  std::atomic<bool> hang_up{false};
  auto a = std::async(std::launch::async, [&] {
    auto c = s.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/completion";
    req.body = json{{"prompt", "Once upon a time"}, {"n_predict", 300}, {"stream", true}, {"ignore_eos", true}}.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      ++chunks;
      return !hang_up.load();  // false: the client closes the connection mid-stream
    };
    return c.send(req);
  });
  while (chunks < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // B waits in the queue; C finds the queue full.
  auto b = std::async(std::launch::async, [&] {
    auto c = s.client();
    return c.Post("/completion", json{{"prompt", "One day"}, {"n_predict", 3}}.dump(), "application/json");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  {
    auto c = s.client();
    const json busy = post(c, "/completion", {{"prompt", "Hi"}, {"n_predict", 3}}, 503);
    BOOST_TEST(busy["error"]["type"] == "unavailable_error");
    check_healthy(c);
  }
  // A hangs up: its slot frees and B proceeds long before A's 300 paced tokens (12 s) would have ended.
  const auto t0 = std::chrono::steady_clock::now();
  hang_up = true;
  auto rb = b.get();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_REQUIRE(static_cast<bool>(rb));
  BOOST_TEST(rb->status == 200);
  BOOST_TEST(waited < 5.0 * gbtest::kTimeScale);
  a.get();

  // SIGTERM with a request in flight: exit 0, and that request's trace ends in an interrupted line.
  auto d = std::async(std::launch::async, [&] {
    auto c = s.client();
    return c.Post("/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 300}, {"ignore_eos", true}}.dump(), "application/json");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  BOOST_TEST(s.stop() == 0, s.stderr_text());
  d.get();
  BOOST_TEST(s.stderr_text().find("stopped by SIGTERM") != std::string::npos, s.stderr_text());
  // Four requests, four traces: B's and the 503-free ones complete, A's ends where the client hung up,
  // D's where SIGTERM came.
  std::map<std::string, int> ends;
  for (const auto& f : fs::directory_iterator(traces)) {
    const auto lines = gbtest::read_jsonl(f.path());
    BOOST_TEST_REQUIRE(!lines.empty());
    ends[lines.back()["type"].get<std::string>()]++;
  }
  BOOST_TEST(ends["summary"] == 1);
  BOOST_TEST(ends["error"] == 1);
  BOOST_TEST(ends["interrupted"] == 1);
  fs::remove_all(traces);
}

// A grammar whose every step walks 240,000 alternatives (gbtest::kLongGrammarAlternatives: about half a second a
// step here; a tenth as many under the sanitizers, which keeps a step within the 5 s walk limit).
static std::string huge_grammar() {
  std::string g = "root ::= w (\" \" w)*\nw ::= \"w0\"";
  for (int i = 1; i < gbtest::kLongGrammarAlternatives; ++i) g += " | \"w" + std::to_string(i) + "\"";
  return g;
}

// SIGTERM while a request is inside long grammar walks: the server stops within seconds, and the request is
// cancelled by the shutdown as one between steps is: a 503 "the server is stopping", its trace closed by an
// interrupted line (before: a 400 blaming the request's grammar, "grammar: the walk was interrupted by
// SIGTERM", and an error line).
BOOST_AUTO_TEST_CASE(sigterm_during_a_grammar_walk_stops_the_server_and_cancels_the_request) {
  const fs::path traces = gbtest::temp_dir("serve-grammar-sigterm");
  ServerProcess s({"--trace-dir", traces.string(), "--max-body", "8000000"});
  const std::string g = huge_grammar();
  auto r = std::async(std::launch::async, [&] {
    auto c = s.client();
    return c.Post("/completion", json{{"prompt", "Hi"}, {"n_predict", 60}, {"ignore_eos", true}, {"grammar", g}}.dump(), "application/json");
  });
  auto writing = [&] {
    for (const auto& e : fs::directory_iterator(traces))
      if (e.is_regular_file() && e.file_size() > 0) return true;
    return false;
  };
  // The trace's first lines come once the chain is built (the grammar's first walk): wait for them, so the
  // signal lands in a step's walk (the case below sends it earlier).
  for (int i = 0; i < 3000 * gbtest::kTimeScale && !writing(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  BOOST_TEST_REQUIRE(writing(), "no trace was started: " << s.stderr_text());
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // a moment into a step's walk
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST(s.stop() == 0, s.stderr_text());
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST(waited < 5.0 * gbtest::kTimeScale);
  const auto res = r.get();
  BOOST_TEST_REQUIRE(static_cast<bool>(res));
  BOOST_TEST(res->status == 503, res->body);
  BOOST_TEST(res->body.find("the server is stopping (SIGTERM)") != std::string::npos, res->body);
  int files = 0;
  for (const auto& f : fs::directory_iterator(traces)) {
    const auto lines = gbtest::read_jsonl(f.path());
    BOOST_TEST_REQUIRE(!lines.empty());
    BOOST_TEST(lines.back()["type"] == "interrupted", f.path());
    ++files;
  }
  BOOST_TEST(files == 1);
  fs::remove_all(traces);
}

// The same signal earlier: while the body is read, while the chain is checked, or while it is built (building
// walks the grammar's first step). Whatever the moment, the answer is a 503 "the server is stopping" — or no
// answer, when the server stopped before the request was read — never a 400 blaming the grammar (CI's
// sanitizer run once saw that: the signal came while the chain was built), and a trace, if one was started,
// ends in an interrupted line.
BOOST_AUTO_TEST_CASE(sigterm_before_the_first_step_is_a_503_too) {
  const std::string body = json{{"prompt", "Hi"}, {"n_predict", 60}, {"ignore_eos", true}, {"grammar", huge_grammar()}}.dump();
  for (const int delay_ms : {100, 250, 400}) {
    BOOST_TEST_CONTEXT("SIGTERM " << delay_ms << " ms after the request") {
      const fs::path traces = gbtest::temp_dir("serve-grammar-sigterm-early");
      ServerProcess s({"--trace-dir", traces.string(), "--max-body", "8000000"});
      auto r = std::async(std::launch::async, [&] { return s.client().Post("/completion", body, "application/json"); });
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(delay_ms * gbtest::kTimeScale)));
      BOOST_TEST(s.stop() == 0, s.stderr_text());
      if (const auto res = r.get()) {
        BOOST_TEST(res->status == 503, res->body);
        BOOST_TEST(res->body.find("the server is stopping") != std::string::npos, res->body);
      }
      for (const auto& f : fs::directory_iterator(traces)) {
        const auto lines = gbtest::read_jsonl(f.path());
        if (!lines.empty()) BOOST_TEST(lines.back()["type"] == "interrupted", f.path());
      }
      fs::remove_all(traces);
    }
  }
}

// serve takes the options it shares with run from the one option table: a --config file sets them (and a key
// serve does not take is named, not silently dropped), and without --model it serves the embedded toy, as run.
BOOST_AUTO_TEST_CASE(config_file_and_the_default_model_as_run) {
  const fs::path dir = gbtest::temp_dir("serve-config");
  gbtest::write_file(dir / "class.yaml", "model: " + gbtest::shared("models/stories260K.bin").string() + "\ntokenizer: " +
                                             gbtest::shared("models/tok512.bin").string() + "\ncontext: 48\nprompt: unused\n");
  {
    ServerProcess s({"--config", (dir / "class.yaml").string()}, false);
    auto c = s.client();
    const auto m = c.Get("/v1/models");
    BOOST_TEST_REQUIRE(static_cast<bool>(m));
    const json j = json::parse(m->body);
    BOOST_TEST(j["data"][0]["id"] == "stories260K.bin", m->body);
    BOOST_TEST(j["data"][0]["meta"]["n_ctx"] == 48, m->body);
    BOOST_TEST(s.stderr_text().find("class.yaml: prompt is not an option of serve (ignored)") != std::string::npos, s.stderr_text());
    // The command line wins over the config, as in run.
  }
  {
    ServerProcess s({"--config", (dir / "class.yaml").string(), "--context", "32"}, false);
    const auto m = s.client().Get("/v1/models");
    BOOST_TEST_REQUIRE(static_cast<bool>(m));
    BOOST_TEST(json::parse(m->body)["data"][0]["meta"]["n_ctx"] == 32, m->body);
  }
  {
    ServerProcess s({}, false);
    const auto r = s.client().Post("/completion", json{{"prompt", "The weather today is"}, {"n_predict", 1}, {"temperature", 0}}.dump(),
                                   "application/json");
    BOOST_TEST_REQUIRE(static_cast<bool>(r));
    BOOST_TEST(r->status == 200, r->body);
    BOOST_TEST(json::parse(r->body)["content"] == " sunny", r->body);  // the toy's lesson sentence, as run says it
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(hostile_requests_get_their_status_and_a_json_error) {
  ServerProcess s({"--api-key", "sesame", "--context", "64"});
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(30);
  const httplib::Headers key = {{"Authorization", "Bearer sesame"}};
  struct Case {
    std::string what, body;
    int status;
    std::string in_message;
  };
  const std::string big_prompt(2000, 'a');
  const std::vector<Case> cases = {
      {"malformed JSON", R"({"prompt": "Once)", 400, "not valid JSON"},
      {"not an object", R"([1,2])", 400, "JSON object"},
      {"wrong type", R"({"prompt": 5})", 400, "'prompt': expected a string"},
      {"n_predict 10^9", R"({"prompt": "a", "n_predict": 1000000000})", 400, "'n_predict'"},
      {"negative top_k", R"({"prompt": "a", "top_k": -1})", 400, "'top_k'"},
      {"unknown sampler", R"({"prompt": "a", "sampler": "top-k:40,warp-drive"})", 400, "warp-drive"},
      {"unknown samplers entry", R"({"prompt": "a", "samplers": ["top_k", "warp"]})", 400, "warp"},
      {"prompt over the context", json{{"prompt", big_prompt}}.dump(), 400, "context of 64"},
      {"seed out of range", R"({"prompt": "a", "seed": -5})", 400, "'seed'"},
      {"seed not an integer", R"({"prompt": "a", "seed": 1.5})", 400, "'seed'"},
      {"bad trace level", R"({"prompt": "a", "trace": "everything"})", 400, "'trace'"},
      {"deep nesting", std::string(100000, '[') + std::string(100000, ']'), 400, "nest"},
      // A request may not make the server read a file of its choosing (and quote it in an error).
      {"a grammar file on the server", R"({"prompt": "a", "sampler": "grammar:file=/etc/passwd"})", 400, "names a file on the server"},
      {"a grammar file as the main parameter", R"({"prompt": "a", "sampler": "top-k:40,grammar:/etc/hostname"})", 400, "'file' names a file"},
      {"a schema file on the server", R"({"prompt": "a", "sampler": "grammar:schema_file=/etc/passwd"})", 400, "'schema_file' names a file"},
      {"two grammars", R"({"prompt": "a", "grammar": "root ::= \"a\"", "json_schema": {}})", 400, "one grammar"},
      {"a grammar that does not parse", R"({"prompt": "a", "grammar": "root ::= (\"a\""})", 400, "expected ')'"},
      {"a grammar that is not text", R"({"prompt": "a", "grammar": 5})", 400, "'grammar': expected GBNF text"},
      {"a schema with an unsupported keyword", R"({"prompt": "a", "json_schema": {"type": "integer", "maximum": 3}})", 400, "unsupported JSON-schema keyword 'maximum'"},
  };
  for (const auto& k : cases) {
    auto r = c.Post("/completion", key, k.body, "application/json");
    BOOST_TEST_REQUIRE(static_cast<bool>(r), k.what);
    BOOST_TEST(r->status == k.status, k.what << ": " << r->status << " " << r->body);
    const json e = json::parse(r->body, nullptr, false);
    BOOST_TEST(e.contains("error"), k.what << ": " << r->body);
    if (e.contains("error")) {
      BOOST_TEST(e["error"]["code"] == k.status, k.what);
      BOOST_TEST(e["error"]["message"].get<std::string>().find(k.in_message) != std::string::npos, k.what << ": " << r->body);
      BOOST_TEST(e["error"]["type"] == "invalid_request_error", k.what);
    }
    check_healthy(c);
  }
  // Missing and wrong API keys.
  for (const httplib::Headers& h : {httplib::Headers{}, httplib::Headers{{"Authorization", "Bearer nope"}}}) {
    auto r = c.Post("/completion", h, R"({"prompt": "a"})", "application/json");
    BOOST_TEST_REQUIRE(static_cast<bool>(r));
    BOOST_TEST(r->status == 401);
    BOOST_TEST(json::parse(r->body)["error"]["type"] == "authentication_error");
    check_healthy(c);
  }
  // A 10 MB body: 413 before it is read.
  {
    auto r = c.Post("/completion", key, std::string(10 << 20, ' '), "application/json");
    BOOST_TEST_REQUIRE(static_cast<bool>(r), httplib::to_string(r.error()));
    BOOST_TEST(r->status == 413);
    BOOST_TEST(json::parse(r->body)["error"]["code"] == 413);
    check_healthy(c);
  }
  // Unknown endpoint, and a trace that is not there.
  auto nf = c.Get("/nowhere", key);
  BOOST_TEST_REQUIRE(static_cast<bool>(nf));
  BOOST_TEST(nf->status == 404);
  BOOST_TEST(json::parse(nf->body)["error"]["code"] == 404);
  auto nt = c.Get("/traces/no-such-trace", key);
  BOOST_TEST_REQUIRE(static_cast<bool>(nt));
  BOOST_TEST(nt->status == 404);
  check_healthy(c);
}

// Stop words end the text before the first one, in the whole response and in the stream, which holds back
// what could still become one; llama.cpp's token prompts (ids, or ids mixed with strings) give what the text does.
BOOST_AUTO_TEST_CASE(stop_words_and_token_prompts) {
  ServerProcess s({});
  auto c = s.client();
  const json base = {{"prompt", "Once upon a time"}, {"n_predict", 32}, {"temperature", 0}};
  const std::string full = post(c, "/completion", base)["content"].get<std::string>();
  BOOST_TEST_REQUIRE(full.size() > 40u, full);
  // A word that begins in one token and ends in a later one, found first at `at`.
  const std::string word = full.substr(full.size() / 2, 5);
  const std::size_t at = full.find(word);
  auto with = [&](json b, const json& stop, bool stream) {
    b["stop"] = stop;
    b["stream"] = stream;
    return b;
  };
  const json j = post(c, "/completion", with(base, {word}, false));
  BOOST_TEST(j["content"] == full.substr(0, at));
  BOOST_TEST(j["stop_type"] == "word");
  BOOST_TEST(j["stopping_word"] == word);
  BOOST_TEST(j["glassbox"]["stop_reason"] == "stop_text");
  BOOST_TEST(j["tokens_predicted"].get<int>() < 32);
  // OpenAI's spelling: one string; finish_reason "stop".
  json o = base;
  o.erase("n_predict");
  o["max_tokens"] = 32;
  const json oj = post(c, "/v1/completions", with(o, word, false));
  BOOST_TEST(oj["choices"][0]["text"] == full.substr(0, at));
  BOOST_TEST(oj["choices"][0]["finish_reason"] == "stop");
  // Streamed: the pieces join to the same text (a piece sent before the word was known to be one would show).
  auto streamed = [&](const json& stop) {
    auto r = c.Post("/completion", with(base, stop, true).dump(), "application/json");
    BOOST_TEST_REQUIRE(static_cast<bool>(r));
    std::string joined;
    for (const auto& e : sse_events(r->body))
      if (!e.value("stop", false)) joined += e["content"].get<std::string>();
    return joined;
  };
  BOOST_TEST(streamed({word}) == full.substr(0, at));
  // A stop word the text only begins at its very end (never completed): held back, then sent at the end.
  const std::string tail_word = full.substr(full.size() - 2) + "\x01";
  BOOST_TEST(streamed({tail_word}) == full);
  BOOST_TEST(post(c, "/completion", with(base, {tail_word}, false))["stop_type"] == "limit");

  // Token prompts: the ids /tokenize gives (BOS included) equal the text; ids mixed with a string too.
  const json ids = post(c, "/tokenize", {{"content", "Once upon a time"}, {"add_special", true}})["tokens"];
  json by_ids = base;
  by_ids["prompt"] = ids;
  const json k = post(c, "/completion", by_ids);
  BOOST_TEST(k["content"] == full);
  BOOST_TEST(k["tokens_evaluated"] == ids.size());
  const json rest = post(c, "/tokenize", {{"content", " a time"}, {"add_special", false}})["tokens"];
  json mixed = base;
  mixed["prompt"] = json::array({"Once upon"});
  for (const auto& id : rest) mixed["prompt"].push_back(id);
  const json m = post(c, "/completion", mixed);
  const json m_ids = post(c, "/tokenize", {{"content", "Once upon"}, {"add_special", true}})["tokens"];
  BOOST_TEST(m["tokens_evaluated"] == m_ids.size() + rest.size());
  // Refused: an id outside the vocabulary, a nested array, a stop word that is not text or is empty.
  for (const json& bad : {json{{"prompt", {1, 100000}}}, json{{"prompt", {{1, 2}}}}, json{{"prompt", "a"}, {"stop", {5}}},
                          json{{"prompt", "a"}, {"stop", {""}}}}) {
    auto r = c.Post("/completion", bad.dump(), "application/json");
    BOOST_TEST_REQUIRE(static_cast<bool>(r));
    BOOST_TEST(r->status == 400, bad.dump() << ": " << r->body);
  }
  check_healthy(c);
}

// llama.cpp's `grammar` and `json_schema` fields and OpenAI's `response_format` put a grammar stage first in
// the chain: the reply is what `glassbox run --grammar` / `--json-schema` gives with the same seed.
BOOST_AUTO_TEST_CASE(grammar_fields_constrain_the_reply_as_run_does) {
  ServerProcess s({});
  auto c = s.client();
  const fs::path dir = gbtest::temp_dir("serve-grammar");
  const std::string yes_no = R"(root ::= ("yes" | "no") ".")";
  gbtest::write_file(dir / "yn.gbnf", yes_no + "\n");
  const json schema = {{"type", "string"}, {"enum", {"yes", "no"}}};
  gbtest::write_file(dir / "s.json", schema.dump());
  for (int seed = 1; seed <= 3; ++seed) {
    const json g = post(c, "/completion", {{"prompt", "Hi"}, {"n_predict", 16}, {"seed", seed}, {"grammar", yes_no}});
    const auto cli = run_cli(run_args({"-p", "Hi", "-n", "16", "--seed", std::to_string(seed), "--grammar", (dir / "yn.gbnf").string()}));
    BOOST_TEST_REQUIRE(cli.rc == 0, cli.err);
    BOOST_TEST(as_run_prints(g["content"].get<std::string>()) == cli.out);
    BOOST_TEST((g["content"] == "yes." || g["content"] == "no."), g["content"]);
    BOOST_TEST(g["stop_type"] == "eos");  // the grammar is complete: only the end-of-generation token is left
    // The schema three ways: llama.cpp's json_schema object, and OpenAI's response_format on both endpoints.
    const auto cli_schema = run_cli(run_args({"-p", "Hi", "-n", "16", "--seed", std::to_string(seed), "--json-schema", (dir / "s.json").string()}));
    BOOST_TEST_REQUIRE(cli_schema.rc == 0, cli_schema.err);
    const json a = post(c, "/completion", {{"prompt", "Hi"}, {"n_predict", 16}, {"seed", seed}, {"json_schema", schema}});
    BOOST_TEST(as_run_prints(a["content"].get<std::string>()) == cli_schema.out);
    // A JSON document whose value is one of the enum's (the schema's grammar allows whitespace around it).
    auto one_of_the_enum = [](const std::string& text) {
      const json v = json::parse(text, nullptr, false);
      return !v.is_discarded() && (v == "yes" || v == "no");
    };
    BOOST_TEST(one_of_the_enum(a["content"].get<std::string>()), a["content"]);
    const json rf = {{"type", "json_schema"}, {"json_schema", {{"name", "answer"}, {"schema", schema}}}};
    const json b = post(c, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 16}, {"seed", seed}, {"response_format", rf}});
    BOOST_TEST(b["choices"][0]["text"] == a["content"]);
    const json m = post(c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 16}, {"seed", seed}, {"response_format", rf}});
    const std::string reply = m["choices"][0]["message"]["content"].get<std::string>();
    BOOST_TEST(one_of_the_enum(reply), reply);
    BOOST_TEST(m["choices"][0]["finish_reason"] == "stop");
  }
  // A response_format type that is neither text, json_object nor json_schema is refused.
  post(c, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 4}, {"response_format", {{"type", "yaml"}}}}, 400);
  fs::remove_all(dir);
}

// A client that sends a streamed request and never reads: once the server's writes stall for --write
// timeout (5 s) it gives the request up, the slot frees, and the next request is answered.
BOOST_AUTO_TEST_CASE(a_client_that_never_reads_is_cancelled) {
  ServerProcess s({"--parallel", "1", "--max-probs", "500"});
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BOOST_TEST_REQUIRE(fd >= 0);
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(s.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_TEST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  // ~30 kB per streamed token (500 alternatives each), 400 tokens: far more than the socket buffers hold.
  const std::string body = json{{"prompt", "Once upon a time"}, {"n_predict", 400}, {"stream", true}, {"n_probs", 500}, {"ignore_eos", true}}.dump();
  const std::string head = "POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n";
  BOOST_TEST_REQUIRE(::send(fd, (head + body).data(), head.size() + body.size(), 0) == static_cast<ssize_t>(head.size() + body.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto c = s.client();
  check_healthy(c);
  const auto t0 = std::chrono::steady_clock::now();
  const json next = post(c, "/completion", {{"prompt", "One day"}, {"n_predict", 3}});
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST(waited < 30.0 * gbtest::kTimeScale);  // (under ASan on a busy machine: 67 s once)
  auto m = c.Get("/metrics");
  BOOST_TEST_REQUIRE(static_cast<bool>(m));
  BOOST_TEST(m->body.find("glassbox:requests_cancelled_total 1") != std::string::npos, m->body);
  ::close(fd);
  check_healthy(c);
}

// The official `openai` npm package (installed by tools/test.sh into GLASSBOX_NPM_DIR; never downloaded here).
struct NeedsOpenAiPackage {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    const char* env = std::getenv("GLASSBOX_NPM_DIR");
    const fs::path dir = fs::path(env && *env ? env : GLASSBOX_NPM_DIR) / "node_modules";
    boost::test_tools::assertion_result r(std::system("node --version >/dev/null 2>&1") == 0 && fs::exists(dir / "openai" / "package.json"));
    if (!r) r.message() << "node or the openai npm package (" << dir.string() << "/openai) is absent: tools/test.sh installs it";
    return r;
  }
};

BOOST_AUTO_TEST_CASE(the_official_openai_client_completes_and_streams_a_chat, *boost::unit_test::precondition(NeedsOpenAiPackage{})) {
  ServerProcess s({"--api-key", "sesame"});
  const char* env = std::getenv("GLASSBOX_NPM_DIR");
  const fs::path modules = fs::path(env && *env ? env : GLASSBOX_NPM_DIR) / "node_modules";
  const fs::path dir = gbtest::temp_dir("serve-openai");
  const std::string cmd = "GLASSBOX_URL=http://127.0.0.1:" + std::to_string(s.port()) + " timeout 60 node " +
                          gbtest::quote((fs::path(GLASSBOX_SOURCE_DIR) / "tests/data/serve/openai_client.cjs").string()) + " " +
                          gbtest::quote(modules.string()) + " >" + gbtest::quote((dir / "out").string()) + " 2>" + gbtest::quote((dir / "err").string());
  BOOST_TEST_REQUIRE(std::system(cmd.c_str()) == 0, gbtest::read_file(dir / "err"));
  const json j = json::parse(gbtest::read_file(dir / "out"));
  BOOST_TEST(j["model"] == "stories260K.bin");
  BOOST_TEST(j["streamed"] == j["chat"]);
  BOOST_TEST(j["chunks"].get<int>() >= 12);
  BOOST_TEST(j["finish"] == "length");
  BOOST_TEST(j["trace_url"].get<std::string>().rfind("/traces/", 0) == 0);
  const auto cli = run_cli(run_args({"--sampler", "greedy", "-n", "12", "--prompt", "Once upon a time"}));
  BOOST_TEST_REQUIRE(cli.rc == 0, cli.err);
  BOOST_TEST(as_run_prints(j["completion"].get<std::string>()) == cli.out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_curl_examples_in_docs_serve_md_run) {
  ServerProcess s({});
  const std::string doc = gbtest::read_file(fs::path(GLASSBOX_SOURCE_DIR) / "docs/serve.md");
  const auto begin = doc.find("<!-- serve-test: begin -->"), end = doc.find("<!-- serve-test: end -->");
  BOOST_TEST_REQUIRE((begin != std::string::npos && end != std::string::npos));
  const std::string part = doc.substr(begin, end - begin);
  int blocks = 0;
  for (std::size_t at = 0; (at = part.find("```sh\n", at)) != std::string::npos;) {
    const auto stop = part.find("```\n", at + 6);
    const std::string script = part.substr(at + 6, stop - at - 6);
    at = stop + 4;
    ++blocks;
    const fs::path dir = gbtest::temp_dir("serve-doc");
    gbtest::write_file(dir / "block.sh", "set -e -o pipefail\n" + script);
    const std::string cmd = "URL=http://127.0.0.1:" + std::to_string(s.port()) + " timeout 60 bash " + gbtest::quote((dir / "block.sh").string()) +
                            " >" + gbtest::quote((dir / "out").string()) + " 2>&1";
    const int rc = std::system(cmd.c_str());
    BOOST_TEST(rc == 0, "docs/serve.md block " << blocks << " failed:\n" << script << "\n" << gbtest::read_file(dir / "out"));
    BOOST_TEST(!gbtest::read_file(dir / "out").empty(), script);
    fs::remove_all(dir);
  }
  BOOST_TEST(blocks >= 5);
}

// The class-room page in headless Chromium: a prompt given, tokens and their bars appear, no console errors.
// Under --api-key the page takes the key from the link's #key= and sends it with every request.
void check_classroom_page(bool with_key) {
  ServerProcess s(with_key ? std::vector<std::string>{"--api-key", "sesame"} : std::vector<std::string>{});
  const fs::path dir = gbtest::temp_dir("serve-page");
  const std::string base = "http://127.0.0.1:" + std::to_string(s.port()) + "/?prompt=Once%20upon%20a%20time&n=12&temperature=0&go=1";
  const std::string url = base + (with_key ? "#key=sesame" : "");
  // Driven over the DevTools protocol and waited for in real time: the page streams, and a server under ASan on a
  // loaded machine takes seconds (--dump-dom would dump at the load event, before the first token).
  std::string dom;
  {
    gbtest::LivePage page(url, dir);
    const bool done = page.wait_for("!!document.getElementById('viewer-link') || !!document.getElementById('err')?.textContent",
                                    std::chrono::seconds(120));
    dom = page.html();
    BOOST_TEST_REQUIRE(done, "the page did not finish its 12 tokens within 120 s:\n" << dom.substr(0, 3000));
    // A screenshot: the bars are drawn, not only in the DOM. Its pixels inside the bars' box (read back through a
    // canvas) hold the bar colour (#0af, nothing else there is that blue) over at least one bar's worth of area.
    page.evaluate("document.getElementById('bars').scrollIntoView(); true");
    const std::string png = page.screenshot_png_base64();
    const json seen = page.evaluate_promise(R"(new Promise((done, fail) => {
        const box = document.getElementById("bars").getBoundingClientRect();
        const img = new Image();
        img.onerror = () => fail("the screenshot is not an image");
        img.onload = () => {
          const c = document.createElement("canvas");
          c.width = img.width; c.height = img.height;
          const g = c.getContext("2d");
          g.drawImage(img, 0, 0);
          const x = Math.max(0, Math.floor(box.left)), y = Math.max(0, Math.floor(box.top));
          const w = Math.min(img.width - x, Math.ceil(box.width)), h = Math.min(img.height - y, Math.ceil(box.height));
          let blue = 0;
          if (w > 0 && h > 0) {
            const d = g.getImageData(x, y, w, h).data;
            for (let i = 0; i < d.length; i += 4) if (d[i] < 40 && Math.abs(d[i + 1] - 170) < 40 && d[i + 2] > 215) ++blue;
          }
          done({ blue, w: img.width, h: img.height, box: [x, y, w, h] });
        };
        img.src = "data:image/png;base64,)" + png + R"(";
      }))");
    BOOST_TEST(seen["blue"].get<int>() > 300, "bar pixels in the screenshot: " << seen.dump());
    if (with_key) {
      // The key left the address bar; the viewer link needs it, and the page's requests carry it.
      BOOST_TEST(page.evaluate("location.hash") == "");
      page.evaluate("fetch(document.getElementById('viewer-link').href).then((r) => { window.bareStatus = r.status; });"
                    "fetch(document.getElementById('viewer-link').href, { headers: authHeaders() }).then((r) => { window.keyStatus = r.status; })");
      BOOST_TEST(page.wait_for("window.bareStatus === 401 && window.keyStatus === 200", std::chrono::seconds(60)),
                 page.evaluate("[window.bareStatus, window.keyStatus]").dump());
    }
  }
  if (with_key) {
    // Without the key the page says what is missing and shows the box to type it into.
    fs::create_directories(dir / "nokey");
    gbtest::LivePage page(base, dir / "nokey");
    BOOST_TEST_REQUIRE(page.wait_for("!!document.getElementById('err')?.textContent", std::chrono::seconds(60)));
    BOOST_TEST(page.evaluate("document.getElementById('err').textContent").get<std::string>().find("needs its API key") != std::string::npos);
    BOOST_TEST(page.evaluate("document.getElementById('keybox').hidden") == false);
  }
  auto count = [&](const std::string& what) {
    int n = 0;
    for (std::size_t at = 0; (at = dom.find(what, at)) != std::string::npos; ++at) ++n;
    return n;
  };
  BOOST_TEST(count("class=\"tok") == 12, dom.substr(0, 3000));
  BOOST_TEST(count("class=\"bar") >= 2, dom.substr(0, 3000));
  BOOST_TEST(dom.find("id=\"viewer-link\"") != std::string::npos);
  // The greedy text the page shows is `glassbox run`'s.
  const auto cli = run_cli(run_args({"--sampler", "greedy", "-n", "12", "--prompt", "Once upon a time"}));
  BOOST_TEST_REQUIRE(cli.rc == 0, cli.err);
  std::string text;  // the page's text, tags removed: each token is a span of its own
  for (std::size_t i = 0, depth = 0; i < dom.size(); ++i) {
    if (dom[i] == '<') ++depth;
    else if (dom[i] == '>') --depth;
    else if (depth == 0) text += dom[i];
  }
  const std::string shown = cli.out.substr(0, cli.out.size() - (!cli.out.empty() && cli.out.back() == '\n'));
  BOOST_TEST(text.find(shown) != std::string::npos, cli.out);
  // (The keyed case's own request without the key logs its 401.)
  for (const auto& line : gbtest::console_lines(gbtest::read_file(dir / "err")))
    if (!with_key || line.find("status of 401") == std::string::npos) BOOST_TEST(line.empty(), "console: " << line);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(classroom_page_streams_tokens_with_bars, *boost::unit_test::precondition(gbtest::NeedsChromium{})) {
  check_classroom_page(false);
}

BOOST_AUTO_TEST_CASE(classroom_page_sends_the_api_key_from_its_link, *boost::unit_test::precondition(gbtest::NeedsChromium{})) {
  check_classroom_page(true);
}

// ---- hostile inputs, round four (issue 46) ----

namespace {

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}
bool send_all(int fd, const std::string& data) {
  std::size_t at = 0;
  while (at < data.size()) {
    const ssize_t n = ::send(fd, data.data() + at, data.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<std::size_t>(n);
  }
  return true;
}
// What the server sends until its first SSE event has begun ("data: "), it closes, or `seconds` pass.
std::string read_until_first_event(int fd, double seconds) {
  std::string got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buf[4096];
  while (got.find("data: ") == std::string::npos && std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got;
}
// What the server sends until it closes the connection (or `seconds` pass).
std::string read_until_close(int fd, double seconds) {
  std::string out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buf[65536];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 100};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}
std::string http_post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
// /health within `seconds` on a fresh connection (what a monitoring probe does).
bool health_within(int port, double seconds) {
  httplib::Client c("127.0.0.1", port);
  const auto t = std::chrono::duration<double>(seconds);
  c.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(t));
  c.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(t));
  c.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(t));
  auto r = c.Get("/health");
  return r && r->status == 200;
}
long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}
// `glassbox serve ARGS` that must exit by itself: its status and stderr (-1: still running after 30 s, killed).
std::pair<int, std::string> serve_exits(std::vector<std::string> extra) {
  const fs::path dir = gbtest::temp_dir("serve-exit");
  std::vector<std::string> args = {GLASSBOX_BIN, "serve"};
  for (auto& a : gbtest::stories_args()) args.push_back(a);
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, (dir / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  posix_spawn(&pid, GLASSBOX_BIN, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  int rc = -1;
  for (int i = 0; i < 3000; ++i) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (rc == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  std::string err = gbtest::read_file(dir / "err");
  fs::remove_all(dir);
  return {rc, err};
}

}  // namespace

// A second server on a port in use is refused (httplib's default SO_REUSEPORT let it share the port).
BOOST_AUTO_TEST_CASE(a_busy_port_is_refused) {
  ServerProcess s({});
  const auto [rc, err] = serve_exits({"--port", std::to_string(s.port())});
  BOOST_TEST(rc == 2, err);
  BOOST_TEST(err.find("--port " + std::to_string(s.port()) + ": the port is already in use") != std::string::npos, err);
  BOOST_TEST(std::count(err.begin(), err.end(), '\n') == 1, err);
  auto c = s.client();
  check_healthy(c);
}

// A chunked body obeys --max-body (it was read whole, and a 400 echoed it back); an error quotes at most a
// short part of the request; GET with a body and POST to nowhere are refused before the body is read.
BOOST_AUTO_TEST_CASE(bodies_obey_max_body_and_errors_quote_little) {
  ServerProcess s({"--max-body", "65536"});
  {
    const int fd = connect_loopback(s.port());
    BOOST_TEST_REQUIRE(fd >= 0);
    std::string req = "POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    send_all(fd, req);
    const std::string chunk(60000, 'x');
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
    for (int i = 0; i < 100 && send_all(fd, size + chunk + "\r\n"); ++i) {
    }
    const std::string reply = read_until_close(fd, 10);
    ::close(fd);
    BOOST_TEST(reply.rfind("HTTP/1.1 413", 0) == 0, reply.substr(0, 200));
    BOOST_TEST(reply.size() < 2000u, reply.size());
    BOOST_TEST(reply.find("65536 bytes (--max-body)") != std::string::npos, reply.substr(0, 400));
  }
  auto c = s.client();
  // A 60 kB prompt with a raw newline: the parse error quotes a short part of it.
  const std::string bad = "{\"prompt\": \"" + std::string(30000, 'a') + "\n" + std::string(30000, 'b') + "\"}";
  auto r = c.Post("/completion", bad, "application/json");
  BOOST_TEST_REQUIRE(static_cast<bool>(r));
  BOOST_TEST(r->status == 400);
  BOOST_TEST(r->body.size() < 1000u, r->body.size());
  BOOST_TEST(json::parse(r->body)["error"]["message"].get<std::string>().find("bytes in all)") != std::string::npos, r->body.substr(0, 600));
  // A header of 10,000 lines (each within httplib's line limit): refused past 64 KiB, not kept in memory.
  {
    const int fd = connect_loopback(s.port());
    std::string head = "GET /health HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 10000; ++i) head += "X-Pad-" + std::to_string(i) + ": " + std::string(40, 'p') + "\r\n";
    send_all(fd, head + "\r\n");
    const std::string reply = read_until_close(fd, 10);
    ::close(fd);
    BOOST_TEST(reply.rfind("HTTP/1.1 400", 0) == 0, reply.substr(0, 200));
  }
  for (const std::string& raw : {std::string("GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
                                 http_post("/nowhere", std::string(1000, 'x')), http_post("/completion", "", "Content-Length: 99999999\r\n")}) {
    const int fd = connect_loopback(s.port());
    send_all(fd, raw);
    const std::string reply = read_until_close(fd, 5);
    ::close(fd);
    BOOST_TEST((reply.rfind("HTTP/1.1 400", 0) == 0 || reply.rfind("HTTP/1.1 404", 0) == 0 || reply.rfind("HTTP/1.1 413", 0) == 0), reply.substr(0, 100));
  }
  check_healthy(c);
}

// /traces/NAME serves only names of a trace's form (TAG-N-RANDOM), never through a symbolic link.
BOOST_AUTO_TEST_CASE(traces_are_only_the_servers_own_and_links_are_not_followed) {
  const fs::path dir = gbtest::temp_dir("serve-trace-links");
  ServerProcess s({"--trace-dir", dir.string()});
  auto c = s.client();
  gbtest::write_file(dir / "planted.jsonl", "{\"secret\": 1}\n");
  fs::create_symlink("/etc/hostname", dir / "link.jsonl");
  for (const char* name : {"planted", "link"}) {
    auto r = c.Get(std::string("/traces/") + name);
    BOOST_TEST_REQUIRE(static_cast<bool>(r));
    BOOST_TEST(r->status == 404, name << ": " << r->body);
  }
  const json done = post(c, "/completion", {{"prompt", "Hi"}, {"n_predict", 2}});
  const std::string url = done["glassbox"]["trace_url"];
  auto ok = c.Get(url);
  BOOST_TEST_REQUIRE(static_cast<bool>(ok));
  BOOST_TEST(ok->status == 200);
  // The server's own trace replaced by a link: not followed.
  const fs::path file = dir / (url.substr(std::string("/traces/").size()) + ".jsonl");
  BOOST_TEST_REQUIRE(fs::exists(file));
  fs::remove(file);
  fs::create_symlink("/etc/hostname", file);
  for (const std::string& u : {url, url + "/view"}) {
    auto r = c.Get(u);
    BOOST_TEST_REQUIRE(static_cast<bool>(r));
    BOOST_TEST(r->status == 404, u << ": " << r->body);
  }
  fs::remove_all(dir);
}

// Replicas sharing one --trace-dir (docs/serve.md, "Several replicas"; #41): each answers the other's
// trace_url with the same file; their ids differ in their tag; a name not of the form, or a way out of
// the folder, is still refused. Servers without --trace-dir do not see each other's traces.
BOOST_AUTO_TEST_CASE(replicas_sharing_a_trace_dir_serve_each_others_traces) {
  const fs::path dir = gbtest::temp_dir("serve-shared-traces");
  ServerProcess a({"--trace-dir", dir.string()}), b({"--trace-dir", dir.string()});
  auto ca = a.client(), cb = b.client();
  const std::string ua = post(ca, "/completion", {{"prompt", "Hi"}, {"n_predict", 3}})["glassbox"]["trace_url"];
  const std::string ub = post(cb, "/completion", {{"prompt", "Hi"}, {"n_predict", 3}})["glassbox"]["trace_url"];
  const auto tag = [](const std::string& url) { return url.substr(8, url.find('-') - 8); };
  BOOST_TEST(tag(ua).size() == 6u);
  BOOST_TEST(tag(ua) != tag(ub));
  for (const std::string& u : {ua, ub}) {
    auto ra = ca.Get(u), rb = cb.Get(u);
    BOOST_TEST_REQUIRE((ra && rb));
    BOOST_TEST(ra->status == 200, u << ": " << ra->body);
    BOOST_TEST(rb->status == 200, u << ": " << rb->body);
    BOOST_TEST(ra->body == rb->body);
    auto view = cb.Get(u + "/view");
    BOOST_TEST_REQUIRE(static_cast<bool>(view));
    BOOST_TEST(view->status == 200);
  }
  // Files of other names in the folder, and paths out of it: 404.
  gbtest::write_file(dir / "planted.jsonl", "{\"secret\": 1}\n");
  gbtest::write_file(dir / ".hidden-1-abcdefgh.jsonl", "{\"secret\": 1}\n");
  const std::string id = ua.substr(8);
  const std::vector<std::string> refused = {"/traces/planted", "/traces/" + tag(ua), "/traces/" + id + "x", "/traces/x" + id,
                                            "/traces/.hidden-1-abcdefgh", "/traces/../" + dir.filename().string() + "/" + id,
                                            "/traces/..%2F" + id, "/traces/" + tag(ua) + "-1-abc.efgh"};
  for (const std::string& bad : refused) {
    const int fd = connect_loopback(b.port());
    BOOST_TEST_REQUIRE(fd >= 0);
    send_all(fd, "GET " + bad + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string reply = read_until_close(fd, 10);
    ::close(fd);
    BOOST_TEST((reply.rfind("HTTP/1.1 404", 0) == 0 || reply.rfind("HTTP/1.1 400", 0) == 0), bad << ": " << reply.substr(0, 120));
  }
  // A trace still being written (a paced request on a third replica) is a temporary file beside its name:
  // not served by another replica until it is complete, then served whole.
  {
    ServerProcess slow({"--trace-dir", dir.string(), "--pace", "100"});
    std::string done_url;
    std::thread t([&] {
      auto cs = slow.client();
      done_url = post(cs, "/completion", {{"prompt", "Hi"}, {"n_predict", 12}, {"ignore_eos", true}})["glassbox"]["trace_url"];
    });
    struct Joiner {
      std::thread& t;
      ~Joiner() {
        if (t.joinable()) t.join();  // (also when a REQUIRE below fails)
      }
    } joiner{t};
    std::string live;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (live.empty() && std::chrono::steady_clock::now() < until) {
      for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();  // .ID.jsonl.tmp-XXXXXX
        if (name.rfind('.', 0) == 0 && name.find(".jsonl.tmp-") != std::string::npos) live = name.substr(1, name.find(".jsonl") - 1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    BOOST_TEST_REQUIRE(!live.empty(), "no trace being written seen in " << dir);
    auto during = cb.Get("/traces/" + live);
    BOOST_TEST_REQUIRE(static_cast<bool>(during));
    BOOST_TEST(during->status == 404, during->body);
    BOOST_TEST(during->body.find("not finished") != std::string::npos, during->body);
    t.join();
    BOOST_TEST(done_url == "/traces/" + live);
    auto after = cb.Get(done_url);
    BOOST_TEST_REQUIRE(static_cast<bool>(after));
    BOOST_TEST(after->status == 200);
    BOOST_TEST(after->body.find("\"type\":\"summary\"") != std::string::npos);
  }
  fs::remove_all(dir);
  // Without --trace-dir each server's folder is its own: another's trace_url is not found there.
  ServerProcess c({}), d({});
  auto cc = c.client(), cd = d.client();
  const std::string uc = post(cc, "/completion", {{"prompt", "Hi"}, {"n_predict", 2}})["glassbox"]["trace_url"];
  auto own = cc.Get(uc), other = cd.Get(uc);
  BOOST_TEST_REQUIRE((own && other));
  BOOST_TEST(own->status == 200);
  BOOST_TEST(other->status == 404, other->body);
}

// A non-streamed request whose client hangs up is cancelled at its next step (it kept its slot to the end).
BOOST_AUTO_TEST_CASE(a_non_streamed_request_whose_client_hangs_up_is_cancelled) {
  ServerProcess s({"--parallel", "1", "--pace", "50"});
  const int fd = connect_loopback(s.port());
  BOOST_TEST_REQUIRE(fd >= 0);
  send_all(fd, http_post("/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 300}, {"ignore_eos", true}}.dump()));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::close(fd);
  auto c = s.client();
  bool cancelled = false;
  for (int i = 0; i < 60 && !cancelled; ++i) {  // 300 paced tokens would take 15 s
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto m = c.Get("/metrics");
    cancelled = m && m->body.find("glassbox:requests_cancelled_total 1") != std::string::npos;
  }
  BOOST_TEST(cancelled);
  const json next = post(c, "/completion", {{"prompt", "One day"}, {"n_predict", 2}});
  BOOST_TEST(next["tokens_predicted"] == 2);
}

// Batched (--parallel 2, no --pace): a streamed client that hangs up mid-stream leaves the batch at its
// next step, while the request beside it in the same passes runs on to exactly its text alone (issue 41).
BOOST_AUTO_TEST_CASE(a_batched_stream_whose_client_hangs_up_leaves_the_batch) {
  const fs::path traces = gbtest::temp_dir("serve-hangup");
  ServerProcess s({"--parallel", "2", "--trace-dir", traces.string()});
  auto c = s.client();
  auto value = [&](const std::string& name) {
    auto m = c.Get("/metrics");
    BOOST_TEST_REQUIRE(static_cast<bool>(m));
    const auto at = m->body.find("\nglassbox:" + name + " ");
    BOOST_TEST_REQUIRE(at != std::string::npos, name);
    return std::stod(m->body.substr(at + name.size() + 11));
  };
  // n_probs: 100 makes each step build a hundred entries, so that B decodes for some hundreds of ms (stories260K
  // alone would be done in a few tens), while A's client hangs up within a few ms of its first event.
  const json b_body = {{"prompt", "Once upon a time"}, {"n_predict", 200}, {"seed", 11}, {"ignore_eos", true}, {"n_probs", 100}};
  const json alone = post(c, "/completion", b_body);  // B alone, the server idle
  BOOST_TEST_REQUIRE(alone["tokens_predicted"] == 200, alone.dump().substr(0, 300));

  auto b = std::async(std::launch::async, [&] {
    auto bc = s.client();
    return bc.Post("/completion", b_body.dump(), "application/json");
  });
  bool joined = false;  // B in the batch
  for (int i = 0; i < 2000 && !joined; ++i) {
    joined = value("batch_runs") >= 1;
    if (!joined) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  BOOST_TEST_REQUIRE(joined);
  // A: streamed, as long as B; its client reads the first event and hangs up.
  const int fd = connect_loopback(s.port());
  BOOST_TEST_REQUIRE(fd >= 0);
  send_all(fd, http_post("/completion", json{{"prompt", "One day"}, {"n_predict", 200}, {"seed", 12}, {"ignore_eos", true}, {"n_probs", 100},
                                             {"stream", true}}.dump()));
  const std::string got = read_until_first_event(fd, 30);
  ::close(fd);
  BOOST_TEST_REQUIRE(got.find("data: ") != std::string::npos, got);
  // A leaves: the server counts it cancelled and the batch's runs gauge drops (to B alone, or none once B is
  // done), within a bounded time.
  bool left = false;
  for (int i = 0; i < 500 && !left; ++i) {
    left = value("requests_cancelled_total") == 1 && value("batch_runs") <= 1;
    if (!left) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_TEST(left);
  // B is unaffected: its tokens and their probabilities are those it has alone.
  auto rb = b.get();
  BOOST_TEST_REQUIRE(static_cast<bool>(rb));
  BOOST_TEST_REQUIRE(rb->status == 200, rb->body);
  const json beside = json::parse(rb->body);
  BOOST_TEST(beside["content"] == alone["content"]);
  BOOST_TEST(beside["completion_probabilities"] == alone["completion_probabilities"]);
  BOOST_TEST(value("batch_runs") == 0);
  // The traces say when: A's shared passes with B, then ended in an error line long before its 200 tokens;
  // B's has steps in passes of two (A beside it), then steps alone after A left, through to its summary.
  const std::string b_trace = beside["glassbox"]["trace_url"].get<std::string>().substr(8) + ".jsonl";
  const std::string alone_trace = alone["glassbox"]["trace_url"].get<std::string>().substr(8) + ".jsonl";
  int a_steps = -1, a_batched = 0;
  std::string a_end;
  for (const auto& f : fs::directory_iterator(traces)) {
    const std::string name = f.path().filename().string();
    if (name == b_trace || name == alone_trace) continue;
    const auto lines = gbtest::read_jsonl(f.path());
    BOOST_TEST_REQUIRE(lines.size() >= 2u);
    a_steps = 0;
    for (const auto& l : lines)
      if (l.value("type", "") == "step") {
        ++a_steps;
        if (l.value("batch", 1) == 2) ++a_batched;
      }
    a_end = lines.back().dump();
    BOOST_TEST(lines.back()["type"] == "error", a_end);
    BOOST_TEST(a_end.find("the client disconnected") != std::string::npos, a_end);
  }
  BOOST_TEST(a_steps > 0);
  BOOST_TEST(a_steps < 200, "A ran all its " << a_steps << " steps: its client hung up after the first");
  BOOST_TEST(a_batched > 0, "A never shared a pass with B");
  const auto bl = gbtest::read_jsonl(traces / b_trace);
  BOOST_TEST_REQUIRE(!bl.empty());
  BOOST_TEST(bl.back()["type"] == "summary");
  int last_shared = -1, alone_after = 0, n = 0;
  for (const auto& l : bl)
    if (l.value("type", "") == "step") {
      if (l.value("batch", 1) == 2) last_shared = n, alone_after = 0;
      else if (last_shared >= 0) ++alone_after;
      ++n;
    }
  BOOST_TEST(last_shared >= 0, "B never shared a pass with A");
  BOOST_TEST(alone_after > 0, "B's steps after A left: " << alone_after << " (last shared step " << last_shared << " of " << n << ")");
  BOOST_TEST_MESSAGE("A: " << a_steps << " steps (" << a_batched << " in passes of two), then its client's hang-up ended it; B: " << n
                           << " steps, " << alone_after << " of them alone after A left");
  // The slot is free: the next request is served.
  const json next = post(c, "/completion", {{"prompt", "One day"}, {"n_predict", 2}});
  BOOST_TEST(next["tokens_predicted"] == 2);
  fs::remove_all(traces);
}

// 64 connections that send half a header (and stay) do not delay /health (they held every HTTP thread
// for the 10 s read timeout); a client's oldest unfinished connections are closed past --client-connections.
BOOST_AUTO_TEST_CASE(slow_clients_do_not_starve_the_listener) {
  ServerProcess s({"--client-connections", "16"});
  std::vector<int> slow;
  for (int i = 0; i < 64; ++i) {
    const int fd = connect_loopback(s.port());
    BOOST_TEST_REQUIRE(fd >= 0);
    send_all(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
    slow.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < 5; ++i) BOOST_TEST(health_within(s.port(), 1.0 * gbtest::kTimeScale), "try " << i);
  // The oldest were closed: at least 64 - 16 of them read their end of file.
  int closed = 0;
  for (int fd : slow) {
    char b;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0 && ::recv(fd, &b, 1, MSG_DONTWAIT) == 0) ++closed;
  }
  BOOST_TEST(closed >= 48, closed);
  for (int fd : slow) ::close(fd);
}

// Two requests in one write (HTTP/1.1 pipelining) get two replies, in order (the second was dropped).
BOOST_AUTO_TEST_CASE(pipelined_requests_are_answered) {
  ServerProcess s({});
  const int fd = connect_loopback(s.port());
  BOOST_TEST_REQUIRE(fd >= 0);
  send_all(fd, http_post("/tokenize", R"({"content": "Hi"})") + "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string reply = read_until_close(fd, 10);
  ::close(fd);
  const auto first = reply.find("HTTP/1.1 200"), second = reply.find("HTTP/1.1 200", first + 1);
  BOOST_TEST(first == 0u, reply);
  BOOST_TEST(second != std::string::npos, reply);
  BOOST_TEST(reply.find("\"tokens\"") < reply.find(R"({"status":"ok"})"), reply);
}

// Fields llama.cpp and OpenAI honour: mapped to their stages, or a 400 naming them, never a silent 200.
BOOST_AUTO_TEST_CASE(honoured_fields_map_to_stages_or_are_refused) {
  ServerProcess s({});
  auto c = s.client();
  struct Mapped {
    std::string path;
    json fields;
    std::string in_chain;
  };
  const json chat = json::array({{{"role", "user"}, {"content", "Hi"}}});
  const std::vector<Mapped> mapped = {
      {"/completion", {{"repeat_penalty", 1.3}, {"repeat_last_n", 32}}, "repetition-penalty:penalty=1.3:last_n=32"},
      {"/completion", {{"presence_penalty", 0.5}}, "presence-penalty:penalty=0.5:last_n=64"},
      {"/v1/completions", {{"frequency_penalty", 0.25}}, "frequency-penalty:penalty=0.25:last_n=64"},
      {"/completion", {{"dry_multiplier", 0.8}, {"dry_sequence_breakers", {"\n", "|"}}}, "dry:multiplier=0.8:base=1.75:allowed_length=2:last_n=-1:breakers=\\n|\\|"},
      {"/completion", {{"xtc_probability", 0.5}, {"xtc_threshold", 0.2}}, "xtc:probability=0.5:threshold=0.2"},
      {"/completion", {{"mirostat", 2}, {"mirostat_tau", 4.0}}, "temperature:0.8,mirostat-v2:tau=4.0:eta=0.1"},
      {"/completion", {{"top_n_sigma", 1.5}}, "top-n-sigma:1.5"},
      {"/completion", {{"dynatemp_range", 0.5}}, "dynamic-temperature:temperature=0.8:range=0.5:exponent=1.0"},
      {"/completion", {{"top_p", 0}}, "top-k:40,top-k:1,min-p"},
      {"/v1/chat/completions", {{"top_p", 0}, {"messages", chat}}, "top-k:1"},
  };
  for (const auto& m : mapped) {
    json body = m.fields;
    if (!body.contains("messages")) body["prompt"] = "Hi";
    body["n_predict"] = 2;
    const json r = post(c, m.path, body);
    BOOST_TEST(r["glassbox"]["sampler"].get<std::string>().find(m.in_chain) != std::string::npos, m.fields.dump() << ": " << r["glassbox"]["sampler"]);
  }
  // max_tokens on /completion, n_predict on /v1/*.
  BOOST_TEST(post(c, "/completion", {{"prompt", "Hi"}, {"max_tokens", 3}, {"ignore_eos", true}})["tokens_predicted"] == 3);
  BOOST_TEST(post(c, "/v1/completions", {{"prompt", "Hi"}, {"n_predict", 3}, {"ignore_eos", true}})["usage"]["completion_tokens"] == 3);
  const std::vector<std::pair<json, std::string>> refused = {
      {{{"n", 2}}, "'n'"}, {{{"best_of", 3}}, "'best_of'"}, {{{"echo", true}}, "'echo'"},
      {{{"prompt", {"one", "two"}}}, "a list of 2 prompts"}, {{{"tools", {{{"type", "function"}}}}}, "'tools'"},
      {{{"tool_choice", "auto"}}, "'tool_choice'"}, {{{"suffix", "end"}}, "'suffix'"}, {{{"mirostat", 1}}, "'mirostat'"},
      {{{"tfs_z", 0.9}}, "'tfs_z'"}, {{{"min_keep", 5}}, "'min_keep'"}, {{{"repeat_penalty", 0}}, "'repeat_penalty'"},
  };
  for (const auto& [fields, name] : refused) {
    json body = {{"prompt", "Hi"}, {"n_predict", 2}};
    body.update(fields);
    for (const char* path : {"/completion", "/v1/completions"}) {
      const json e = post(c, path, body, 400);
      BOOST_TEST(e["error"]["message"].get<std::string>().find(name) != std::string::npos, path << " " << fields.dump() << ": " << e.dump());
    }
  }
  // Harmless values of the same fields are accepted.
  post(c, "/v1/completions", {{"prompt", {"Hi"}}, {"n", 1}, {"best_of", 1}, {"echo", false}, {"n_predict", 1}});
  // A stage that changes nothing is said in the response, as run says it on stderr (issue #45).
  const json noop = post(c, "/completion", {{"prompt", "Hi"}, {"n_predict", 2}, {"sampler", "xtc"}});
  BOOST_TEST_REQUIRE(noop["glassbox"].contains("warnings"), noop.dump());
  BOOST_TEST(noop["glassbox"]["warnings"].dump().find("sampler stage 'xtc' changes nothing") != std::string::npos, noop.dump());
  BOOST_TEST(!post(c, "/completion", {{"prompt", "Hi"}, {"n_predict", 2}})["glassbox"].contains("warnings"));
}

// OpenAI's shapes: delta.role in the first streamed chat chunk, GET /v1/models/{id}; --cors; no install paths
// in errors; grammars past their bounds are 400s naming the limit.
BOOST_AUTO_TEST_CASE(openai_shapes_cors_and_grammar_limits) {
  ServerProcess s({"--cors", "http://example.org", "--alias", "tiny", "--max-body", "8000000"});
  auto c = s.client();
  auto r = c.Post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 3}, {"stream", true}}.dump(),
                  "application/json");
  BOOST_TEST_REQUIRE(static_cast<bool>(r));
  const auto ev = sse_events(r->body);
  BOOST_TEST_REQUIRE(ev.size() >= 2u);
  BOOST_TEST(ev[0]["choices"][0]["delta"]["role"] == "assistant", ev[0].dump());
  for (std::size_t i = 1; i + 1 < ev.size(); ++i) BOOST_TEST(!ev[i]["choices"][0]["delta"].contains("role"));
  BOOST_TEST(r->get_header_value("Access-Control-Allow-Origin") == "http://example.org");
  auto m = c.Get("/v1/models/tiny");
  BOOST_TEST_REQUIRE(static_cast<bool>(m));
  BOOST_TEST(m->status == 200);
  BOOST_TEST(json::parse(m->body)["id"] == "tiny");
  auto nm = c.Get("/v1/models/other");
  BOOST_TEST_REQUIRE(static_cast<bool>(nm));
  BOOST_TEST(nm->status == 404);
  BOOST_TEST(json::parse(nm->body)["error"]["code"] == "model_not_found");
  auto pre = c.Options("/v1/chat/completions");
  BOOST_TEST_REQUIRE(static_cast<bool>(pre));
  BOOST_TEST(pre->status == 204);
  BOOST_TEST(pre->get_header_value("Access-Control-Allow-Headers").find("Authorization") != std::string::npos);
  // An error raised inside a module names the module's file, not the folder it is installed in.
  const fs::path plugins = fs::path(GLASSBOX_BIN).parent_path();
  const json e = post(c, "/completion", {{"prompt", "Hi"}, {"sampler", "top-k:-3"}}, 400);
  const std::string msg = e["error"]["message"];
  BOOST_TEST(msg.find(plugins.string()) == std::string::npos, msg);
  BOOST_TEST(msg.find(fs::canonical(plugins).string()) == std::string::npos, msg);
  // A module that throws (a std::exception: the registry names the module with its path): only its file's name.
  {
    const fs::path dir = fs::path(GLASSBOX_TEST_PLUGIN_DIR) / "throwing";
    ServerProcess t({"--plugin-path", dir.string()});
    auto tc = t.client();
    auto r = tc.Post("/completion", json{{"prompt", "Hi"}, {"n_predict", 2}, {"sampler", "throwing"}}.dump(), "application/json");
    BOOST_TEST_REQUIRE(static_cast<bool>(r));
    const std::string m = json::parse(r->body)["error"]["message"];
    BOOST_TEST(m.find("throwing.so") != std::string::npos, m);
    BOOST_TEST(m.find(dir.string()) == std::string::npos, m);
    BOOST_TEST(m.find(fs::canonical(dir).string()) == std::string::npos, m);
  }
  // Grammars and schemas past their bounds: a 400 naming the limit, quickly; /health stays up.
  std::string big = "root ::=";
  for (int i = 0; i < 4; ++i) big += " \"abcdefghij\"{100000}";
  const json g1 = post(c, "/completion", {{"prompt", "Hi"}, {"n_predict", 2}, {"grammar", big}}, 400);
  BOOST_TEST(g1["error"]["message"].get<std::string>().find("4000000 elements") != std::string::npos, g1.dump());
  std::string alts = "root ::= \"w0\"";
  for (int i = 1; i < 300000; ++i) alts += " | \"w" + std::to_string(i) + "\"";
  const json g2 = post(c, "/completion", {{"prompt", "Hi"}, {"n_predict", 2}, {"grammar", alts}}, 400);
  // The stacks' bound ends it; under AddressSanitizer (several times slower) the time per step may come first.
  const std::string g2m = g2["error"]["message"].get<std::string>();
  BOOST_TEST((g2m.find("limit on stacks per step") != std::string::npos ||
              (gbtest::kTimeScale > 1 && g2m.find("limit on time per step") != std::string::npos)),
             g2.dump().substr(0, 500));
  json nested = {{"type", "integer"}};
  for (int i = 0; i < 60; ++i) nested = {{"type", "array"}, {"items", nested}};
  auto g3 = c.Post("/completion", json{{"prompt", "Hi"}, {"n_predict", 4}, {"json_schema", nested}}.dump(), "application/json");
  BOOST_TEST_REQUIRE(static_cast<bool>(g3));
  BOOST_TEST((g3->status == 200 || g3->status == 400), g3->body);
  auto g4 = c.Post("/completion", json{{"prompt", "Hi"}, {"n_predict", 4}, {"grammar", R"(root ::= (("a"{0,10}){0,10}){0,10})"}}.dump(), "application/json");
  BOOST_TEST_REQUIRE(static_cast<bool>(g4));
  BOOST_TEST((g4->status == 200 || g4->status == 400), g4->body);
  check_healthy(c);
}

// Load and abuse on loopback for a bounded time: slow clients, clients that hang up, chunked and oversized
// bodies, hostile grammars and schemas, links in the trace folder, wrong API keys, a second server on the
// port; /health answers within a second throughout and memory stays bounded. Stops by itself.
BOOST_AUTO_TEST_CASE(load_and_abuse) {
  const fs::path dir = gbtest::temp_dir("serve-abuse");
  ServerProcess s({"--api-key", "k", "--trace-dir", dir.string(), "--parallel", "2", "--queue", "4", "--max-body", "100000",
                   "--client-connections", "8", "--request-timeout", "3"});
  const long rss0 = rss_kib(s.pid());
  std::atomic<bool> stop{false};
  std::atomic<int> done{0};
  const std::string auth = "Authorization: Bearer k\r\n";
  std::string alts = "root ::= \"w0\"";
  for (int i = 1; i < 20000; ++i) alts += " | \"w" + std::to_string(i) + "\"";
  std::vector<std::string> hostile = {
      http_post("/completion", json{{"prompt", "Hi"}, {"n_predict", 4}, {"grammar", R"(root ::= (("a"{0,10}){0,10}){0,10})"}}.dump(), auth),
      http_post("/completion", json{{"prompt", "Hi"}, {"n_predict", 4}, {"grammar", alts}}.dump(), auth),
      http_post("/completion", json{{"prompt", "Hi"}, {"n_predict", 4}, {"json_schema", json::parse(std::string(40, '[') + "1" + std::string(40, ']'))}}.dump(), auth),
      http_post("/completion", R"({"prompt": "Hi", "n_predict": 2})", "Authorization: Bearer wrong\r\n"),
      http_post("/completion", json{{"prompt", std::string(200000, 'a')}}.dump(), auth),
      http_post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"n", 3}}.dump(), auth),
  };
  std::vector<std::thread> workers;
  // Slow clients: half a header each, renewed as they are closed.
  workers.emplace_back([&] {
    std::vector<int> fds;
    while (!stop) {
      for (int i = 0; i < 4; ++i) {
        const int fd = connect_loopback(s.port());
        if (fd >= 0) send_all(fd, "POST /completion HTTP/1.1\r\nHost: x\r\nContent-Le"), fds.push_back(fd);
      }
      while (fds.size() > 40) ::close(fds.front()), fds.erase(fds.begin());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ++done;
    }
    for (int fd : fds) ::close(fd);
  });
  // Clients that hang up mid-request (streamed and not), chunked bodies over --max-body, hostile requests.
  workers.emplace_back([&] {
    for (int i = 0; !stop; ++i) {
      const int fd = connect_loopback(s.port());
      if (fd < 0) continue;
      if (i % 3 == 0) {
        send_all(fd, http_post("/completion", json{{"prompt", "Once"}, {"n_predict", 200}, {"stream", i % 2 == 0}, {"ignore_eos", true}}.dump(), auth));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      } else if (i % 3 == 1) {
        send_all(fd, "POST /completion HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n");
        const std::string chunk = "8000\r\n" + std::string(0x8000, 'x') + "\r\n";
        for (int k = 0; k < 40 && send_all(fd, chunk); ++k) {
        }
        read_until_close(fd, 3);
      } else {
        send_all(fd, hostile[static_cast<std::size_t>(i / 3) % hostile.size()]);
        read_until_close(fd, 10);
      }
      ::close(fd);
      ++done;
    }
  });
  // Links planted in the trace folder, asked for.
  workers.emplace_back([&] {
    for (int i = 0; !stop; ++i) {
      std::error_code ec;
      fs::create_symlink("/etc/hostname", dir / ("1-link" + std::to_string(i) + ".jsonl"), ec);
      httplib::Client c("127.0.0.1", s.port());
      c.set_read_timeout(5);
      auto r = c.Get("/traces/1-link" + std::to_string(i), {{"Authorization", "Bearer k"}});
      if (r) BOOST_TEST(r->status == 404);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ++done;
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(12);
  int probes = 0, late = 0;
  double slowest = 0;  // ms
  while (std::chrono::steady_clock::now() < until) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!health_within(s.port(), 1.0 * gbtest::kTimeScale)) ++late;
    slowest = std::max(slowest, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    ++probes;
    if (probes == 10) {
      const auto [rc, err] = serve_exits({"--port", std::to_string(s.port())});  // a second server on the port
      BOOST_TEST(rc == 2, err);
    }
    std::this_thread::sleep_until(t0 + std::chrono::milliseconds(250));
  }
  stop = true;
  for (auto& t : workers) t.join();
  BOOST_TEST(late == 0, late << " of " << probes << " /health probes took over a second");
  BOOST_TEST(done > 30, done.load());
  const long rss1 = rss_kib(s.pid());
  // Under AddressSanitizer freed memory waits in its quarantine (256 MiB by default) and every allocation
  // has shadow and redzones, so the growth bound there is the normal one plus the quarantine and as much
  // again for shadow. Either bound still catches what the issue saw: growth with the requests (a hostile
  // schema took the process to 10 GB in under a minute).
#if defined(GBTEST_ASAN)
  constexpr long kGrowthKiB = (300 + 2 * 256) * 1024;
#else
  constexpr long kGrowthKiB = 300 * 1024;
#endif
  BOOST_TEST(rss1 - rss0 < kGrowthKiB, "RSS " << rss0 << " KiB -> " << rss1 << " KiB");
  BOOST_TEST_MESSAGE("load_and_abuse: " << probes << " /health probes, " << late << " late, the slowest " << slowest << " ms; " << done.load() << " abusive rounds; RSS "
                                        << rss0 << " KiB -> " << rss1 << " KiB");
  auto c = s.client();
  const json ok = post(c, "/completion", {{"prompt", "Hi"}, {"n_predict", 2}}, 401);
  BOOST_TEST(ok["error"]["type"] == "authentication_error");
  BOOST_TEST(s.stop() == 0, s.stderr_text());
  fs::remove_all(dir);
}

// A shared KV pool (#41): `--attention paged:16 --kv-pool 1` gives stories260K 51 blocks of 16 positions; a
// request of ~385 prompt tokens and n_predict 30 may hold 26, so two never fit at once. Batched, two such
// requests sent together are served one after the other (no step of either trace ran in a pass of two), each
// with `glassbox run --attention paged:16`'s trace; paced, a third request, while one decodes and one waits in
// the queue (--queue 1), gets 503; a stream whose client hangs up gives its blocks back. The pool ends empty.
BOOST_AUTO_TEST_CASE(a_shared_kv_pool_admits_requests_as_their_blocks_fit) {
  std::string prompt = "Once upon a time";
  for (int i = 0; i < 380; ++i) prompt += " and";
  auto value = [](httplib::Client& c, const std::string& name) {
    auto m = c.Get("/metrics");
    BOOST_TEST_REQUIRE(static_cast<bool>(m));
    const auto at = m->body.find("\nglassbox:" + name + " ");
    BOOST_TEST_REQUIRE(at != std::string::npos, name);
    return std::stod(m->body.substr(at + name.size() + 11));
  };
  auto wait_for = [&](httplib::Client& c, const std::string& name, double v) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(static_cast<int>(30 * gbtest::kTimeScale));
    while (value(c, name) != v && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return value(c, name) == v;
  };
  const std::vector<std::string> pool = {"--parallel", "2", "--queue", "1", "--attention", "paged:16", "--kv-pool", "1"};
  {
    ServerProcess s(pool);
    auto c = s.client();
    BOOST_TEST(value(c, "kv_blocks_total") == 51);
    std::vector<std::future<json>> got;
    for (int i = 0; i < 2; ++i)
      got.push_back(std::async(std::launch::async, [&, i] {
        auto hc = s.client();
        const json body = {{"prompt", prompt}, {"n_predict", 30}, {"seed", 70 + i}, {"ignore_eos", true}, {"stream", i == 1}};
        auto r = hc.Post("/completion", body.dump(), "application/json");
        if (!r || r->status != 200) return json{{"failed", r ? r->body : httplib::to_string(r.error())}};
        if (i == 0) return json::parse(r->body);
        const auto events = sse_events(r->body);  // the stream's pieces, then the finished object
        json last = events.back();
        std::string text;
        for (const auto& e : events) text += e.value("content", "");
        last["content"] = text;
        return last;
      }));
    for (int i = 0; i < 2; ++i) {
      const json served = got[i].get();
      BOOST_TEST_REQUIRE(!served.contains("failed"), served.dump());
      BOOST_TEST(served["tokens_predicted"] == 30);
      auto t = c.Get(served["glassbox"]["trace_url"].get<std::string>());
      BOOST_TEST_REQUIRE((t && t->status == 200));
      const auto dir = gbtest::temp_dir("serve-pool");
      const auto cli = run_cli(run_args({"-n", "30", "--seed", std::to_string(70 + i), "--ignore-eos", "--attention", "paged:16", "--prompt",
                                         prompt, "--trace", (dir / "t.jsonl").string()}));
      BOOST_TEST_REQUIRE(cli.rc == 0, cli.err);
      BOOST_TEST(as_run_prints(served["content"].get<std::string>()) == cli.out);
      std::istringstream a(t->body);
      std::ifstream b(dir / "t.jsonl");
      std::string la, lb;
      int n = 0;
      while (std::getline(a, la)) {
        BOOST_TEST_REQUIRE(static_cast<bool>(std::getline(b, lb)), "request " << i << ": the run's trace ends at line " << n);
        json ja = comparable(json::parse(la)), jb = comparable(json::parse(lb));
        BOOST_TEST(!ja.contains("batch"), "request " << i << " line " << n << " ran beside the other: " << la.substr(0, 200));
        if (ja.contains("prefix_reused")) {  // the second copied the first's prompt K/V (prefix reuse): less attention done
          ja.erase("prefix_reused");
          ja.erase("attention_dots");
          jb.erase("attention_dots");
        }
        if (ja.value("type", "") == "header")
          for (auto* j : {&ja, &jb}) {
            j->erase("model");
            j->erase("tokenizer");
          }
        BOOST_TEST(ja == jb, "request " << i << " line " << n << "\nserved: " << la.substr(0, 400) << "\nrun:    " << lb.substr(0, 400));
        ++n;
      }
      BOOST_TEST(!std::getline(b, lb), "the run's trace is longer");
      BOOST_TEST(n >= 30);
    }
    BOOST_TEST(wait_for(c, "kv_blocks_used", 0));
    BOOST_TEST(value(c, "kv_blocks_reserved") == 0);
  }
  {
    std::vector<std::string> paced = pool;
    for (const char* a : {"--pace", "40"}) paced.push_back(a);
    ServerProcess s(paced);
    auto c = s.client();
    const json body = {{"prompt", prompt}, {"n_predict", 30}, {"seed", 5}, {"ignore_eos", true}};
    auto first = std::async(std::launch::async, [&] {
      auto hc = s.client();
      return hc.Post("/completion", body.dump(), "application/json");
    });
    BOOST_TEST_REQUIRE(wait_for(c, "kv_blocks_reserved", 26));
    auto second = std::async(std::launch::async, [&] {
      auto hc = s.client();
      return hc.Post("/completion", body.dump(), "application/json");
    });
    BOOST_TEST_REQUIRE(wait_for(c, "requests_deferred", 1));  // a slot is free, but not the blocks
    BOOST_TEST(value(c, "kv_blocks_reserved") == 26);
    auto third = c.Post("/completion", body.dump(), "application/json");
    BOOST_TEST_REQUIRE(static_cast<bool>(third));
    BOOST_TEST(third->status == 503, third->body);
    auto r1 = first.get(), r2 = second.get();
    BOOST_TEST_REQUIRE((r1 && r2));
    BOOST_TEST(r1->status == 200);
    BOOST_TEST(r2->status == 200);
    BOOST_TEST(json::parse(r1->body)["content"] == json::parse(r2->body)["content"]);
    // A stream whose client hangs up after its first event: its blocks and reservation come back.
    const int fd = connect_loopback(s.port());
    BOOST_TEST_REQUIRE(fd >= 0);
    json streamed = body;
    streamed["stream"] = true;
    send_all(fd, http_post("/completion", streamed.dump()));
    const std::string got = read_until_first_event(fd, 30);
    BOOST_TEST(value(c, "kv_blocks_used") > 0);
    ::close(fd);
    BOOST_TEST_REQUIRE(got.find("data: ") != std::string::npos, got);
    BOOST_TEST(wait_for(c, "requests_cancelled_total", 1));
    BOOST_TEST(wait_for(c, "kv_blocks_used", 0));
    BOOST_TEST(wait_for(c, "kv_blocks_reserved", 0));
  }
  // Refused at start: a pool for a module that keeps no blocks.
  const auto bad = run_cli({"serve", "--model", gbtest::shared("models/stories260K.bin").string(), "--tokenizer",
                            gbtest::shared("models/tok512.bin").string(), "--port", "0", "--kv-pool", "4"});
  BOOST_TEST(bad.rc != 0);
  BOOST_TEST(bad.err.find("--kv-pool 4: attention 'kv-cache' keeps no blocks to share") != std::string::npos, bad.err);
}

BOOST_AUTO_TEST_SUITE_END()
