// `glassbox check SUITE.yaml`: a suite of golden cases (another engine's capture or a glassbox trace each),
// run in order or --jobs N at a time, one verdict line per case, JUnit XML and an HTML report for CI, and
// --record to write the goldens from a reference run. docs/golden-traces.md, "glassbox check".
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <set>
#include <thread>

#include "commands.hpp"
#include "engine_import.hpp"
#include "glassbox/batch.hpp"
#include "glassbox/traces/writer.hpp"
#include "interrupt.hpp"
#include "session.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/structured_input.hpp"
#include "glassbox/thread_group.hpp"
#include "glassbox/traces/diff.hpp"
#include "glassbox/traces/reader.hpp"
#include "yaml_input.hpp"

extern char** environ;

namespace fs = std::filesystem;

namespace glassbox::cli {

namespace {

struct Case {
  std::string name, model, tokenizer, prompt, sampler = "greedy", golden, from, profile;
  std::string toy_tokenizer;  // `model: toy`: the embedded model's tokenizer, unless the case names one
  std::optional<std::uint64_t> seed;
  int max_tokens = 16, trace_top = 20;
  bool prompt_given = false, replay = false, ignore_eos = false;
  traces::DiffOptions tol;
  int line = 0;
};

struct Outcome {
  enum Kind { Pass, Fail, Error } kind = Error;
  std::string message;            // the one line: why it failed, or the error
  std::string detail;             // the diff report (failures) or the log (errors)
  std::string golden_trace, new_trace;
  int first_step = -1;
  double seconds = 0;
  bool kept = false;  // --record: another engine's capture, left as it is
};

// Runs this glassbox binary with `args`; stdout and stderr go to `log`. Returns the exit status.
int run_self(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv = {"/proc/self/exe"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw Error(std::string("cannot start glassbox: ") + std::strerror(rc));
  // Polled, so that a SIGINT/SIGTERM sent to check alone (not its process group) reaches the case running
  // now: it is passed on, the case stops between steps, and check removes its work folder (interrupt.hpp).
  int status = 0;
  bool passed_on = false;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw Error(std::string("waitpid: ") + std::strerror(errno));
    if (const int sig = interrupt_signal(); sig && !passed_on) ::kill(pid, sig), passed_on = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The last non-empty line of a log (a glassbox error is one line).
std::string last_line(const std::string& log) {
  std::string t = log;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

// A file-sourced text shown in a message: control bytes and bytes of invalid UTF-8 as escapes (a NUL would
// cut the message, ESC would reach the terminal).
// The length of the valid UTF-8 sequence at s[i] (1..4), or 0 (RFC 3629: no overlongs, surrogates or > U+10FFFF).
std::size_t utf8_length(const std::string& s, std::size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const std::size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  bool ok = n > 0 && i + n <= s.size() && !(n == 2 && c < 0xC2) && c <= 0xF4;
  for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
  if (ok && n >= 3) {
    const unsigned c1 = static_cast<unsigned char>(s[i + 1]);
    ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0) && !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
  }
  return ok ? n : 0;
}

std::string shown(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const std::size_t n = utf8_length(s, i);
    const bool ok = n > 0;
    if (ok && n == 1 && c >= 0x20 && c != 0x7f) {
      out += s[i++];
    } else if (ok && n > 1) {
      out.append(s, i, n), i += n;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf, ++i;
    }
  }
  return out;
}

// A map key of the suite: a plain text (a complex key, `? [a, b]: ...`, is refused by line, not as an internal error).
std::string key_text(const YAML::Node& k, const std::string& path) {
  if (!k.IsScalar())
    throw InputError(path + ":" + std::to_string(k.Mark().line + 1) + ": a key that is not a text (a " +
                     (k.IsSequence() ? "list" : k.IsMap() ? "map" : "null") + " as a key; keys are names such as 'name' or 'golden')");
  return k.Scalar();
}

std::vector<Case> read_suite(const std::string& path) {
  const YAML::Node root = read_yaml_input<InputError>(path, "a YAML suite with a 'cases:' list");
  const fs::path dir = fs::path(path).parent_path();
  auto rel = [&](const std::string& p) { return fs::path(p).is_absolute() || dir.empty() ? p : (dir / p).lexically_normal().string(); };
  if (!root.IsMap() || !root["cases"]) throw InputError(path + ": expected a map with a 'cases:' list");
  for (const auto& kv : root) {
    const std::string key = key_text(kv.first, path);
    if (key != "cases") throw InputError(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": unknown key '" + shown(key) + "' (a suite has 'cases:')");
  }
  const YAML::Node cases = root["cases"];
  if (!cases.IsSequence() || cases.size() == 0) throw InputError(path + ": 'cases' must be a non-empty list");
  std::vector<Case> out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const YAML::Node c = cases[i];
    const int line = c.Mark().line + 1;
    const std::string w = path + ":" + std::to_string(line);
    if (!c.IsMap()) throw InputError(w + ": case " + std::to_string(i + 1) + " is not a map");
    Case k;
    k.line = line;
    auto str = [&](const YAML::Node& n, const std::string& key) {
      if (!n.IsScalar()) throw InputError(path + ":" + std::to_string(n.Mark().line + 1) + ": " + key + ": expected a text");
      return n.as<std::string>();
    };
    auto integer = [&](const YAML::Node& n, const std::string& key, long long lo, long long hi) {
      long long v = 0;
      try {
        v = n.as<long long>();
      } catch (const YAML::Exception&) {
        throw InputError(path + ":" + std::to_string(n.Mark().line + 1) + ": " + key + ": '" + (n.IsScalar() ? n.as<std::string>() : "?") + "' is not an integer");
      }
      if (v < lo || v > hi)
        throw InputError(path + ":" + std::to_string(n.Mark().line + 1) + ": " + key + ": " + std::to_string(v) + " (expected " + std::to_string(lo) + ".." + std::to_string(hi) + ")");
      return v;
    };
    auto number = [&](const YAML::Node& n, const std::string& key) {
      double v = 0;
      try {
        v = n.as<double>();
      } catch (const YAML::Exception&) {
        throw InputError(path + ":" + std::to_string(n.Mark().line + 1) + ": " + key + ": expected a number");
      }
      if (!(v >= 0 && v < HUGE_VAL)) throw InputError(path + ":" + std::to_string(n.Mark().line + 1) + ": " + key + ": expected a finite number >= 0");
      return v;
    };
    auto boolean = [&](const YAML::Node& n, const std::string& key) {
      try {
        return n.as<bool>();
      } catch (const YAML::Exception&) {
        throw InputError(path + ":" + std::to_string(n.Mark().line + 1) + ": " + key + ": expected true or false");
      }
    };
    bool has_tol = false;
    for (const auto& kv : c) {
      const std::string key = key_text(kv.first, path);
      const YAML::Node& v = kv.second;
      const std::string kw = "case '" + (c["name"] && c["name"].IsScalar() ? shown(c["name"].Scalar()) : std::to_string(i + 1)) + "'." + shown(key);
      if (key == "name") k.name = str(v, kw);
      else if (key == "model") {
        k.model = rel(str(v, kw));
        // `model: toy`: the embedded toy model (as `run` without --model), unless a file of that name is there.
        if (str(v, kw) == "toy" && !fs::exists(k.model)) {
          const auto def = default_model();
          if (!def) throw InputError(path + ":" + std::to_string(v.Mark().line + 1) + ": " + kw + ": toy: no embedded toy model is installed next to this glassbox");
          k.model = def->first.string(), k.toy_tokenizer = def->second.string();
        }
      }
      else if (key == "tokenizer") k.tokenizer = rel(str(v, kw));
      else if (key == "prompt") k.prompt = str(v, kw), k.prompt_given = true;
      else if (key == "prompt_file") {
        std::string why;
        auto t = read_structured_file(rel(str(v, kw)), why);
        if (!t) throw InputError(path + ":" + std::to_string(v.Mark().line + 1) + ": " + kw + ": " + rel(str(v, kw)) + ": " + why);
        k.prompt = *t, k.prompt_given = true;
      } else if (key == "sampler") {
        if (v.IsSequence()) {
          std::string chain;
          for (const auto& s : v) chain += (chain.empty() ? "" : ",") + str(s, kw);
          k.sampler = chain;
        } else k.sampler = str(v, kw);
      } else if (key == "seed") k.seed = static_cast<std::uint64_t>(integer(v, kw, 0, INT64_MAX));
      else if (key == "max_tokens") k.max_tokens = static_cast<int>(integer(v, kw, 1, 1 << 20));
      else if (key == "trace_top") k.trace_top = static_cast<int>(integer(v, kw, 1, 1000));
      else if (key == "golden") k.golden = rel(str(v, kw));
      else if (key == "from") k.from = str(v, kw);
      else if (key == "replay") k.replay = boolean(v, kw);
      else if (key == "ignore_eos") k.ignore_eos = boolean(v, kw);
      else if (key == "profile") {
        k.profile = str(v, kw);
        auto p = traces::diff_profile(k.profile);
        if (!p) {
          std::string all;
          for (const auto& n : traces::diff_profile_names()) all += (all.empty() ? "" : ", ") + n;
          throw InputError(path + ":" + std::to_string(v.Mark().line + 1) + ": " + kw + ": unknown profile '" + k.profile + "' (expected one of " + all + ")");
        }
        const traces::DiffOptions keep = k.tol;
        k.tol = *p;
        if (has_tol) k.tol.atol = keep.atol, k.tol.rtol = keep.rtol, k.tol.kl = keep.kl, k.tol.nmse = keep.nmse, k.tol.top_k = keep.top_k;
      } else if (key == "tolerances") {
        if (!v.IsMap()) throw InputError(path + ":" + std::to_string(v.Mark().line + 1) + ": " + kw + ": expected a map {atol, rtol, kl, nmse, top_n}");
        has_tol = true;
        for (const auto& t : v) {
          const std::string tk = key_text(t.first, path);
          if (tk == "atol") k.tol.atol = number(t.second, kw + ".atol");
          else if (tk == "rtol") k.tol.rtol = number(t.second, kw + ".rtol");
          else if (tk == "kl") k.tol.kl = number(t.second, kw + ".kl");
          else if (tk == "nmse") k.tol.nmse = number(t.second, kw + ".nmse");
          else if (tk == "top_n") k.tol.top_k = static_cast<int>(integer(t.second, kw + ".top_n", 0, 1000));
          else if (tk == "tokens_exact") k.tol.tokens_exact = boolean(t.second, kw + ".tokens_exact");
          else throw InputError(path + ":" + std::to_string(t.first.Mark().line + 1) + ": " + kw + ": unknown key '" + shown(tk) + "' (expected atol, rtol, kl, nmse, top_n, tokens_exact)");
        }
      } else {
        throw InputError(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": unknown key '" + shown(key) +
                         "' in a case (expected name, model, tokenizer, prompt, prompt_file, sampler, seed, max_tokens, golden, from, "
                         "replay, ignore_eos, trace_top, profile, tolerances)");
      }
    }
    for (const auto& [field, value] : {std::pair<const char*, const std::string&>{"name", k.name}, {"model", k.model}, {"golden", k.golden}})
      if (value.empty()) throw InputError(w + ": case " + std::to_string(i + 1) + " has no '" + field + "'");
    if (k.tokenizer.empty()) k.tokenizer = k.toy_tokenizer;
    // The name names files of the report and is written into its XML and HTML: printable UTF-8 only.
    if (shown(k.name) != k.name)
      throw InputError(w + ": case name '" + shown(k.name) + "' holds control characters or invalid UTF-8 (it names files of the report; use printable UTF-8)");
    if (!names.insert(k.name).second) throw InputError(w + ": a second case named '" + k.name + "'");
    if (k.name.find_first_of("/\\") != std::string::npos || k.name == "." || k.name == "..")
      throw InputError(w + ": case name '" + k.name + "' may not contain / or \\ (it names files of the report)");
    out.push_back(std::move(k));
  }
  return out;
}

bool is_glassbox_trace(const std::string& path) {
  if (not_a_regular_file(path)) return false;  // (the up-front checks name it; never block on a FIFO here)
  std::ifstream f(path, std::ios::binary);
  std::string line(4096, '\0');  // the schema is in the header's first bytes: never read a whole endless "line"
  f.read(line.data(), static_cast<std::streamsize>(line.size()));
  line.resize(static_cast<std::size_t>(f.gcount()));
  line = line.substr(0, line.find('\n'));
  // Any version: one this glassbox does not read goes to the reader, which names it (not to `trace import`).
  return line.find("\"" + std::string(traces::kSchemaPrefix)) != std::string::npos;
}

std::vector<std::string> run_args(const Case& c, const std::string& trace, bool full, const std::string& replay) {
  std::vector<std::string> a = {"run", "-m", c.model, "--trace", trace, "--trace-top", std::to_string(c.trace_top)};
  if (!c.tokenizer.empty()) a.insert(a.end(), {"--tokenizer", c.tokenizer});
  if (!replay.empty()) {
    a.insert(a.end(), {"--replay", replay});
  } else {
    a.insert(a.end(), {"-p", c.prompt, "-n", std::to_string(c.max_tokens), "--sampler", c.sampler});
  }
  if (c.seed) a.insert(a.end(), {"--seed", std::to_string(*c.seed)});
  if (full) a.insert(a.end(), {"--trace-level", "full"});
  if (c.ignore_eos) a.push_back("--ignore-eos");
  return a;
}

// A case made ready to run: its golden as a glassbox trace (imported from another engine's capture if need
// be) and the run that should reproduce it.
struct Ready {
  std::string golden;      // the golden as a glassbox trace
  traces::Trace g;         // read
  Case run;                // the case with the golden's prompt, length and seed where it names none
  bool golden_seed = false;
  std::string next;        // the new run's trace
  fs::path dir;            // the case's work folder
  std::vector<std::string> args() const { return run_args(run, next, g.full(), run.replay ? golden : ""); }
};

Ready prepare_case(const Case& c, const fs::path& work) {
  Ready r;
  r.dir = work / c.name;
  fs::create_directories(r.dir);
  r.golden = c.golden;
  if (!is_glassbox_trace(c.golden)) {
    r.golden = (r.dir / "golden.jsonl").string();
    std::vector<std::string> args = {"trace", "import", c.golden, "-m", c.model, "-o", r.golden, "--sampler", c.sampler};
    if (!c.tokenizer.empty()) args.insert(args.end(), {"--tokenizer", c.tokenizer});
    if (!c.from.empty()) args.insert(args.end(), {"--from", c.from});
    if (c.prompt_given) args.insert(args.end(), {"--prompt", c.prompt});
    const int rc = run_self(args, r.dir / "import.log");
    if (rc != 0) throw Error("import: " + last_line(read_text(r.dir / "import.log")));
  }
  r.g = traces::read_trace(r.golden);
  r.run = c;
  if (!c.prompt_given) r.run.prompt = r.g.header.prompt;  // the golden's own prompt
  if (!c.prompt_given && r.g.header.prompt.empty()) throw InputError("case '" + c.name + "' has no prompt and the golden names none");
  r.run.max_tokens = r.g.header.max_tokens;
  // No seed in the case: the golden's own (a sampled case recorded without one drew it; reusing it makes the
  // comparison the same run again, not a different draw that fails every time).
  r.golden_seed = !c.seed && !r.g.header.imported;
  if (r.golden_seed) r.run.seed = r.g.header.seed;
  r.next = (r.dir / "new.jsonl").string();
  return r;
}

// The verdict on a case whose run wrote r.next: the golden against it, step by step.
void judge_case(const Case& c, const Ready& r, Outcome& o) {
  o.golden_trace = r.golden;
  o.new_trace = r.next;
  const traces::Trace x = traces::read_trace(r.next);
  const traces::DiffResult d = traces::diff_traces(r.g, x, c.tol);
  std::ostringstream rep;
  traces::write_step_verdicts(rep, r.g, x, d);
  rep << "\n";
  traces::write_diff_report(rep, r.g, x, d, c.tol);
  o.detail = rep.str();
  o.first_step = d.first_divergent_step();
  double mlp = 0;
  for (const auto& s : d.steps) mlp = std::max(mlp, s.dlogprob);
  if (d.regression()) {
    o.kind = Outcome::Fail;
    o.message = d.regressions[0] + (d.regressions.size() > 1 ? " (+" + std::to_string(d.regressions.size() - 1) + " more)" : "");
  } else {
    o.kind = Outcome::Pass;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%zu steps, %d/%zu tokens agree, max |Δlogprob| %.3g", d.steps.size(), d.token_agree, d.steps.size(), mlp);
    o.message = buf;
    if (d.imported) o.message += ", " + r.g.header.imported.value_or(traces::TraceImport{}).dialect;
    if (r.golden_seed && c.sampler != "greedy") o.message += ", the golden's seed " + std::to_string(r.g.header.seed);
  }
}

Outcome run_case(const Case& c, const fs::path& work, bool record) {
  Outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (record) {
      const fs::path dir = work / c.name;
      fs::create_directories(dir);
      // The reference run's trace becomes the golden; another engine's capture is that engine's reference
      // and stays as it is.
      if (fs::exists(c.golden) && !is_glassbox_trace(c.golden)) {
        o.kind = Outcome::Pass, o.kept = true;
        o.message = c.golden + " is another engine's capture: left as it is (--record writes glassbox traces only)";
        o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return o;
      }
      if (!c.prompt_given) throw InputError("case '" + c.name + "' has no prompt: --record needs one");
      if (const fs::path parent = fs::path(c.golden).parent_path(); !parent.empty()) {
        std::error_code ec;
        fs::create_directories(parent, ec);
        if (ec) throw OutputError(parent.string() + ": cannot create the golden's folder: " + ec.message());
      }
      const int rc = run_self(run_args(c, c.golden, false, ""), dir / "record.log");
      if (rc != 0) throw Error(last_line(read_text(dir / "record.log")));
      const traces::Trace t = traces::read_trace(c.golden);
      o.kind = Outcome::Pass;
      o.message = "recorded " + c.golden + " (" + std::to_string(t.steps.size()) + " steps";
      // A drawing chain without seed: the run drew one, the golden records it and check reuses it.
      if (!c.seed && c.sampler != "greedy")
        o.message += ", seed " + std::to_string(t.header.seed) + " drawn: check reuses it";
      o.message += ")";
      o.new_trace = c.golden;
      return o;
    }
    const Ready r = prepare_case(c, work);
    o.golden_trace = r.golden;
    const int rc = run_self(r.args(), r.dir / "run.log");
    if (rc != 0) throw Error("run: " + last_line(read_text(r.dir / "run.log")));
    judge_case(c, r, o);
  } catch (const std::exception& e) {
    o.kind = Outcome::Error;
    o.message = e.what();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

// ---- check --batch: cases on one model decoded together (batched decode, glassbox/batch.hpp) ----
// A group's cases run in this process, each exactly as its `glassbox run` child would (the same options
// through the same table, its own chain, store and trace), their decode steps in one forward pass: the
// weights are read once per step for the group. The model is loaded (and hashed) once for the group.

// What `glassbox run ARGS` would take as its options.
RunOptions parse_run_args(const std::vector<std::string>& args) {
  CLI::App app;
  auto* cmd = app.add_subcommand("run");
  RunOptionsBinder binder(cmd, kRun);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes the arguments last first
  app.parse(reversed);
  RunOptions o = binder.finish();
  o.model_hash = true;  // the trace's header names the model's digest, as run's does
  o.defer_model_hash = false;
  return o;
}

// Whether a case can join a group: a sampled run of its own (a replay forces the golden's tokens through
// run's own path, so it keeps its process).
bool batchable(const Case& c) { return !c.replay; }

void run_group(const std::vector<Case>& cases, const std::vector<std::size_t>& group, const fs::path& work, std::vector<Outcome>& res) {
  const auto t0 = std::chrono::steady_clock::now();
  struct Member {
    std::size_t i;
    Ready r;
    RunOptions opt;
    std::unique_ptr<Session> s;
    GenerateOptions g;
    std::unique_ptr<traces::JsonlWriter> writer;
    InterruptSink interrupt;
    TeeSink sinks;
    std::vector<std::string> warnings;
    std::size_t id = 0;
    bool added = false;
  };
  std::vector<std::unique_ptr<Member>> members;
  auto fail = [&](std::size_t i, const std::string& what) {
    res[i].kind = Outcome::Error;
    res[i].message = what;
  };
  // ---- each case ready: its golden read, its run's options parsed as run parses them ----
  for (const std::size_t i : group) {
    try {
      auto m = std::make_unique<Member>();
      m->i = i;
      m->r = prepare_case(cases[i], work);
      res[i].golden_trace = m->r.golden;
      m->opt = parse_run_args(m->r.args());
      members.push_back(std::move(m));
    } catch (const std::exception& e) {
      fail(i, e.what());
    }
  }
  if (members.empty()) return;
  // ---- the sessions: the first loads the model; the others build their pipelines over it ----
  std::shared_ptr<const LoadedModel> loaded;
  for (auto& m : members) {
    try {
      if (!loaded) {
        m->s = open_session(m->opt);
        loaded = m->s->loaded;
      } else {
        check_plugins(*loaded->registry, model_spec(m->opt).tokenizer, m->opt, m->warnings);
        m->warnings.clear();  // said once, by build_pipeline
        m->s = build_pipeline(loaded, run_spec(m->opt), m->warnings);
      }
      m->g = generate_options(m->opt, *m->s);
      m->writer = std::make_unique<traces::JsonlWriter>(m->opt.trace, *m->s->tokenizer, false,
                                                        trace_writer_thread(m->opt.trace_level, m->opt.trace_attention.on ||
                                                                                                   m->opt.trace_lens != LensPoints::Off),
                                                        m->opt.trace_logits);
      m->sinks.add(m->writer.get());
      m->sinks.add(&m->interrupt);  // last: a step is recorded before the run stops after it
    } catch (const std::exception& e) {
      fail(m->i, "run: " + std::string(e.what()));
      m->s.reset();
    }
  }
  std::erase_if(members, [](const std::unique_ptr<Member>& m) { return !m->s; });
  if (members.empty()) return;
  // ---- the batch: every run's prefill on its own, their decode steps in one pass ----
  Transformer batch_model(members[0]->s->config, loaded->source->weights(), static_cast<int>(members.size()));
  SampledBatch batch(batch_model);
  for (auto& m : members) {
    try {
      const Tokenizer& tok = *m->s->tokenizer;
      m->id = batch.add({*m->s->model, tok, *m->s->attention, m->s->sampler.get()}, tok.encode(m->opt.prompt, tok.add_bos(), false),
                        m->opt.prompt, m->g, m->s->header, m->sinks, [](std::string_view) {});
      m->added = true;
    } catch (const std::exception& e) {
      fail(m->i, "run: " + std::string(e.what()));
      try {
        m->writer->error(e.what());
      } catch (const std::exception&) {
      }
    }
  }
  batch.run_all();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(members.size());
  // ---- each case's verdict, as after its own run ----
  for (auto& m : members) {
    Outcome& o = res[m->i];
    if (!m->added) continue;
    std::ofstream log(m->r.dir / "run.log");
    log << "[glassbox] batched with " << members.size() - 1 << " other case(s) of this suite on " << m->opt.model << "\n";
    for (const auto& w : m->warnings) log << "glassbox: warning: " << w << "\n";
    try {
      if (const auto err = batch.error(m->id)) {
        try {
          std::rethrow_exception(err);
        } catch (const Interrupted& e) {
          m->writer->interrupted(signal_name(e.signal));
          throw;
        } catch (const std::exception& e) {
          m->writer->error(e.what());
          throw Error("run: " + std::string(e.what()));
        }
      }
      m->writer.reset();  // flushed and closed
      judge_case(cases[m->i], m->r, o);
    } catch (const std::exception& e) {
      o.kind = Outcome::Error;
      o.message = e.what();
      log << "glassbox: error: " << e.what() << "\n";
    }
    o.seconds = seconds;
  }
}

std::string xml(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x80) {  // XML is UTF-8 here: a byte of invalid UTF-8 (a token's text cut mid-character) becomes U+FFFD
      const std::size_t n = utf8_length(s, i);
      if (n == 0) out += "\xEF\xBF\xBD";
      else out.append(s, i, n), i += n - 1;
      continue;
    }
    if (ch == '&') out += "&amp;";
    else if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '"') out += "&quot;";
    else if (c < 0x20 && ch != '\n' && ch != '\t') out += ' ';  // not allowed in XML 1.0
    else out += ch;
  }
  return out;
}

