// The run option table (cli/run_options.hpp): every entry reaches its option from the command line and from a
// YAML config with the same effect, the command line wins only when given, and --help and docs/options.md list it.
#define BOOST_TEST_MODULE options
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "glassbox/error.hpp"
#include "../cli/run_options.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
namespace bdata = boost::unit_test::data;
using glassbox::cli::RunOption;
using glassbox::cli::RunOptions;
using glassbox::cli::run_option_table;

namespace {

std::vector<std::string> keys(bool yaml_only) {
  std::vector<std::string> out;
  for (const auto& e : run_option_table())
    if (!yaml_only || e.in_yaml) out.push_back(e.key);
  return out;
}

glassbox::cli::RunCommand first_command(const RunOption& e) {
  for (unsigned bit = 1; bit <= e.commands; bit <<= 1)
    if (e.commands & bit) return static_cast<glassbox::cli::RunCommand>(bit);
  return glassbox::cli::kRun;
}

// The options a command line gives, through the table's CLI11 options (argv as typed).
RunOptions from_cli(glassbox::cli::RunCommand command, std::vector<std::string> args) {
  CLI::App app{"test"};
  glassbox::cli::RunOptionTableBinder binder(&app, command);
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  app.parse(args);
  return binder.merge();
}

std::vector<std::string> cli_args(const RunOption& e, const std::string& value) {
  if (e.kind == RunOption::Kind::Flag) return {e.long_flag()};
  return {e.long_flag(), value};
}

// Every entry's view of `o`: two RunOptions have the same effect when these are equal.
std::map<std::string, std::string> shown(const RunOptions& o) {
  std::map<std::string, std::string> m;
  for (const auto& e : run_option_table()) m[e.key] = e.show(o);
  return m;
}

std::string yaml_line(const std::string& key, const std::string& value) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << key << YAML::Value << value << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const glassbox::ConfigError& e) {
    return e.what();
  } catch (const CLI::ParseError& e) {
    return std::string("CLI11: ") + e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(table)

BOOST_AUTO_TEST_CASE(keys_and_flags_are_one_spelling) {
  std::set<std::string> seen_keys, seen_flags;
  for (const auto& e : run_option_table()) {
    BOOST_TEST(seen_keys.insert(e.key).second, "key " << e.key << " twice");
    std::string dashed = e.key;
    for (auto& c : dashed)
      if (c == '_') c = '-';
    BOOST_TEST(e.long_flag() == "--" + dashed, e.key << ": the YAML key is the long flag's name");
    std::string rest = e.flags;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      BOOST_TEST(seen_flags.insert(rest.substr(0, comma)).second, "flag " << rest.substr(0, comma) << " twice");
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    }
    BOOST_TEST(!e.help.empty(), e.key);
    BOOST_TEST(!e.example.empty(), e.key);
    BOOST_TEST(e.commands != 0u, e.key);
    BOOST_TEST(static_cast<bool>(e.set), e.key);
    BOOST_TEST(static_cast<bool>(e.show), e.key);
  }
}

// A default stated as a number is RunOptions' own.
BOOST_DATA_TEST_CASE(numeric_defaults_are_the_structs, bdata::make(keys(false)), key) {
  const RunOption& e = glassbox::cli::run_option(key);
  const std::string d = e.default_text.substr(0, e.default_text.find_first_of(";, "));
  if (d.empty() || d.find_first_not_of("0123456789.") != std::string::npos) return;
  BOOST_TEST(e.show(RunOptions{}) == d);
}

// The example reaches the option from the command line and from YAML (underscored and dashed keys),
// with the same effect on every option; the example differs from the default, so the entry did something.
BOOST_DATA_TEST_CASE(cli_and_yaml_have_the_same_effect, bdata::make(keys(true)), key) {
  const RunOption& e = glassbox::cli::run_option(key);
  const RunOptions cli = from_cli(first_command(e), cli_args(e, e.example));
  const RunOptions yaml = glassbox::cli::parse_run_config(yaml_line(e.key, e.example), "t.yaml");
  std::string dashed = e.key;
  for (auto& c : dashed)
    if (c == '_') c = '-';
  const RunOptions yaml_dashed = glassbox::cli::parse_run_config(yaml_line(dashed, e.example), "t.yaml");
  BOOST_TEST(e.show(cli) != e.show(RunOptions{}), key << " did not change from its default: " << e.show(cli));
  BOOST_TEST(shown(cli) == shown(yaml));
  BOOST_TEST(shown(yaml_dashed) == shown(yaml));
}

