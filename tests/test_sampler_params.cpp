// Every sampler parameter on the command line: `NAME:key=value;key=value` names any parameter, and
// each one set that way equals the same set in a YAML config (data-driven over what the registry's
// stages declare, so a new stage or parameter is covered without a line here), plus the errors.
#define BOOST_TEST_MODULE sampler_params
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <map>
#include <sstream>

#include <CLI/CLI.hpp>

#include "glassbox/error.hpp"
#include "glassbox/registry.hpp"
#include "../cli/run_options.hpp"
#include "registry_fixture.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
using namespace glassbox;
using glassbox::cli::RunOptions;

namespace {

using gbtest::registry;  // the default registry, loaded once (registry_fixture.hpp)

const PluginEntry& entry(const std::string& stage) {
  const auto* e = registry().find(PluginKind::Sampler, stage);
  BOOST_TEST_REQUIRE(e != nullptr, "no sampler '" << stage << "'");
  return *e;
}

// Values for string parameters, which no range describes. A new string parameter fails the test
// below until it has one here.
const std::map<std::string, std::string> kStringSamples{
    {"logit-bias/bias", "3=-1.5;7=-inf"},
    {"dry/breakers", "x|\\n|a b"},
    {"grammar/file", GLASSBOX_SOURCE_DIR "/docs/grammars/yesno.gbnf"},
    {"grammar/gbnf", "root ::= \"a\" [b-c]* # ab"},
    {"grammar/schema_file", GLASSBOX_SOURCE_DIR "/docs/grammars/answer.schema.json"},
    {"grammar/json_schema", "{\"type\": \"boolean\"}"},
};

// A value for `p` other than its default that its stage accepts (as text, as a user types it).
std::string sample_value(const std::string& stage, const ParamSpec& p) {
  switch (p.type) {
    case ParamType::Bool: return p.default_value == "true" ? "false" : "true";
    case ParamType::String: {
      auto it = kStringSamples.find(stage + "/" + p.name);
      BOOST_TEST_REQUIRE((it != kStringSamples.end()), "no sample value for string parameter " << stage << "/" << p.name);
      return it->second;
    }
    case ParamType::Int: {
      const long long def = std::stoll(p.default_value);
      for (long long v : {def + 1, def - 1, def + 2})
        if ((!p.min || v >= *p.min) && (!p.max || v <= *p.max)) return std::to_string(v);
      BOOST_FAIL("no integer value for " << stage << "/" << p.name);
      return "";
    }
    case ParamType::Float: {
      const double def = std::stod(p.default_value);
      double v = (p.min && p.max) ? (*p.min + *p.max) / 2 : p.min ? *p.min + 0.75 : def + 0.75;
      if (v == def) v = p.max ? (v + *p.max) / 2 : v + 0.25;
      std::ostringstream os;
      os << v;
      return os.str();
    }
  }
  return "";
}

// ("stage/param") for every declared parameter of every sampler.
std::vector<std::string> every_parameter() {
  std::vector<std::string> out;
  for (const auto& e : registry().list())
    if (e.kind == PluginKind::Sampler)
      for (const auto& p : e.info.params) out.push_back(e.info.name + "/" + p.name);
  return out;
}
std::vector<std::string> stages_with_parameters() {
  std::vector<std::string> out;
  for (const auto& e : registry().list())
    if (e.kind == PluginKind::Sampler && !e.info.params.empty()) out.push_back(e.info.name);
  return out;
}

// The sampler chain `run --sampler TEXT` gives, through the option table.
std::vector<PluginSpec> from_command_line(const std::string& text) {
  CLI::App app{"test"};
  glassbox::cli::RunOptionTableBinder binder(&app, glassbox::cli::kRun);
  std::vector<std::string> args{"--sampler", text};
  std::reverse(args.begin(), args.end());
  app.parse(args);
  return binder.merge().sampler;
}

// YAML single-quoted scalar ('' is a quote; backslashes are literal).
std::string yq(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

Params resolved(const std::vector<PluginSpec>& specs) {
  BOOST_TEST_REQUIRE(specs.size() == 1u);
  auto made = registry().make_sampler(specs[0]);  // the stage's own checks accept it too
  return made->params();
}

// CLI text "k1=v1;k2=v2" with ';' and ',' escaped inside values.
std::string escaped(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == ';' || c == ',') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

BOOST_DATA_TEST_CASE(each_parameter_on_the_command_line_equals_yaml, bdata::make(every_parameter()), key) {
  const std::string stage = key.substr(0, key.find('/')), name = key.substr(key.find('/') + 1);
  const auto& info = entry(stage).info;
  const ParamSpec& spec = *std::find_if(info.params.begin(), info.params.end(), [&](const ParamSpec& p) { return p.name == name; });
  const std::string value = sample_value(stage, spec);
  const Params cli = resolved(from_command_line(stage + ":" + name + "=" + escaped(value)));
  const Params yaml_map = resolved(glassbox::cli::parse_run_config("sampler:\n  - {name: " + stage + ", " + name + ": " + yq(value) + "}\n", "t.yaml").sampler);
  const Params yaml_str = resolved(glassbox::cli::parse_run_config("sampler: " + yq(stage + ":" + name + "=" + escaped(value)) + "\n", "t.yaml").sampler);
  BOOST_TEST(cli.values() == yaml_map.values(), cli.to_string() << " vs " << yaml_map.to_string());
  BOOST_TEST(yaml_str.values() == yaml_map.values(), yaml_str.to_string() << " vs " << yaml_map.to_string());
  // The value arrived: it is what the spec parses the text to, and not the default.
  BOOST_TEST(format_param_value(cli.values().at(name)) == format_param_value(parse_param("t", spec, value)));
  if (spec.type != ParamType::String || !spec.default_value.empty())
    BOOST_TEST(format_param_value(cli.values().at(name)) != format_param_value(parse_param("t", spec, spec.default_value)));
}

BOOST_DATA_TEST_CASE(all_parameters_at_once_equal_yaml, bdata::make(stages_with_parameters()), stage) {
  const auto& info = entry(stage).info;
  std::string cli_text = stage + ":", yaml = "sampler:\n  - {name: " + stage;
  for (const auto& p : info.params) {
    const std::string v = sample_value(stage, p);
    cli_text += (cli_text.back() == ':' ? "" : ";") + p.name + "=" + escaped(v);
    yaml += ", " + p.name + ": " + yq(v);
  }
  yaml += "}\n";
  // grammar's parameters are alternatives (exactly one is given): its stage cannot be built with all of
  // them, so its parameters are compared as the registry resolves them.
  auto values = [&](const std::vector<PluginSpec>& specs) {
    return stage == "grammar" ? registry().resolve(PluginKind::Sampler, specs.at(0)) : resolved(specs);
  };
  const Params cli = values(from_command_line(cli_text));
  const Params y = values(glassbox::cli::parse_run_config(yaml, "t.yaml").sampler);
  BOOST_TEST(cli.values() == y.values(), cli.to_string() << " vs " << y.to_string());
  BOOST_TEST(cli.values().size() == info.params.size());
}

BOOST_AUTO_TEST_CASE(main_value_form_is_unchanged) {
  // NAME:VALUE still sets the main parameter; logit-bias keeps its ID=BIAS;... form (ids are not names).
  auto specs = parse_plugin_chain("top-k:40,logit-bias:13=-inf;42=2.5,repetition-penalty:penalty=1.3;last_n=32", "sampler");
  BOOST_TEST_REQUIRE(specs.size() == 3u);
  BOOST_TEST(registry().resolve(PluginKind::Sampler, specs[0]).get_int("k") == 40);
  BOOST_TEST(registry().resolve(PluginKind::Sampler, specs[1]).get_string("bias") == "13=-inf;42=2.5");
  const Params rp = registry().resolve(PluginKind::Sampler, specs[2]);
  BOOST_TEST(rp.get_float("penalty") == 1.3);
  BOOST_TEST(rp.get_int("last_n") == 32);
  // An escaped ',' stays inside its stage; an escaped ';' inside its value.
  auto esc = parse_plugin_chain("dry:multiplier=0.8;breakers=\\,|\\;,top-k:3", "sampler");
  BOOST_TEST_REQUIRE(esc.size() == 2u);
  BOOST_TEST(registry().resolve(PluginKind::Sampler, esc[0]).get_string("breakers") == ",|;");
  BOOST_TEST(registry().resolve(PluginKind::Sampler, esc[0]).get_float("multiplier") == 0.8);
}

struct BadCase {
  std::string chain, expected;
};
std::ostream& operator<<(std::ostream& os, const BadCase& c) { return os << c.chain; }

const std::vector<BadCase> kBad{
    {"repetition-penalty:penalty=1.3;last=32", "sampler 'repetition-penalty': unknown parameter 'last' (= '32'); accepted: penalty, last_n"},
    {"xtc:probability=1.5", "sampler 'xtc': parameter 'probability' = '1.5' is above the maximum 1 (expected 0 <= probability <= 1)"},
    {"xtc:threshold=-0.1", "sampler 'xtc': parameter 'threshold' = '-0.1' is below the minimum 0 (expected 0 <= threshold <= 1)"},
    {"dry:base=0.5", "sampler 'dry': parameter 'base' = '0.5' is below the minimum 1 (expected 1 <= base)"},
    {"dry:last_n=-2", "sampler 'dry': parameter 'last_n' = '-2' is below the minimum -1"},
    {"dynamic-temperature:range=-1", "sampler 'dynamic-temperature': parameter 'range' = '-1' is below the minimum 0"},
    {"mirostat-v2:eta=2", "sampler 'mirostat-v2': parameter 'eta' = '2' is above the maximum 1 (expected 0 <= eta <= 1)"},
    {"top-k:k=3;x", "'x' is not key=value"},
    {"top-k:k=3;k=4", "sampler 'top-k': parameter 'k' given twice"},
    {"dry:multiplier=1;breakers=a\\q", "sampler 'dry': parameter 'breakers' = 'a\\q' has an unknown escape '\\q'"},
};

BOOST_DATA_TEST_CASE(bad_values_name_stage_key_value_and_range, bdata::make(kBad), c) {
  try {
    for (const auto& s : parse_plugin_chain(c.chain, "sampler")) registry().make_sampler(s);
    BOOST_FAIL("accepted: " << c.chain);
  } catch (const ConfigError& e) {
    BOOST_TEST(std::string(e.what()).find(c.expected) != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(bad_value_on_the_command_line_exits_2) {
  auto r = gbtest::run_cli({"explain", "--dist", "a=.5,b=.5", "--sampler", "xtc:probability=0.5;threshold=2"});
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err.find("sampler 'xtc': parameter 'threshold' = '2' is above the maximum 1 (expected 0 <= threshold <= 1)") !=
                 std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(plugins_lists_every_parameter_with_range_and_default) {
  auto r = gbtest::run_cli({"plugins"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  for (const auto& e : registry().list()) {
    if (e.kind != PluginKind::Sampler) continue;
    for (const auto& p : e.info.params) {
      BOOST_TEST(r.out.find("  " + p.name) != std::string::npos, e.info.name << "/" << p.name);
      if (p.min || p.max) BOOST_TEST(r.out.find("range [") != std::string::npos);
    }
  }
}
