// The plugin registry: loading, ABI checks, rejections that spare the other modules, and guards.
#define BOOST_TEST_MODULE registry
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <tuple>

#include "glassbox/error.hpp"
#include "glassbox/plugin.hpp"
#include "glassbox/registry.hpp"
#include "support.hpp"

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using glassbox::PluginKind;

namespace {
const fs::path kTestPlugins = GLASSBOX_TEST_PLUGIN_DIR;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The single rejection recorded after loading one test module folder next to the built-ins.
std::string rejection_for(const std::string& module) {
  glassbox::Registry reg;
  reg.load_default({kTestPlugins / module});
  BOOST_TEST(reg.find(PluginKind::Sampler, "greedy") != nullptr, "built-ins still load");
  BOOST_TEST_REQUIRE(reg.rejections().size() == 1u);
  return reg.rejections()[0].to_string();
}
}  // namespace

// The built-ins are modules in the plugin folder, or (GLASSBOX_STATIC_PLUGINS) modules linked into glassbox;
// either way each comes through the registry under its module's name.
BOOST_AUTO_TEST_CASE(builtins_are_modules_in_the_plugin_folder_or_linked_in) {
  glassbox::Registry reg;
  reg.load_default();
  BOOST_TEST(reg.rejections().empty());
  for (auto [kind, name, module] : {std::tuple{PluginKind::Tokenizer, "llama2c", "llama2c-tokenizer"},
                                    std::tuple{PluginKind::Attention, "kv-cache", "kv-cache"},
                                    std::tuple{PluginKind::Sampler, "greedy", "greedy"},
                                    std::tuple{PluginKind::Sampler, "dist", "dist"}}) {
    const auto* e = reg.find(kind, name);
    BOOST_TEST_REQUIRE(e != nullptr, name);
    BOOST_TEST(e->module_name == module);
    BOOST_TEST(e->linked_in == glassbox::Registry::has_linked_modules());
    if (e->linked_in) {
      BOOST_TEST(e->module_path.empty());
      BOOST_TEST(e->where() == "linked in");
    } else {
      BOOST_TEST(e->module_path.parent_path() == fs::weakly_canonical(glassbox::Registry::builtin_dir()));
    }
  }
#ifdef GBTEST_STATIC_PLUGINS
  BOOST_TEST(glassbox::Registry::has_linked_modules(), "a GLASSBOX_STATIC_PLUGINS build links its modules in");
#else
  BOOST_TEST(!glassbox::Registry::has_linked_modules());
#endif
}

// Every built-in module is there in both builds, with the same plugins and parameters: the linked-in table
// is generated from the same glassbox_add_module calls.
BOOST_AUTO_TEST_CASE(linked_in_modules_register_once_and_list_as_linked_in) {
  glassbox::Registry reg;
  reg.load_linked();
  const auto first = reg.list().size();
  reg.load_linked();  // again: nothing added, nothing rejected
  BOOST_TEST(reg.list().size() == first);
  BOOST_TEST(reg.rejections().empty());
  if (!glassbox::Registry::has_linked_modules()) {
    BOOST_TEST(first == 0u);
    return;
  }
  BOOST_TEST(first > 20u);
  const auto r = gbtest::run_cli({"plugins"});
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(contains(r.out, "built-in modules: linked in"), r.out);
  BOOST_TEST(contains(r.out, "  module greedy (linked in)"), r.out);
  BOOST_TEST(!contains(r.out, "rejected modules:"), r.out);
}

BOOST_DATA_TEST_CASE(bad_modules_are_rejected_with_a_reason,
                     bdata::make({"bad_abi", "no_entry", "dup_greedy", "dup_module"}) ^
                         bdata::make({"ABI version 999, this glassbox expects " + std::to_string(GLASSBOX_ABI_VERSION),
                                      std::string("missing entry point 'glassbox_module_entry'"), std::string("duplicate sampler name 'greedy'"),
                                      std::string("duplicate module name 'greedy'")}),
                     module, reason) {
  const std::string r = rejection_for(module);
  BOOST_TEST(contains(r, reason), r);
  BOOST_TEST(contains(r, (kTestPlugins / module).string()), "names the file: " << r);
  BOOST_TEST(!contains(r, "\n"));
}