// Set in a config file and not on the command line, a value stays the config's; given on both, the
// command line's wins.
BOOST_DATA_TEST_CASE(the_command_line_wins_only_when_given, bdata::make(keys(true)), key) {
  const RunOption& e = glassbox::cli::run_option(key);
  const fs::path dir = gbtest::temp_dir("options-" + key);
  gbtest::write_file(dir / "c.yaml", yaml_line(e.key, e.example));
  const std::string config = (dir / "c.yaml").string();
  RunOptions expect = glassbox::cli::parse_run_config(yaml_line(e.key, e.example), "c.yaml");
  expect.config = config;
  BOOST_TEST(shown(from_cli(first_command(e), {"--config", config})) == shown(expect));
  if (e.kind == RunOption::Kind::Value) {
    // The command line's value over the config's: the same as the command line's alone.
    RunOptions over = from_cli(first_command(e), {"--config", config, e.long_flag(), e.example});
    RunOptions alone = from_cli(first_command(e), {e.long_flag(), e.example});
    alone.config = config;
    BOOST_TEST(shown(over) == shown(alone));
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(an_unknown_key_names_the_file_the_key_and_every_known_key) {
  const std::string m = error_of([] { glassbox::cli::parse_run_config("modle: x\n", "run.yaml"); });
  std::string known;
  for (const auto& k : keys(true)) known += (known.empty() ? "" : ", ") + k;
  BOOST_TEST(m == "run.yaml: modle: unknown option (known: " + known + ")");
  // --config is not a config key: a config does not name another
  BOOST_TEST(error_of([] { glassbox::cli::parse_run_config("config: other.yaml\n", "run.yaml"); }).find("run.yaml: config: unknown option") == 0u);
}

// A bad value is refused from either side, naming the flag or the file and key.
BOOST_AUTO_TEST_CASE(out_of_range_values_are_refused_from_both_sides) {
  struct Bad {
    std::string key, value, part;
  };
  for (const Bad& b : std::vector<Bad>{{"context", "0", "1..16777216"},
                                       {"threads", "1025", "1..1024"},
                                       {"max_tokens", "-1", ">= 0"},
                                       {"max_tokens", "99999999999999999999", "an integer"},
                                       {"trace_top", "0", "1..1000"},
                                       {"top_logprobs", "1001", "0..1000"},
                                       {"pace", "nan", "0..60000"},
                                       {"pace_tps", "-1", "0..1000000"},
                                       {"seed", "-1", "0..18446744073709551615"},
                                       {"trace_level", "verbose", "basic or full"},
                                       {"echo", "maybe", "true or false"},
                                       {"context_policy", "bogus", "truncate-left"},
                                       {"trace_attention", "x", "LAYER:HEAD"}}) {
    const RunOption& e = glassbox::cli::run_option(b.key);
    if (e.kind != RunOption::Kind::Flag) {
      const std::string cli = error_of([&] { from_cli(first_command(e), {e.long_flag(), b.value}); });
      BOOST_TEST(cli.find(e.long_flag()) != std::string::npos, b.key << ": " << cli);
      BOOST_TEST(cli.find(b.part) != std::string::npos, b.key << ": " << cli);
    }
    const std::string yaml = error_of([&] { glassbox::cli::parse_run_config(b.key + ": " + b.value + "\n", "bad.yaml"); });
    BOOST_TEST(yaml.find("bad.yaml: " + b.key) == 0u, b.key << ": " << yaml);
    BOOST_TEST(yaml.find(b.part) != std::string::npos, b.key << ": " << yaml);
  }
  BOOST_TEST(error_of([] { glassbox::cli::parse_run_config("max_tokens: 1\nmax-tokens: 2\n", "two.yaml"); }) ==
             "two.yaml: max_tokens: given twice");
  BOOST_TEST(error_of([] { glassbox::cli::parse_run_config("- a\n", "list.yaml"); }).find("list.yaml: expected a map") == 0u);
  BOOST_TEST(error_of([] { glassbox::cli::parse_run_config("a: [b\n", "broken.yaml"); }).find("broken.yaml: invalid YAML") == 0u);
}

// Structured YAML values the command line has no spelling for.
BOOST_AUTO_TEST_CASE(yaml_maps_and_lists) {
  const RunOptions o = glassbox::cli::parse_run_config(
      "sampler:\n  - {name: top-k, k: 3}\n  - temperature:0.5\nattention: {name: kv-cache, capacity: 64}\n"
      "tokenizer: {name: bpe, path: v.json}\nplugin_path: [a, b]\n", "c.yaml");
  BOOST_TEST(glassbox::cli::run_option("sampler").show(o) == "top-k(k=3),temperature(=0.5)");
  BOOST_TEST(o.attention.to_string() == "kv-cache(capacity=64)");
  BOOST_TEST(o.tokenizer.to_string() == "bpe(path=v.json)");
  BOOST_TEST(glassbox::cli::run_option("plugin_path").show(o) == "a,b");
  // The command line's plugin folders add to the config's; its tokenizer file replaces the map's path.
  const fs::path dir = gbtest::temp_dir("options-maps");
  gbtest::write_file(dir / "c.yaml", "tokenizer: {name: bpe, path: v.json}\nplugin_path: [a]\n");
  const RunOptions m = from_cli(glassbox::cli::kRun, {"--config", (dir / "c.yaml").string(), "--tokenizer", "w.json", "--plugin-path", "b"});
  BOOST_TEST(m.tokenizer.to_string() == "bpe(path=w.json)");
  BOOST_TEST(glassbox::cli::run_option("plugin_path").show(m) == "a,b");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(help_and_docs)

// Each command that takes an entry shows it in --help with the table's words.
BOOST_AUTO_TEST_CASE(help_lists_every_entry_of_each_command) {
  using namespace glassbox::cli;
  for (auto [bit, args] : std::vector<std::pair<RunCommand, std::vector<std::string>>>{
           {kRun, {"run", "--help"}}, {kChat, {"chat", "--help"}}, {kBench, {"bench", "--help"}},
           {kCompare, {"compare", "--help"}}, {kImport, {"trace", "import", "--help"}}}) {
    const auto r = gbtest::run_cli(args);
    BOOST_TEST_REQUIRE(r.rc == 0, r.err);
    std::string help;  // runs of spaces (CLI11's column alignment) collapsed
    for (char c : r.out)
      if (!(c == ' ' && !help.empty() && help.back() == ' ')) help += c;
    for (const auto& e : run_option_table()) {
      const bool shown = help.find(e.long_flag() + (e.kind == RunOption::Kind::Flag ? " " : " " + e.value_name)) != std::string::npos &&
                         help.find(e.help_line()) != std::string::npos;
      BOOST_TEST(shown == ((e.commands & bit) != 0), args[0] << " --help and " << e.key << " (commands " << e.commands << ")");
    }
  }
}

// A long option spelled by several commands has one short flag in all of them (or none in all): `-t` was
// --threads in serve and --tokenizer everywhere else, serve's tokenizer `-z` (#40). Read from every
// command's --help, so options outside the table are held to it too.
BOOST_AUTO_TEST_CASE(a_shared_long_option_has_the_same_short_flag_in_every_command) {
  const std::vector<std::vector<std::string>> commands = {
      {"run"},     {"tokenize"}, {"plugins"}, {"bench"},          {"explain"},       {"compare"},      {"convert"},
      {"inspect"}, {"synth"},    {"chat"},    {"serve"},          {"check"},         {"trace", "validate"}, {"trace", "diff"},
      {"trace", "render"}, {"trace", "html"}, {"trace", "lens"}, {"trace", "import"}};
  std::map<std::string, std::map<std::string, std::string>> shorts;  // long → command → short ("" none)
  for (auto args : commands) {
    const std::string name = args.size() > 1 ? args[0] + " " + args[1] : args[0];
    args.push_back("--help");
    const auto r = gbtest::run_cli(args);
    BOOST_TEST_REQUIRE(r.rc == 0, name << ": " << r.err);
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      // CLI11's option lines: "  -m,--model FILE   …" or "  --seed N   …"
      const auto at = line.find_first_not_of(' ');
      if (at == std::string::npos || at == 0 || line[at] != '-') continue;
      std::string s, l;
      if (line.compare(at, 2, "--") == 0) l = line.substr(at, line.find_first_of(" =", at) - at);
      else if (line.size() > at + 3 && line[at + 2] == ',' && line.compare(at + 3, 2, "--") == 0) {
        s = line.substr(at, 2);
        l = line.substr(at + 3, line.find_first_of(" =", at + 3) - at - 3);
      } else continue;
      shorts[l][name] = s;
    }
  }
  BOOST_TEST_REQUIRE(shorts.count("--tokenizer") == 1);
  BOOST_TEST_REQUIRE(shorts["--tokenizer"].size() >= 5, "the parser read too few commands' options");
  for (const auto& [l, by] : shorts) {
    std::set<std::string> seen;
    std::string where;
    for (const auto& [c, s] : by) {
      seen.insert(s);
      where += " " + c + ":" + (s.empty() ? "none" : s);
    }
    BOOST_TEST(seen.size() == 1u, l << " has different short flags:" << where);
  }
}

// docs/options.md's table is the one run_options_markdown() makes (GLASSBOX_UPDATE_DOCS=1 rewrites it:
// tools/update-options.sh).
BOOST_AUTO_TEST_CASE(docs_options_md_lists_the_table) {
  const fs::path doc = fs::path(GLASSBOX_SOURCE_DIR) / "docs" / "options.md";
  const std::string begin = "<!-- options-table: generated from cli/run_options.cpp by tools/update-options.sh -->\n";
  const std::string end = "<!-- /options-table -->";
  std::string text = gbtest::read_file(doc);
  const auto b = text.find(begin), e = text.find(end);
  BOOST_TEST_REQUIRE(b != std::string::npos, doc << " has no " << begin);
  BOOST_TEST_REQUIRE(e != std::string::npos, doc << " has no " << end);
  const std::string now = glassbox::cli::run_options_markdown();
  const std::string recorded = text.substr(b + begin.size(), e - b - begin.size());
  if (const char* u = std::getenv("GLASSBOX_UPDATE_DOCS"); u && std::string(u) == "1" && recorded != now) {
    text.replace(b + begin.size(), e - b - begin.size(), now);
    gbtest::write_file(doc, text);
    BOOST_TEST_MESSAGE("rewrote the table in " << doc);
    return;
  }
  BOOST_TEST(recorded == now, doc << " differs from the table (tools/update-options.sh rewrites it)");
  // every YAML key is named in the docs, so a reader of a config can look it up
  for (const auto& k : keys(true)) BOOST_TEST(recorded.find("`" + k + "`") != std::string::npos, k);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(errors)

// An error starts on a line of its own: after streamed text that ended mid-line a newline is added, and
// nothing otherwise (no blank line before an error that follows no output).
BOOST_AUTO_TEST_CASE(a_blank_line_before_an_error_only_after_text_left_mid_line) {
  const auto plain = gbtest::run_cli({"run", "--context", "0"});
  BOOST_TEST(plain.rc == 2);
  BOOST_TEST(plain.err.rfind("glassbox: error: --context = 0", 0) == 0u, plain.err);
  // --echo streams the prompt; the first step then fails (a temperature that overflows the logits)
  const auto mid = gbtest::run_cli({"run", "--prompt", "The weather", "--echo", "--sampler", "temperature:1.5e-38,dist"});
  BOOST_TEST(mid.rc == 2, mid.err);
  BOOST_TEST(mid.out == "The weather");
  BOOST_TEST(mid.err.rfind("\nglassbox: error: ", 0) == 0u, mid.err);
}

// A prompt piped on stdin is run's (issue 13); chat reads its turns from stdin and must still get them.
BOOST_AUTO_TEST_CASE(chat_reads_its_turns_from_a_pipe) {
  const fs::path dir = gbtest::temp_dir("options-chat");
  const std::string out = (dir / "out").string();
  const std::string cmd = "printf 'The weather today is\\nOnce upon a time\\n' | timeout 60 '" + std::string(GLASSBOX_BIN) +
                          "' chat --max-tokens 3 --seed 1 >'" + out + "' 2>/dev/null";
  BOOST_TEST_REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string text = gbtest::read_file(out);
  BOOST_TEST(std::count(text.begin(), text.end(), '\n') == 2, "two replies expected: '" << text << "'");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
