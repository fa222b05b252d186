// `glassbox check SUITE.yaml`: a suite of golden cases (another engine's capture or a glassbox trace each),
// run in order or --jobs N at a time, one verdict line per case, JUnit XML and an HTML report for CI, and
// --record to write the goldens from a reference run. docs/golden-traces.md, "glassbox check".
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <set>
#include <thread>

#include "commands.hpp"
#include "engine_import.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
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
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error(std::string("waitpid: ") + std::strerror(errno));
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

std::vector<Case> read_suite(const std::string& path) {
  const YAML::Node root = read_yaml_input<InputError>(path, "a YAML suite with a 'cases:' list");
  const fs::path dir = fs::path(path).parent_path();
  auto rel = [&](const std::string& p) { return fs::path(p).is_absolute() || dir.empty() ? p : (dir / p).lexically_normal().string(); };
  if (!root.IsMap() || !root["cases"]) throw InputError(path + ": expected a map with a 'cases:' list");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (key != "cases") throw InputError(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": unknown key '" + key + "' (a suite has 'cases:')");
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
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      const std::string kw = "case '" + (c["name"] && c["name"].IsScalar() ? c["name"].as<std::string>() : std::to_string(i + 1)) + "'." + key;
      if (key == "name") k.name = str(v, kw);
      else if (key == "model") k.model = rel(str(v, kw));
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
          const std::string tk = t.first.as<std::string>();
          if (tk == "atol") k.tol.atol = number(t.second, kw + ".atol");
          else if (tk == "rtol") k.tol.rtol = number(t.second, kw + ".rtol");
          else if (tk == "kl") k.tol.kl = number(t.second, kw + ".kl");
          else if (tk == "nmse") k.tol.nmse = number(t.second, kw + ".nmse");
          else if (tk == "top_n") k.tol.top_k = static_cast<int>(integer(t.second, kw + ".top_n", 0, 1000));
          else if (tk == "tokens_exact") k.tol.tokens_exact = boolean(t.second, kw + ".tokens_exact");
          else throw InputError(path + ":" + std::to_string(t.first.Mark().line + 1) + ": " + kw + ": unknown key '" + tk + "' (expected atol, rtol, kl, nmse, top_n, tokens_exact)");
        }
      } else {
        throw InputError(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": unknown key '" + key +
                         "' in a case (expected name, model, tokenizer, prompt, prompt_file, sampler, seed, max_tokens, golden, from, "
                         "replay, ignore_eos, trace_top, profile, tolerances)");
      }
    }
    for (const auto& [field, value] : {std::pair<const char*, const std::string&>{"name", k.name}, {"model", k.model}, {"golden", k.golden}})
      if (value.empty()) throw InputError(w + ": case " + std::to_string(i + 1) + " has no '" + field + "'");
    if (!names.insert(k.name).second) throw InputError(w + ": a second case named '" + k.name + "'");
    if (k.name.find_first_of("/\\") != std::string::npos || k.name == "." || k.name == "..")
      throw InputError(w + ": case name '" + k.name + "' may not contain / or \\ (it names files of the report)");
    out.push_back(std::move(k));
  }
  return out;
}

