// The plugin registry: module loading with ABI checks, factory lookup, parameter validation,
// and the guards that keep plugin objects from outliving (or throwing across) their module.
#include "glassbox/registry.hpp"

#ifndef GLASSBOX_NO_MODULE_LOADING
#include <dlfcn.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

// GLASSBOX_NO_MODULE_LOADING (GLASSBOX_MODULE_LOADING=OFF, the WebAssembly build): no dlopen and no Boost.DLL;
// only the modules linked in are registered, and a module file is a rejection that says so.
#ifndef GLASSBOX_NO_MODULE_LOADING
#ifndef BOOST_DLL_USE_STD_FS  // core/CMakeLists.txt defines it for the whole library
#define BOOST_DLL_USE_STD_FS
#endif
#include <boost/dll/shared_library.hpp>
#endif

#include "glassbox/error.hpp"
#include "glassbox/os.hpp"
#include "linked_modules.hpp"

namespace fs = std::filesystem;

namespace glassbox {

std::string kind_name(PluginKind k) {
  switch (k) {
    case PluginKind::Tokenizer: return "tokenizer";
    case PluginKind::Attention: return "attention";
    case PluginKind::Sampler: return "sampler";
  }
  return "?";
}

const Metadata& PluginContext::metadata() const {
  static const Metadata none;
  return model ? *model : none;
}

const AttentionShape& PluginContext::shape(const std::string& who) const {
  if (!attention) throw ConfigError(who + ": made without an attention shape (the model's dimensions)");
  return *attention;
}

std::string PluginSpec::to_string() const {
  std::string s = name;
  for (const auto& [k, v] : params) s += (s == name ? "(" : ", ") + k + "=" + v;
  if (!params.empty()) s += ")";
  return s;
}

namespace {

std::string trim_blanks(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t") + 1);
  return s;
}

// Splits at each `sep` not escaped by a backslash. `\<sep>` becomes <sep> only when `unescape`
// (the last level of splitting); any other backslash stays, for the stage to read (dry's "\n").
std::vector<std::string> split_unescaped(const std::string& text, char sep, bool unescape) {
  std::vector<std::string> out(1);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      const char next = text[i + 1];
      if (unescape && (next == ',' || next == ';')) {
        out.back() += next;
      } else {
        out.back() += c;
        out.back() += next;
      }
      ++i;
    } else if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// A parameter name as factories declare them: a letter or '_', then letters, digits, '_'.
bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

PluginSpec parse_plugin_spec(const std::string& text, const std::string& kind) {
  PluginSpec spec;
  auto colon = text.find(':');
  spec.name = trim_blanks(text.substr(0, colon));
  if (spec.name.empty()) throw ConfigError(kind + " '" + text + "': empty plugin name (expected NAME or NAME:VALUE)");
  if (colon == std::string::npos) return spec;
  const std::string value = trim_blanks(text.substr(colon + 1));
  if (value.empty()) throw ConfigError(kind + " '" + text + "': empty value after ':' (expected NAME:VALUE)");
  // NAME:key=value;key=value names parameters; anything else (a number, logit-bias's 13=-inf;42=2.5,
  // whose keys are not names) is the main parameter's value, as it always was.
  const auto eq = value.find('=');
  if (eq == std::string::npos || !is_identifier(trim_blanks(value.substr(0, eq)))) {
    std::string v;  // still unescape "\," and "\;", so that a main value can hold them too
    for (const auto& part : split_unescaped(value, '\0', true)) v += part;
    spec.params.emplace_back("", v);  // "" = the factory's main parameter
    return spec;
  }
  for (const auto& raw : split_unescaped(value, ';', true)) {
    const std::string item = trim_blanks(raw);
    if (item.empty()) continue;  // "a=1;" or "a=1;;b=2"
    const auto e = item.find('=');
    const std::string key = e == std::string::npos ? "" : trim_blanks(item.substr(0, e));
    if (e == std::string::npos || !is_identifier(key))
      throw ConfigError(kind + " '" + text + "': '" + item +
                        "' is not key=value (expected NAME:key=value;key=value, e.g. repetition-penalty:penalty=1.3;last_n=32;"
                        " write a ';' inside a value as '\\;')");
    spec.params.emplace_back(key, trim_blanks(item.substr(e + 1)));
  }
  return spec;
}

std::vector<PluginSpec> parse_plugin_chain(const std::string& text, const std::string& kind) {
  std::vector<PluginSpec> out;
  // Split at unescaped ','; the escapes themselves are undone by parse_plugin_spec.
  auto items = split_unescaped(text, ',', false);
  if (!items.empty() && trim_blanks(items.back()).empty()) items.pop_back();  // a trailing ',' (getline's way)
  for (const auto& item : items) out.push_back(parse_plugin_spec(item, kind));
  if (out.empty()) throw ConfigError(kind + " '" + text + "': empty chain (expected NAME[:VALUE][,NAME[:VALUE]...])");
  return out;
}

namespace {

#ifndef GLASSBOX_NO_MODULE_LOADING
using Library = boost::dll::shared_library;
#endif

// Deletes a plugin object, then lets go of the library that holds its code (a loaded Library; null for a
// module linked into glassbox, whose code never goes away).
struct LibraryDeleter {
  std::shared_ptr<void> lib;
  template <class T>
  void operator()(T* p) const { delete p; }
};
template <class T>
using Owned = std::unique_ptr<T, LibraryDeleter>;

std::string label(const PluginEntry& e) {
  return kind_name(e.kind) + " '" + e.info.name + "' (module '" + e.module_name + "', " + e.where() + ")";
}

// Runs f(); anything but a glassbox::Error escaping the module becomes a PluginError naming it.
// Nothing thrown by module code is let through as is: the exception object may be destroyed
// after the module is unloaded, so a copy made by libglassbox travels on instead.
template <class F>
decltype(auto) guarded(const std::string& who, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    rethrow_as_own(e);
  } catch (const std::exception& e) {
    throw PluginError(who + " threw: " + e.what());
  } catch (...) {
    throw PluginError(who + " threw a non-standard exception");
  }
}

// The shared half of every wrapper: the plugin object (keeping its module loaded), the label
// errors name, and the name and parameters it was created with (how every kind describes itself).
template <class T>
class Guard {
 public:
  Guard(Owned<T> p, std::string who, std::string name, Params params)
      : p_(std::move(p)), who_(std::move(who)), name_(std::move(name)), params_(std::move(params)) {}