std::string junit(const std::string& suite, const std::vector<Case>& cases, const std::vector<Outcome>& res) {
  int fail = 0, err = 0;
  double total = 0;
  for (const auto& o : res) fail += o.kind == Outcome::Fail, err += o.kind == Outcome::Error, total += o.seconds;
  std::ostringstream x;
  char t[32];
  std::snprintf(t, sizeof t, "%.3f", total);
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"glassbox check\" tests=\"" << cases.size() << "\" failures=\"" << fail << "\" errors=\"" << err << "\" time=\"" << t << "\">\n";
  x << "  <testsuite name=\"" << xml(suite) << "\" tests=\"" << cases.size() << "\" failures=\"" << fail << "\" errors=\"" << err
    << "\" skipped=\"0\" time=\"" << t << "\">\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    std::snprintf(t, sizeof t, "%.3f", res[i].seconds);
    x << "    <testcase classname=\"" << xml(suite) << "\" name=\"" << xml(cases[i].name) << "\" time=\"" << t << "\"";
    if (res[i].kind == Outcome::Pass) {
      x << "/>\n";
      continue;
    }
    x << ">\n      <" << (res[i].kind == Outcome::Fail ? "failure" : "error") << " message=\"" << xml(res[i].message) << "\" type=\""
      << (res[i].kind == Outcome::Fail ? "regression" : "error") << "\">" << xml(res[i].detail.empty() ? res[i].message : res[i].detail) << "</"
      << (res[i].kind == Outcome::Fail ? "failure" : "error") << ">\n    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

std::string html_escape(const std::string& s) { return xml(s); }

// check's arguments.
struct CheckArgs {
  std::string suite, junit, html, work;
  int jobs = 1;
  int batch = 8;
  bool record = false;
};

// Every file the suite names is an input of this check, and so of the one output rule (file_io.hpp): no
// report, page or case trace may replace one, under any name. The cases' own processes read them, so
// check records them here, before it writes anything.
struct SuiteInputs {
  std::map<std::pair<dev_t, ino_t>, std::string> files;  // by device and inode: links and other spellings count

  SuiteInputs(const std::vector<Case>& cases, bool record) {
    for (const auto& c : cases) {
      add(c.model);
      add(c.tokenizer);
      if (!record) add(c.golden);
    }
  }
  void add(const std::string& f) {
    struct stat st {};
    if (f.empty() || ::stat(f.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    files.emplace(std::make_pair(st.st_dev, st.st_ino), f);
    note_input(f);
  }
  // Refuses `out` (what: the option or case that writes it) when it is one of the suite's files.
  void refuse_over(const fs::path& out, const std::string& what) const {
    struct stat st {};
    if (::stat(out.c_str(), &st) != 0) return;
    if (auto it = files.find({st.st_dev, st.st_ino}); it != files.end())
      throw OutputError(what + " " + out.string() + ": is the same file as the suite's " + it->second + ": refusing to overwrite an input");
  }
};

// A golden --record writes must not be another case's model or tokenizer, nor another case's golden.
void check_record_targets(const CheckArgs& a, const std::vector<Case>& cases, const SuiteInputs& inputs) {
  std::map<std::string, std::string> written;
  for (const auto& c : cases) {
    inputs.refuse_over(c.golden, "case '" + c.name + "': --record of golden");
    if (auto bad = not_a_regular_file(c.golden)) throw InputError(a.suite + ": case '" + c.name + "': golden " + c.golden + " " + *bad);
    std::error_code canon;
    const fs::path resolved = fs::weakly_canonical(c.golden, canon);
    const std::string key = canon ? fs::absolute(c.golden).lexically_normal().string() : resolved.string();
    if (auto [it, fresh] = written.emplace(key, c.name); !fresh)
      throw InputError(a.suite + ": cases '" + it->second + "' and '" + c.name + "' both record golden " + c.golden);
  }
}

// The folder the cases write in: --work, else --html's cases/, else a temporary folder that goes on every
// way out (an error, a refused report, an interrupt) with this object.
struct WorkFolder {
  fs::path dir;
  bool temp = false;

  explicit WorkFolder(const CheckArgs& a) {
    if (!a.work.empty()) dir = a.work;
    else if (!a.html.empty()) dir = fs::path(a.html) / "cases";
    else {
      std::string tmpl = (fs::temp_directory_path() / "glassbox-check-XXXXXX").string();
      if (!mkdtemp(tmpl.data())) throw OutputError(std::string("cannot make a temporary folder: ") + std::strerror(errno));
      dir = tmpl, temp = true;
    }
  }
  ~WorkFolder() {
    std::error_code ec;
    if (temp) fs::remove_all(dir, ec);
  }
  WorkFolder(const WorkFolder&) = delete;
  WorkFolder& operator=(const WorkFolder&) = delete;
};

// What a case writes in the work folder (its traces, logs, pages) must not be a file the suite names.
void refuse_case_outputs_over_inputs(const CheckArgs& a, const std::vector<Case>& cases, const fs::path& work, const SuiteInputs& inputs) {
  for (const auto& c : cases)
    for (const char* f : {"new.jsonl", "golden.jsonl", "run.log", "import.log", "record.log"})
      inputs.refuse_over(work / c.name / f, "--work");
  if (!a.html.empty())
    for (const auto& c : cases)
      for (const char* which : {"golden", "new"}) {
        inputs.refuse_over(fs::path(a.html) / (c.name + "-" + which + ".html"), "--html");
        inputs.refuse_over(work / (c.name + "-" + which + "-html.log"), "--work");
      }
}

// Up front, without a process each: a golden that is missing (10,000 of them must not take a minute),
// a FIFO (which would block), a device (/dev/zero never ends) or a folder. Such a case's outcome is an
// error; the result says which cases are ready to run.
std::vector<bool> check_goldens(const std::vector<Case>& cases, bool record, std::vector<Outcome>& res) {
  std::vector<bool> ready(cases.size(), true);
  for (std::size_t i = 0; i < cases.size() && !record; ++i) {
    const Case& c = cases[i];
    std::string why;
    struct stat st {};
    if (::stat(c.golden.c_str(), &st) != 0) why = "golden " + c.golden + ": " + std::strerror(errno);
    else if (auto bad = not_a_regular_file(c.golden)) why = "golden " + c.golden + ": " + *bad;
    else if (static_cast<std::uint64_t>(st.st_size) > kMaxStructuredInputBytes && !is_glassbox_trace(c.golden))
      why = "golden " + c.golden + ": " + std::to_string(st.st_size) + " bytes, more than an engine capture may hold (" +
            std::to_string(kMaxStructuredInputBytes >> 20) + " MiB)";
    if (!why.empty()) ready[i] = false, res[i].kind = Outcome::Error, res[i].message = why;
  }
  return ready;
}

// The ready cases, --jobs at once; a signal stops them between cases.
void run_cases(const CheckArgs& a, const std::vector<Case>& cases, const fs::path& work, const std::vector<bool>& ready,
               std::vector<Outcome>& res) {
  // Units of work: a case alone (in a process of its own), or up to --batch cases on one model and
  // tokenizer decoded together in this one, in the suite's order.
  std::vector<std::vector<std::size_t>> units;
  std::map<std::pair<std::string, std::string>, std::size_t> open_unit;  // (model, tokenizer) → its unit filling up
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (!ready[i]) continue;
    if (a.record || a.batch < 2 || !batchable(cases[i])) {
      units.push_back({i});
      continue;
    }
    const auto key = std::make_pair(cases[i].model, cases[i].tokenizer);
    const auto u = open_unit.find(key);
    if (u != open_unit.end() && static_cast<int>(units[u->second].size()) < a.batch) {
      units[u->second].push_back(i);
    } else {
      open_unit[key] = units.size();
      units.push_back({i});
    }
  }
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t u; (u = next++) < units.size();) {
      if (interrupt_signal()) break;
      if (units[u].size() == 1) res[units[u][0]] = run_case(cases[units[u][0]], work, a.record);
      else run_group(cases, units[u], work, res);
    }
  };
  ThreadGroup pool("--jobs " + std::to_string(a.jobs), [&] { next = units.size(); });  // (a refused thread: the rest stop)
  for (int j = 0; j < std::min<int>(a.jobs, static_cast<int>(units.size())); ++j) pool.start(worker);
  pool.join();
}