bool is_glassbox_trace(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string line;
  std::getline(f, line);
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

Outcome run_case(const Case& c, const fs::path& work, bool record) {
  Outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const fs::path dir = work / c.name;
    fs::create_directories(dir);
    if (record) {
      // The reference run's trace becomes the golden.
      if (fs::exists(c.golden) && !is_glassbox_trace(c.golden))
        throw InputError("golden " + c.golden + " is another engine's output: --record writes glassbox traces only (point golden: at a .jsonl)");
      if (!c.prompt_given) throw InputError("case '" + c.name + "' has no prompt: --record needs one");
      const int rc = run_self(run_args(c, c.golden, false, ""), dir / "record.log");
      if (rc != 0) throw Error(last_line(read_text(dir / "record.log")));
      o.kind = Outcome::Pass;
      o.message = "recorded " + c.golden + " (" + std::to_string(traces::read_trace(c.golden).steps.size()) + " steps)";
      o.new_trace = c.golden;
      return o;
    }
    // The golden as a trace: itself, or imported from the other engine's dialect.
    std::string golden = c.golden;
    if (!is_glassbox_trace(c.golden)) {
      golden = (dir / "golden.jsonl").string();
      std::vector<std::string> args = {"trace", "import", c.golden, "-m", c.model, "-o", golden, "--sampler", c.sampler};
      if (!c.tokenizer.empty()) args.insert(args.end(), {"--tokenizer", c.tokenizer});
      if (!c.from.empty()) args.insert(args.end(), {"--from", c.from});
      if (c.prompt_given) args.insert(args.end(), {"--prompt", c.prompt});
      const int rc = run_self(args, dir / "import.log");
      if (rc != 0) throw Error("import: " + last_line(read_text(dir / "import.log")));
    }
    o.golden_trace = golden;
    const traces::Trace g = traces::read_trace(golden);
    Case run = c;
    if (!c.prompt_given) run.prompt = g.header.prompt;  // the golden's own prompt
    if (!c.prompt_given && g.header.prompt.empty()) throw InputError("case '" + c.name + "' has no prompt and the golden names none");
    run.max_tokens = g.header.max_tokens;
    const std::string next = (dir / "new.jsonl").string();
    const int rc = run_self(run_args(run, next, g.full(), c.replay ? golden : ""), dir / "run.log");
    if (rc != 0) throw Error("run: " + last_line(read_text(dir / "run.log")));
    o.new_trace = next;
    const traces::Trace x = traces::read_trace(next);
    const traces::DiffResult r = traces::diff_traces(g, x, c.tol);
    std::ostringstream rep;
    traces::write_step_verdicts(rep, g, x, r);
    rep << "\n";
    traces::write_diff_report(rep, g, x, r, c.tol);
    o.detail = rep.str();
    o.first_step = r.first_divergent_step();
    double mlp = 0;
    for (const auto& s : r.steps) mlp = std::max(mlp, s.dlogprob);
    if (r.regression()) {
      o.kind = Outcome::Fail;
      o.message = r.regressions[0] + (r.regressions.size() > 1 ? " (+" + std::to_string(r.regressions.size() - 1) + " more)" : "");
    } else {
      o.kind = Outcome::Pass;
      char buf[160];
      std::snprintf(buf, sizeof buf, "%zu steps, %d/%zu tokens agree, max |Δlogprob| %.3g", r.steps.size(), r.token_agree, r.steps.size(), mlp);
      o.message = buf;
      if (r.imported) o.message += ", " + g.header.imported.value_or(traces::TraceImport{}).dialect;
    }
  } catch (const std::exception& e) {
    o.kind = Outcome::Error;
    o.message = e.what();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

std::string xml(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
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

}  // namespace

void add_check_command(CLI::App& app) {
  struct Args {
    std::string suite, junit, html, work;
    int jobs = 1;
    bool record = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("check", "run a suite of golden cases (other engines' captures or glassbox traces); exit 0 all pass, 1 a regression, 2 the suite could not run");
  cmd->add_option("SUITE", a->suite, "the suite (YAML: cases: [{name, model, prompt, sampler, seed, max_tokens, golden, profile}, ...])")->required();
  cmd->add_option("--jobs,-j", a->jobs, "cases run at once (verdicts do not depend on it)")->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--junit", a->junit, "write a JUnit XML report (GitLab, Jenkins, GitHub test-report actions read it)");
  cmd->add_option("--html", a->html, "write an HTML report into this folder: each failing case's first differing step, links to both traces in the viewer");
  cmd->add_option("--work", a->work, "keep each case's traces and logs in this folder (default: a temporary folder, removed afterwards; with --html, DIR/cases)");
  cmd->add_flag("--record", a->record, "write each case's golden from this glassbox's run (glassbox traces only), saying what it wrote");
  cmd->callback([a] {
    const std::vector<Case> cases = read_suite(a->suite);
    fs::path work;
    bool temp = false;
    if (!a->work.empty()) work = a->work;
    else if (!a->html.empty()) work = fs::path(a->html) / "cases";
    else {
      std::string tmpl = (fs::temp_directory_path() / "glassbox-check-XXXXXX").string();
      if (!mkdtemp(tmpl.data())) throw OutputError(std::string("cannot make a temporary folder: ") + std::strerror(errno));
      work = tmpl, temp = true;
    }
    std::error_code ec;
    fs::create_directories(work, ec);
    if (ec) throw OutputError(work.string() + ": cannot create: " + ec.message());
    std::vector<Outcome> res(cases.size());
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      for (std::size_t i; (i = next++) < cases.size();) res[i] = run_case(cases[i], work, a->record);
    };
    ThreadGroup pool("--jobs " + std::to_string(a->jobs), [&] { next = cases.size(); });  // (a refused thread: the rest stop)
    for (int j = 0; j < std::min<int>(a->jobs, static_cast<int>(cases.size())); ++j) pool.start(worker);
    pool.join();
    int pass = 0, fail = 0, err = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Outcome& o = res[i];
      const char* tag = o.kind == Outcome::Pass ? (a->record ? "WROTE" : "PASS ") : o.kind == Outcome::Fail ? "FAIL " : "ERROR";
      std::cout << tag << " " << cases[i].name << ": " << o.message << "\n";
      pass += o.kind == Outcome::Pass, fail += o.kind == Outcome::Fail, err += o.kind == Outcome::Error;
    }
    std::cout << "\n" << cases.size() << " cases: " << pass << (a->record ? " recorded" : " passed") << ", " << fail << " regressed, " << err << " could not run\n";
    const std::string suite_name = fs::path(a->suite).stem().string();
    if (!a->junit.empty()) {
      write_file_atomically(a->junit, junit(suite_name, cases, res));
      std::cout << "wrote " << a->junit << " (JUnit XML)\n";
    }
    if (!a->html.empty()) {
      std::ostringstream h;
      h << "<!doctype html><html><head><meta charset=\"utf-8\"><title>glassbox check: " << html_escape(suite_name)
        << "</title><style>body{font-family:sans-serif;margin:2em}td,th{padding:.3em .6em;text-align:left;vertical-align:top}"
           ".PASS{color:#060}.FAIL{color:#a00}.ERROR{color:#a60}pre{background:#f4f4f4;padding:1em;overflow-x:auto}</style></head><body>\n";
      h << "<h1>glassbox check: " << html_escape(suite_name) << "</h1><p>" << cases.size() << " cases: " << pass << " passed, " << fail
        << " regressed, " << err << " could not run</p>\n<table><tr><th>case</th><th>verdict</th><th>first differing step</th><th>traces</th><th></th></tr>\n";
      for (std::size_t i = 0; i < cases.size(); ++i) {
        const Outcome& o = res[i];
        const char* tag = o.kind == Outcome::Pass ? "PASS" : o.kind == Outcome::Fail ? "FAIL" : "ERROR";
        std::string links;
        for (const auto& [which, trace] : {std::pair<const char*, const std::string&>{"golden", o.golden_trace}, {"new", o.new_trace}}) {
          if (trace.empty()) continue;
          const std::string page = cases[i].name + "-" + which + ".html";
          const int rc = run_self({"trace", "html", trace, "-o", (fs::path(a->html) / page).string()}, work / (cases[i].name + "-" + which + "-html.log"));
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
      write_file_atomically(fs::path(a->html) / "index.html", h.str());
      std::cout << "wrote " << (fs::path(a->html) / "index.html").string() << " (and a viewer page per trace)\n";
    }
    if (temp) fs::remove_all(work, ec);
    if (err) g_exit_code = 2;
    else if (fail) g_exit_code = 1;
  });
}

}  // namespace glassbox::cli