 protected:
  template <class F>
  decltype(auto) call(F&& f) const { return guarded(who_, [&]() -> decltype(auto) { return f(*p_); }); }
  Owned<T> p_;
  std::string who_, name_;
  Params params_;
};

class GuardedTokenizer final : public Tokenizer, Guard<Tokenizer> {
 public:
  using Guard::Guard;
  using Tokenizer::encode;
  std::vector<std::int32_t> encode(std::string_view t, const EncodeOptions& o) const override {
    return call([&](auto& p) { return p.encode(t, o); });
  }
  std::string_view decode(std::int32_t prev, std::int32_t id) const override { return call([&](auto& p) { return p.decode(prev, id); }); }
  std::string_view piece(std::int32_t id) const override { return call([&](auto& p) { return p.piece(id); }); }
  std::int32_t vocab_size() const override { return call([](auto& p) { return p.vocab_size(); }); }
  std::int32_t bos_id() const override { return call([](auto& p) { return p.bos_id(); }); }
  std::int32_t eos_id() const override { return call([](auto& p) { return p.eos_id(); }); }
  TokenType token_type(std::int32_t id) const override { return call([&](auto& p) { return p.token_type(id); }); }
  bool add_bos() const override { return call([](auto& p) { return p.add_bos(); }); }
  bool add_eos() const override { return call([](auto& p) { return p.add_eos(); }); }
  std::vector<std::int32_t> eog_ids() const override { return call([](auto& p) { return p.eog_ids(); }); }
  std::string_view chat_template() const override { return call([](auto& p) { return p.chat_template(); }); }
  std::string_view model_kind() const override { return call([](auto& p) { return p.model_kind(); }); }
  std::string name() const override { return name_; }
  const Params& params() const override { return params_; }
};

class GuardedKvStore final : public KvStore, Guard<KvStore> {
 public:
  using Guard::Guard;
  int capacity() const override { return call([](auto& p) { return p.capacity(); }); }
  bool evicts() const override { return call([](auto& p) { return p.evicts(); }); }
  bool persistent() const override { return call([](auto& p) { return p.persistent(); }); }
  void write(int layer, int pos, int n, const float* k, const float* v) override {
    call([&](auto& p) { p.write(layer, pos, n, k, v); });
  }
  void view(int layer, std::vector<KvSpan>& out) override { call([&](auto& p) { p.view(layer, out); }); }
  void remove(int p0, int p1) override { call([&](auto& p) { p.remove(p0, p1); }); }
  void clear() override { call([](auto& p) { p.clear(); }); }
  void describe(KvState& out) const override {
    call([&](auto& p) { p.describe(out); });
    out.module = name_;
    out.params = params_;
  }
  std::string name() const override { return name_; }
  const Params& params() const override { return params_; }
};

class GuardedSampler final : public Sampler, Guard<Sampler> {
 public:
  using Guard::Guard;
  std::string name() const override { return call([](auto& p) { return p.name(); }); }
  const Params& params() const override { return p_->params(); }
  void apply(Candidates& c, Rng& rng) override { call([&](auto& p) { p.apply(c, rng); }); }
  void bind(const Tokenizer& v) override { call([&](auto& p) { p.bind(v); }); }
  void accept(std::int32_t t) override { call([&](auto& p) { p.accept(t); }); }
  void reset() override { call([](auto& p) { p.reset(); }); }
  Selection selection() const override { return call([](auto& p) { return p.selection(); }); }
  bool runs_first() const override { return call([](auto& p) { return p.runs_first(); }); }
  std::string noop_reason() const override { return call([](auto& p) { return p.noop_reason(); }); }
};

// Which wrapper each kind's objects travel in.
template <class T> struct GuardOf;
template <> struct GuardOf<Tokenizer> { using type = GuardedTokenizer; };
template <> struct GuardOf<KvStore> { using type = GuardedKvStore; };
template <> struct GuardOf<Sampler> { using type = GuardedSampler; };

}  // namespace

namespace {
struct Module {
  std::string name;
  fs::path path;  // the canonical file; for a linked-in module "(linked in)/gb_NAME"
  std::shared_ptr<void> lib;  // the loaded Library; null when linked in
  bool linked_in = false;
};
struct Registered {  // one factory as the registry holds it
  PluginEntry entry;
  std::shared_ptr<void> lib;
  AnyFactory make;
  std::function<bool(const Metadata&)> accepts;  // module code: dies with the factory, before the module
};
}  // namespace

struct Registry::Impl {
  // Declared before `factories`, so factories (whose code lives in the modules) die first.
  std::vector<Module> modules;
  std::vector<Registered> factories;
  std::vector<Rejection> rejections;