BOOST_AUTO_TEST_CASE(a_missing_plugin_folder_is_reported_not_fatal) {
  glassbox::Registry reg;
  reg.load_default({"/nonexistent/plugins"});
  BOOST_TEST(reg.find(PluginKind::Sampler, "greedy") != nullptr);
  BOOST_TEST_REQUIRE(reg.rejections().size() == 1u);
  BOOST_TEST(contains(reg.rejections()[0].to_string(), "/nonexistent/plugins"));
}

// A symlink loop in a plugin folder is a rejection naming the file (it was an internal error, exit 3); the
// run goes on with a warning. (An unreadable folder is a rejection too: "cannot read the plugin folder";
// not testable as root, who reads every folder.)
BOOST_AUTO_TEST_CASE(a_symlink_loop_in_a_plugin_folder_is_a_rejection) {
  const fs::path dir = gbtest::temp_dir("plugin-loop");
  fs::create_symlink(dir / "b.so", dir / "a.so");
  fs::create_symlink(dir / "a.so", dir / "b.so");
  glassbox::Registry reg;
  reg.load_default({dir});
  BOOST_TEST(reg.find(PluginKind::Sampler, "greedy") != nullptr, "built-ins still load");
  BOOST_TEST_REQUIRE(reg.rejections().size() == 2u);
  for (const auto& r : reg.rejections()) {
    BOOST_TEST(contains(r.to_string(), "cannot resolve the module's path"), r.to_string());
    BOOST_TEST(contains(r.to_string(), dir.string()), r.to_string());
  }
  const auto run = gbtest::run_cli({"run", "--prompt", "x", "--max-tokens", "1", "--plugin-path", dir.string()});
  BOOST_TEST(run.rc == 0, run.err);
  BOOST_TEST(contains(run.err, "module rejected: " + (dir / "a.so").string()), run.err);
}

BOOST_AUTO_TEST_CASE(glassbox_plugin_path_is_searched) {
  ::setenv("GLASSBOX_PLUGIN_PATH", (kTestPlugins / "throwing").c_str(), 1);
  glassbox::Registry reg;
  reg.load_default();
  ::unsetenv("GLASSBOX_PLUGIN_PATH");
  BOOST_TEST(reg.find(PluginKind::Sampler, "throwing") != nullptr);
}

BOOST_AUTO_TEST_CASE(unknown_names_and_parameters_list_what_exists) {
  glassbox::Registry reg;
  reg.load_default();
  try {
    reg.make_sampler({"nucleus", {}});
    BOOST_FAIL("unknown sampler accepted");
  } catch (const glassbox::ConfigError& e) {
    BOOST_TEST(contains(e.what(), "unknown sampler 'nucleus'; available:"), e.what());
    BOOST_TEST(contains(e.what(), "greedy"), e.what());
  }
  try {
    reg.make_attention({"kv-cache", {{"size", "10"}}}, {1, 1, 1, 2, 8});
    BOOST_FAIL("unknown parameter accepted");
  } catch (const glassbox::ConfigError& e) {
    BOOST_TEST(contains(e.what(), "unknown parameter 'size' (= '10'); accepted: capacity"), e.what());
  }
  BOOST_CHECK_THROW(reg.make_attention(glassbox::parse_plugin_spec("kv-cache:-1", "attention"), {1, 1, 1, 2, 8}),
                    glassbox::ConfigError);
  BOOST_CHECK_THROW(reg.make_attention(glassbox::parse_plugin_spec("kv-cache:lots", "attention"), {1, 1, 1, 2, 8}),
                    glassbox::ConfigError);
  BOOST_CHECK_THROW(reg.make_sampler(glassbox::parse_plugin_spec("greedy:3", "sampler")), glassbox::ConfigError);
}

