// The plugin registry: loads modules (shared libraries), checks their ABI, creates plugins by name.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "glassbox/plugin.hpp"

namespace glassbox {

// A plugin as the user names it: `NAME`, `NAME:VALUE` (VALUE sets the main parameter),
// or, from YAML, a name with every parameter given by name.
struct PluginSpec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> params;  // (parameter, value as text)
  std::string to_string() const;
};

// "top-k:40" -> {top-k, main=40}. `kind` names the option in errors ("sampler").
PluginSpec parse_plugin_spec(const std::string& text, const std::string& kind);
// "top-k:40,temperature:0.8" -> two specs, in order.
std::vector<PluginSpec> parse_plugin_chain(const std::string& text, const std::string& kind);

struct ModuleInfo;

// One registered factory, for listings.
struct PluginEntry {
  PluginKind kind;
  FactoryInfo info;
  std::string module_name;
  std::filesystem::path module_path;  // the module's file; empty when linked in
  bool linked_in = false;             // a built-in module linked into glassbox (GLASSBOX_STATIC_PLUGINS)
  // What it accepts when choosing itself for a model (Accepts::what); nullopt: chosen only by name.
  std::optional<std::string> accepts;
  // Where its code lives, for messages and listings: the module's file, or "linked in".
  std::string where() const { return linked_in ? "linked in" : module_path.string(); }
};

struct Rejection {
  std::filesystem::path file;
  std::string reason;  // one line: why the module was not loaded
  std::string to_string() const { return file.string() + ": " + reason; }
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The folder of built-in modules next to the running binary (bin/../lib/glassbox/plugins).
  static std::filesystem::path builtin_dir();
  // Built-ins, then each folder of GLASSBOX_PLUGIN_PATH (':'-separated), then `extra`.
  static std::vector<std::filesystem::path> search_path(const std::vector<std::filesystem::path>& extra);

  // Loads every module file (*.so) in `dir`; a bad one is recorded in rejections(), the
  // others still load. A missing folder is recorded too.
  void load_directory(const std::filesystem::path& dir);
  // Loads one module; returns false (and records why) when it is rejected.
  bool load_module(const std::filesystem::path& file);
  // Registers the modules linked into glassbox (GLASSBOX_STATIC_PLUGINS), through the same checks as a
  // loaded one; none in a build that loads its built-ins from the plugin folder. Calling it again adds nothing.
  void load_linked();
  // Whether this glassbox was built with its modules linked in.
  static bool has_linked_modules();
  // The usual start-up: load_linked(), then load_directory over search_path(extra) (where the built-ins are
  // linked in, a missing built-in folder is skipped, not a rejection).
  void load_default(const std::vector<std::filesystem::path>& extra = {});

  const std::vector<Rejection>& rejections() const;
  std::vector<PluginEntry> list() const;
  std::vector<std::string> names(PluginKind kind) const;
  const PluginEntry* find(PluginKind kind, const std::string& name) const;

  // Validates a spec against the factory's declared parameters (unknown names or values
  // that do not parse are ConfigErrors listing what exists) and fills in defaults.
  Params resolve(PluginKind kind, const PluginSpec& spec) const;

  // The plugins of `kind` whose Accepts test says yes to `model`, by name. A test that throws is a
  // PluginError naming its module.
  std::vector<std::string> accepting(PluginKind kind, const Metadata& model) const;

  // Creates a plugin of the kind T makes (Tokenizer, KvStore, Sampler): the one creation path every
  // kind goes through (resolve the spec, call the factory with `context`, wrap the result). The
  // returned object keeps its module loaded while it lives, and exceptions escaping it are rethrown
  // as PluginError naming the module's file and name.
  template <class T>
  std::unique_ptr<T> make(const PluginSpec& spec, const PluginContext& context = {}) const;
  // Shorthands for the usual contexts.
  std::unique_ptr<Tokenizer> make_tokenizer(const PluginSpec& spec, const Metadata& model = {}) const;
  std::unique_ptr<KvStore> make_attention(const PluginSpec& spec, const AttentionShape& shape) const;
  std::unique_ptr<Sampler> make_sampler(const PluginSpec& spec, const PluginContext& context = {}) const;

 private:
  bool add_module(const std::filesystem::path& file, const std::filesystem::path& canon, bool linked_in, std::shared_ptr<void> lib,
                  const glassbox_module_info* (*entry)());
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace glassbox