  const Registered* find(PluginKind kind, const std::string& name) const {
    for (const auto& f : factories)
      if (f.entry.kind == kind && f.entry.info.name == name) return &f;
    return nullptr;
  }
};

namespace {

// Collects one module's factories; they join the registry only if the whole module is good.
class Staging final : public Registrar {
 public:
  std::vector<Registered> added;
  void add(FactoryInfo info, AnyFactory f, Accepts accepts) override {
    added.push_back({});
    added.back().entry.kind = factory_kind(f);
    added.back().entry.info = std::move(info);
    // Only the text leaves the registry (PluginEntry): a copy of the test would hold module code.
    if (accepts.test) added.back().entry.accepts = std::move(accepts.what);
    added.back().make = std::move(f);
    added.back().accepts = std::move(accepts.test);
  }
};

}  // namespace

Registry::Registry() : impl_(std::make_unique<Impl>()) {}
Registry::~Registry() = default;

fs::path Registry::builtin_dir() {
  const fs::path exe = os::executable_path();
  if (exe.empty()) return fs::path(GLASSBOX_PLUGIN_RELDIR);
  return (exe.parent_path() / ".." / GLASSBOX_PLUGIN_RELDIR).lexically_normal();
}

std::vector<fs::path> Registry::search_path(const std::vector<fs::path>& extra) {
  std::vector<fs::path> dirs{builtin_dir()};
  if (const char* env = std::getenv("GLASSBOX_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string d;
    while (std::getline(ss, d, ':'))
      if (!d.empty()) dirs.emplace_back(d);
  }
  dirs.insert(dirs.end(), extra.begin(), extra.end());
  return dirs;
}

void Registry::load_default(const std::vector<fs::path>& extra) {
  load_linked();
  const auto dirs = search_path(extra);
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    // With the built-ins linked in, the built-in folder only holds what was installed beside them, and a
    // build or install without one is no error.
    std::error_code ec;
    if (i == 0 && has_linked_modules() && !fs::exists(dirs[i], ec)) continue;
    load_directory(dirs[i]);
  }
}

void Registry::load_directory(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    impl_->rejections.push_back({dir, "plugin folder does not exist or is not a folder"});
    return;
  }
  std::vector<fs::path> files;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".so") files.push_back(it->path());
  if (ec) {  // an unreadable folder is said, not skipped in silence
    impl_->rejections.push_back({dir, "cannot read the plugin folder: " + ec.message()});
    return;
  }
  std::sort(files.begin(), files.end());  // a fixed load order: duplicate resolution is reproducible
  for (const auto& f : files) load_module(f);
}