BOOST_AUTO_TEST_CASE(plugin_specs_parse_as_documented) {
  auto chain = glassbox::parse_plugin_chain("top-k:40, temperature:0.8 ,greedy", "sampler");
  BOOST_TEST_REQUIRE(chain.size() == 3u);
  BOOST_TEST(chain[0].name == "top-k");
  BOOST_TEST(chain[0].params.at(0).second == "40");
  BOOST_TEST(chain[1].name == "temperature");
  BOOST_TEST(chain[2].params.empty());
  BOOST_CHECK_THROW(glassbox::parse_plugin_spec(":3", "sampler"), glassbox::ConfigError);
  BOOST_CHECK_THROW(glassbox::parse_plugin_spec("top-k:", "sampler"), glassbox::ConfigError);
}

BOOST_AUTO_TEST_CASE(exceptions_are_reported_with_the_module) {
  glassbox::Registry reg;
  reg.load_default({kTestPlugins / "throwing"});
  auto s = reg.make_sampler({"throwing", {}});
  glassbox::Candidates c;
  c.data = {{0, 1.0f, 0.0f}};
  glassbox::Rng rng(1);
  try {
    s->apply(c, rng);
    BOOST_FAIL("exception swallowed");
  } catch (const glassbox::PluginError& e) {
    BOOST_TEST(contains(e.what(), "sampler 'throwing' (module 'throwing', "), e.what());
    BOOST_TEST(contains(e.what(), "throwing.so"), e.what());
    BOOST_TEST(contains(e.what(), "boom"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(plugins_keep_their_module_loaded) {
  std::unique_ptr<glassbox::Sampler> s;
  {
    glassbox::Registry reg;
    reg.load_default();
    s = reg.make_sampler({"greedy", {}});
  }  // the registry is gone; the sampler's code must still be mapped
  glassbox::Candidates c;
  c.data = {{0, 1.0f, 0.0f}, {1, 3.0f, 0.0f}, {2, 3.0f, 0.0f}};
  glassbox::Rng rng(1);
  s->apply(c, rng);
  BOOST_TEST(s->name() == "greedy");
  BOOST_TEST(c.data[c.selected].id == 1);  // ties go to the lower id
}

// One factory signature for every kind: each is made through Registry::make<T> with a PluginContext,
// and the kind follows from T. An attention module made without the model's shape says so, naming itself.
BOOST_AUTO_TEST_CASE(every_kind_is_made_through_one_path_with_a_context) {
  static_assert(glassbox::plugin_kind_of<glassbox::Tokenizer> == PluginKind::Tokenizer);
  static_assert(glassbox::plugin_kind_of<glassbox::KvStore> == PluginKind::Attention);
  static_assert(glassbox::plugin_kind_of<glassbox::Sampler> == PluginKind::Sampler);
  glassbox::Registry reg;
  reg.load_default();
  glassbox::PluginContext context;
  BOOST_CHECK_EXCEPTION(reg.make<glassbox::KvStore>({"kv-cache", {}}, context), glassbox::ConfigError, [](const glassbox::ConfigError& e) {
    return std::string(e.what()) == "attention 'kv-cache': made without an attention shape (the model's dimensions)";
  });
  context.attention = glassbox::AttentionShape{1, 1, 1, 2, 8};
  BOOST_TEST(reg.make<glassbox::KvStore>(glassbox::parse_plugin_spec("kv-cache:4", "attention"), context)->capacity() == 4);
  BOOST_TEST(reg.make<glassbox::Sampler>({"greedy", {}}, context)->name() == "greedy");
  BOOST_TEST(reg.make_attention({"paged", {}}, {1, 1, 1, 2, 8})->capacity() == 16);  // the shorthand fills the shape in
  // A name of another kind is unknown to this one, whatever T is.
  BOOST_CHECK_THROW(reg.make<glassbox::Sampler>({"kv-cache", {}}), glassbox::ConfigError);
}