// The verdicts' counts.
struct Tally {
  int pass = 0, kept = 0, fail = 0, err = 0;
};

// One line per case on stdout (PASS, FAIL, ERROR; WROTE or KEPT with --record), then the counts.
Tally print_verdicts(const CheckArgs& a, const std::vector<Case>& cases, const std::vector<Outcome>& res) {
  Tally n;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Outcome& o = res[i];
    const char* tag = o.kept ? "KEPT " : o.kind == Outcome::Pass ? (a.record ? "WROTE" : "PASS ") : o.kind == Outcome::Fail ? "FAIL " : "ERROR";
    std::cout << tag << " " << cases[i].name << ": " << o.message << "\n";
    n.pass += o.kind == Outcome::Pass && !o.kept, n.kept += o.kept, n.fail += o.kind == Outcome::Fail, n.err += o.kind == Outcome::Error;
  }
  std::cout << "\n" << cases.size() << " cases: " << n.pass << (a.record ? " recorded" : " passed") << ", "
            << (n.kept ? std::to_string(n.kept) + " captures left as they are, " : std::string()) << n.fail << " regressed, " << n.err
            << " could not run\n";
  return n;
}

// --html: index.html, a row per case with its first differing step and links to both traces' viewer pages
// (made here by `trace html`), then the detail of each case that did not pass.
void write_html_report(const CheckArgs& a, const std::string& suite_name, const std::vector<Case>& cases, const std::vector<Outcome>& res,
                       const fs::path& work, const Tally& n) {
  std::ostringstream h;
  h << "<!doctype html><html><head><meta charset=\"utf-8\"><title>glassbox check: " << html_escape(suite_name)
    << "</title><style>body{font-family:sans-serif;margin:2em}td,th{padding:.3em .6em;text-align:left;vertical-align:top}"
       ".PASS{color:#060}.FAIL{color:#a00}.ERROR{color:#a60}pre{background:#f4f4f4;padding:1em;overflow-x:auto}</style></head><body>\n";
  h << "<h1>glassbox check: " << html_escape(suite_name) << "</h1><p>" << cases.size() << " cases: " << n.pass << " passed, " << n.fail
    << " regressed, " << n.err << " could not run</p>\n<table><tr><th>case</th><th>verdict</th><th>first differing step</th><th>traces</th><th></th></tr>\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Outcome& o = res[i];
    const char* tag = o.kind == Outcome::Pass ? "PASS" : o.kind == Outcome::Fail ? "FAIL" : "ERROR";
    std::string links;
    for (const auto& [which, trace] : {std::pair<const char*, const std::string&>{"golden", o.golden_trace}, {"new", o.new_trace}}) {
      if (trace.empty()) continue;
      const std::string page = cases[i].name + "-" + which + ".html";
      const int rc = run_self({"trace", "html", trace, "-o", (fs::path(a.html) / page).string()}, work / (cases[i].name + "-" + which + "-html.log"));
      if (rc == 0) links += "<a href=\"" + html_escape(page) + "\">" + which + "</a> ";
    }
    h << "<tr><td><a href=\"#" << html_escape(cases[i].name) << "\">" << html_escape(cases[i].name) << "</a></td><td class=\"" << tag << "\">" << tag
      << "</td><td>" << (o.first_step >= 0 ? "step " + std::to_string(o.first_step) : std::string("-")) << "</td><td>" << links
      << "</td><td>" << html_escape(o.message) << "</td></tr>\n";
  }
  h << "</table>\n";
  for (std::size_t i = 0; i < cases.size(); ++i)
    if (res[i].kind != Outcome::Pass)
      h << "<h2 id=\"" << html_escape(cases[i].name) << "\">" << html_escape(cases[i].name) << "</h2><p>" << html_escape(res[i].message) << "</p><pre>"
        << html_escape(res[i].detail) << "</pre>\n";
  h << "</body></html>\n";
  write_file_atomically(fs::path(a.html) / "index.html", h.str());
  std::cout << "wrote " << (fs::path(a.html) / "index.html").string() << " (and a viewer page per trace)\n";
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto a = std::make_shared<CheckArgs>();
  auto* cmd = app.add_subcommand("check", "run a suite of golden cases (other engines' captures or glassbox traces); exit 0 all pass, 1 a regression, 2 the suite could not run");
  cmd->add_option("SUITE", a->suite, "the suite (YAML: cases: [{name, model, prompt, sampler, seed, max_tokens, golden, profile}, ...])")->required();
  cmd->add_option("--jobs,-j", a->jobs, "cases run at once (verdicts do not depend on it)")->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--batch,-b", a->batch,
                  "cases on one model and tokenizer decoded together in this process, the weights read once per step for all "
                  "(verdicts and traces do not depend on it; 1: every case in a process of its own; --replay cases and --record always are)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--junit", a->junit, "write a JUnit XML report (GitLab, Jenkins, GitHub test-report actions read it)");
  cmd->add_option("--html", a->html, "write an HTML report into this folder: each failing case's first differing step, links to both traces in the viewer");
  cmd->add_option("--work", a->work, "keep each case's traces and logs in this folder (default: a temporary folder, removed afterwards; with --html, DIR/cases)");
  cmd->add_flag("--record", a->record, "write each case's golden from this glassbox's run (glassbox traces only), saying what it wrote");
  cmd->callback([a] {
    const std::vector<Case> cases = read_suite(a->suite);
    const SuiteInputs inputs(cases, a->record);
    if (!a->junit.empty()) inputs.refuse_over(a->junit, "--junit");
    if (!a->html.empty()) inputs.refuse_over(fs::path(a->html) / "index.html", "--html");
    if (a->record) check_record_targets(*a, cases, inputs);
    const WorkFolder work_folder(*a);
    const fs::path& work = work_folder.dir;
    std::error_code ec;
    fs::create_directories(work, ec);
    if (ec) throw OutputError(work.string() + ": cannot create: " + ec.message());
    refuse_case_outputs_over_inputs(*a, cases, work, inputs);
    // A signal stops the cases between steps (passed on to the running ones) and check between cases.
    install_interrupt_handlers();
    std::vector<Outcome> res(cases.size());
    const std::vector<bool> ready = check_goldens(cases, a->record, res);
    run_cases(*a, cases, work, ready, res);
    if (const int sig = interrupt_signal()) {
      // The cases' traces are not a verdict: no report is written, the temporary folder goes (work_folder).
      std::cerr << "[glassbox] check interrupted by " << signal_name(sig) << ": no verdict, no report\n";
      g_exit_code = 128 + sig;
      return;
    }
    const Tally n = print_verdicts(*a, cases, res);
    const std::string suite_name = fs::path(a->suite).stem().string();
    if (!a->junit.empty()) {
      write_file_atomically(a->junit, junit(suite_name, cases, res));
      std::cout << "wrote " << a->junit << " (JUnit XML)\n";
    }
    if (!a->html.empty()) write_html_report(*a, suite_name, cases, res, work, n);
    if (n.err) g_exit_code = 2;
    else if (n.fail) g_exit_code = 1;
  });
}

}  // namespace glassbox::cli