bool Registry::load_module(const fs::path& file) {
  auto reject = [&](const std::string& why) {
    impl_->rejections.push_back({file, why});
    return false;
  };
  std::error_code canon_ec;
  const fs::path canon = fs::weakly_canonical(file, canon_ec);  // a symlink loop is a rejection, not a throw
  if (canon_ec) return reject("cannot resolve the module's path: " + canon_ec.message());
  for (const auto& m : impl_->modules)
    if (m.path == canon) return true;  // already loaded (same file reached twice)

#ifdef GLASSBOX_NO_MODULE_LOADING
  return reject("this build cannot load plugin modules (built without dlopen: only the modules linked in)");
#else
  auto lib = std::make_shared<Library>();
  std::error_code ec;
  lib->load(canon, ec, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local);
  if (ec) {
    std::string why = ec.message();
    if (const char* e = dlerror()) why = e;
    return reject("cannot load module: " + why);
  }
#ifdef GLASSBOX_KEEP_MODULES_MAPPED
  // Sanitizer builds: the module (and what it pulled in, such as ICU) stays mapped after it is unloaded,
  // so LeakSanitizer still sees the caches its globals hold as reachable instead of reporting them.
  dlopen(canon.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE | RTLD_NOLOAD);
#endif
  if (!lib->has(GLASSBOX_ENTRY_SYMBOL))
    return reject(std::string("missing entry point '") + GLASSBOX_ENTRY_SYMBOL + "' (not a glassbox module)");
  return add_module(file, canon, false, lib, lib->get<const glassbox_module_info*()>(GLASSBOX_ENTRY_SYMBOL));
#endif
}

void Registry::load_linked() {
  for (const auto& m : detail::linked_modules()) {
    const fs::path origin = fs::path("(linked in)") / m.file;  // what a rejection names in place of a file
    bool seen = false;
    for (const auto& loaded : impl_->modules) seen = seen || loaded.path == origin;
    if (!seen) add_module(origin, origin, true, nullptr, m.entry);
  }
}

bool Registry::has_linked_modules() { return !detail::linked_modules().empty(); }

// The checks and registration every module goes through, loaded from a file or linked in: the entry point's
// ABI version first, then its name, then its factories (all of them or none).
bool Registry::add_module(const fs::path& file, const fs::path& canon, bool linked_in, std::shared_ptr<void> lib,
                          const glassbox_module_info* (*entry)()) {
  auto reject = [&](const std::string& why) {
    impl_->rejections.push_back({file, why});  // the file as the user's folder named it
    return false;
  };
  const glassbox_module_info* info = nullptr;
  try {
    info = entry();
  } catch (const std::exception& e) {
    return reject(std::string("entry point threw: ") + e.what());
  }
  if (info == nullptr) return reject("entry point returned no module info");
  // The version is the first field and the only one read before it matches.
  if (info->abi_version != GLASSBOX_ABI_VERSION)
    return reject("ABI version " + std::to_string(info->abi_version) + ", this glassbox expects " +
                  std::to_string(GLASSBOX_ABI_VERSION) + " (rebuild the module against this glassbox)");
  const std::string mname = info->module_name ? info->module_name : "";
  if (mname.empty()) return reject("module has no name");
  if (info->register_factories == nullptr) return reject("module '" + mname + "' has no register function");
  for (const auto& m : impl_->modules)
    if (m.name == mname)
      return reject("duplicate module name '" + mname + "' (already loaded from " +
                    (m.linked_in ? "the modules linked into glassbox" : m.path.string()) + ")");

  Staging staging;
  try {
    info->register_factories(staging);
  } catch (const std::exception& e) {
    return reject("module '" + mname + "' failed to register: " + e.what());
  } catch (...) {
    return reject("module '" + mname + "' failed to register (non-standard exception)");
  }
  for (std::size_t i = 0; i < staging.added.size(); ++i) {
    const auto& e = staging.added[i].entry;
    if (e.info.name.empty()) return reject("module '" + mname + "' registers a " + kind_name(e.kind) + " without a name");
    if (auto* other = impl_->find(e.kind, e.info.name))
      return reject("duplicate " + kind_name(e.kind) + " name '" + e.info.name + "' (already provided by " +
                    other->entry.where() + ")");
    for (std::size_t j = 0; j < i; ++j)
      if (staging.added[j].entry.kind == e.kind && staging.added[j].entry.info.name == e.info.name)
        return reject("registers " + kind_name(e.kind) + " '" + e.info.name + "' twice");
  }
  impl_->modules.push_back({mname, canon, lib, linked_in});
  for (auto& f : staging.added) {
    f.entry.module_name = mname;
    if (!linked_in) f.entry.module_path = canon;
    f.entry.linked_in = linked_in;
    f.lib = lib;
    impl_->factories.push_back(std::move(f));
  }
  return true;
}

const std::vector<Rejection>& Registry::rejections() const { return impl_->rejections; }

std::vector<PluginEntry> Registry::list() const {
  std::vector<PluginEntry> out;
  for (const auto& f : impl_->factories) out.push_back(f.entry);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.kind, a.info.name) < std::tie(b.kind, b.info.name);
  });
  return out;
}

std::vector<std::string> Registry::names(PluginKind kind) const {
  std::vector<std::string> out;
  for (const auto& f : impl_->factories)
    if (f.entry.kind == kind) out.push_back(f.entry.info.name);
  std::sort(out.begin(), out.end());
  return out;
}

const PluginEntry* Registry::find(PluginKind kind, const std::string& name) const {
  auto* f = impl_->find(kind, name);
  return f ? &f->entry : nullptr;
}

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}
}  // namespace

Params Registry::resolve(PluginKind kind, const PluginSpec& spec) const {
  const auto* f = impl_->find(kind, spec.name);
  if (!f) {
    std::string msg = "unknown " + kind_name(kind) + " '" + spec.name + "'; available: " + join(names(kind));
    if (!impl_->rejections.empty()) msg += " (" + std::to_string(impl_->rejections.size()) + " module(s) rejected; see 'glassbox plugins')";
    throw ConfigError(msg);
  }
  const auto& info = f->entry.info;
  const std::string owner = kind_name(kind) + " '" + spec.name + "'";
  std::vector<std::string> known;
  for (const auto& p : info.params) known.push_back(p.name);
  Params out;
  for (const auto& [given_name, text] : spec.params) {
    std::string pname = given_name;
    if (pname.empty()) {
      if (info.main_param.empty())
        throw ConfigError(owner + " takes no value (got '" + text + "'); write it as just '" + spec.name + "'");
      pname = info.main_param;
    }
    auto it = std::find_if(info.params.begin(), info.params.end(), [&](const ParamSpec& p) { return p.name == pname; });
    if (it == info.params.end())
      throw ConfigError(owner + ": unknown parameter '" + pname + "' (= '" + text + "'); accepted: " + join(known));
    if (out.has(pname)) throw ConfigError(owner + ": parameter '" + pname + "' given twice");
    out.set(pname, parse_param(owner, *it, text));
  }
  for (const auto& p : info.params)
    if (!out.has(p.name)) out.set(p.name, parse_param(owner, p, p.default_value));
  return out;
}

std::vector<std::string> Registry::accepting(PluginKind kind, const Metadata& model) const {
  std::vector<std::string> out;
  for (const auto& f : impl_->factories)
    if (f.entry.kind == kind && f.accepts && guarded(label(f.entry), [&] { return f.accepts(model); }))
      out.push_back(f.entry.info.name);
  std::sort(out.begin(), out.end());
  return out;
}

template <class T>
std::unique_ptr<T> Registry::make(const PluginSpec& spec, const PluginContext& context) const {
  constexpr PluginKind kind = plugin_kind_of<T>;
  Params params = resolve(kind, spec);
  const auto* f = impl_->find(kind, spec.name);
  const std::string who = label(f->entry);
  // The entry was found under T's kind, so its factory is the alternative that makes T.
  std::unique_ptr<T> raw = guarded(who, [&] { return std::get<Factory<T>>(f->make)(params, context); });
  if (!raw) throw PluginError(who + ": the factory made nothing");
  using G = typename GuardOf<T>::type;
  return std::make_unique<G>(Owned<T>(raw.release(), {f->lib}), who, spec.name, std::move(params));
}
// Every kind's instance, compiled here once (the definition stays out of the header).
template std::unique_ptr<Tokenizer> Registry::make<Tokenizer>(const PluginSpec&, const PluginContext&) const;
template std::unique_ptr<KvStore> Registry::make<KvStore>(const PluginSpec&, const PluginContext&) const;
template std::unique_ptr<Sampler> Registry::make<Sampler>(const PluginSpec&, const PluginContext&) const;

std::unique_ptr<Tokenizer> Registry::make_tokenizer(const PluginSpec& spec, const Metadata& model) const {
  PluginContext c;
  c.model = &model;
  return make<Tokenizer>(spec, c);
}
std::unique_ptr<KvStore> Registry::make_attention(const PluginSpec& spec, const AttentionShape& shape) const {
  PluginContext c;
  c.attention = shape;
  return make<KvStore>(spec, c);
}
std::unique_ptr<Sampler> Registry::make_sampler(const PluginSpec& spec, const PluginContext& context) const {
  return make<Sampler>(spec, context);
}

}  // namespace glassbox
