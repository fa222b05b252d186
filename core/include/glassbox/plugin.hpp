// The plugin ABI: the one entry point every module exports, and the registrar it fills.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "glassbox/forward/attention.hpp"
#include "glassbox/model/metadata.hpp"
#include "glassbox/params.hpp"
#include "glassbox/sampler.hpp"
#include "glassbox/tokenizer.hpp"

// Bumped whenever an interface above, Params, Candidates, PluginContext or a factory's signature
// changes layout or meaning. 6: one factory signature for every kind (Params, PluginContext), and
// Registrar::add takes an Accepts. 7: Sampler::selection() and runs_first() (stages declare how they
// choose and whether they go first; selects() is no longer virtual) and noop_reason(), PluginContext
// carries the tokenizer. 8: PluginContext carries kv_pool (a KvBlockPool shared by a server's stores).
#ifndef GLASSBOX_ABI_VERSION
#define GLASSBOX_ABI_VERSION 8
#endif

namespace glassbox {

// In the order of AnyFactory's alternatives.
enum class PluginKind { Tokenizer, Attention, Sampler };
std::string kind_name(PluginKind k);

// What a factory tells the registry about itself.
struct FactoryInfo {
  std::string name;                // e.g. "top-p"
  std::string help;                // one line
  std::vector<ParamSpec> params;   // every parameter it accepts
  std::string main_param;          // the one `NAME:VALUE` sets (empty: none)
};

// What a factory may know of the run it makes a plugin for, besides its own parameters: the same
// record for every kind, so that a kind needing more is a new field here, not a new signature.
// Plain data: whoever asks the registry for a plugin fills in what it knows.
struct PluginContext {
  // The model file's metadata (GGUF keys, or the few a llama2.c header implies), so that a tokenizer
  // stored inside the model file needs no file of its own. Null: no model (a tokenizer file alone).
  const Metadata* model = nullptr;
  std::int32_t vocab_size = 0;              // the model's vocabulary size; 0: not known
  std::optional<AttentionShape> attention;  // the dimensions an attention module is built for
  // The run's tokenizer (its texts, token types and special ids: bos_id, eos_id, eog_ids), for a sampler
  // stage that checks what it is given against the vocabulary (logit-bias's ids) or works on texts.
  // Null: no vocabulary known (a chain checked before any model is loaded); the stage then checks what
  // it can and leaves the rest to the run that has one.
  const Tokenizer* tokenizer = nullptr;
  // A block pool the run's K/V store may take its blocks from, shared with other runs (serve --kv-pool).
  // Null: the store allocates its own memory, as `glassbox run` does. A module that keeps no blocks
  // ignores it; one that does keeps the shared_ptr (the pool outlives every store that joined it).
  std::shared_ptr<KvBlockPool> kv_pool;

  // *model, or an empty Metadata when there is none.
  const Metadata& metadata() const;
  // *attention; a ConfigError naming `who` ("attention 'paged'") when the caller gave no shape.
  const AttentionShape& shape(const std::string& who) const;
};

// Every kind's factory: the validated parameters and the context in, the plugin out.
template <class T>
using Factory = std::function<std::unique_ptr<T>(const Params&, const PluginContext&)>;
using TokenizerFactory = Factory<Tokenizer>;
using AttentionFactory = Factory<KvStore>;
using SamplerFactory = Factory<Sampler>;
// Any kind's factory; its alternative's index is the PluginKind it makes.
using AnyFactory = std::variant<Factory<Tokenizer>, Factory<KvStore>, Factory<Sampler>>;
inline PluginKind factory_kind(const AnyFactory& f) { return static_cast<PluginKind>(f.index()); }

namespace detail {
template <class F, class... Fs>
constexpr std::size_t alternative_index(const std::variant<Fs...>*) {
  constexpr bool same[] = {std::is_same_v<F, Fs>...};
  for (std::size_t i = 0; i < sizeof...(Fs); ++i)
    if (same[i]) return i;
  return sizeof...(Fs);
}
}  // namespace detail
// The kind whose plugins are T (Tokenizer, KvStore, Sampler): the position of Factory<T> in AnyFactory.
template <class T>
inline constexpr PluginKind plugin_kind_of = static_cast<PluginKind>(detail::alternative_index<Factory<T>>(static_cast<const AnyFactory*>(nullptr)));

// How a plugin says it fits a model, so that a run naming none gets the one that does: the registry
// asks every tokenizer's `test` with the model's metadata (tokenizer.ggml.model, or none for a
// llama2.c checkpoint). `what` names what it accepts in the error when none does ("gpt2").
struct Accepts {
  std::string what;
  std::function<bool(const Metadata&)> test;  // empty: never chosen by itself, only by name
};

// A module's register function adds its factories here: one entry point for every kind.
class Registrar {
 public:
  virtual ~Registrar() = default;
  virtual void add(FactoryInfo info, AnyFactory make, Accepts accepts) = 0;
  void add_tokenizer(FactoryInfo info, Factory<Tokenizer> f, Accepts accepts = {}) {
    add(std::move(info), std::move(f), std::move(accepts));
  }
  void add_attention(FactoryInfo info, Factory<KvStore> f) { add(std::move(info), std::move(f), {}); }
  void add_sampler(FactoryInfo info, Factory<Sampler> f) { add(std::move(info), std::move(f), {}); }
};

}  // namespace glassbox

// The entry point. Its first field is the ABI version, checked before anything else is used.
extern "C" struct glassbox_module_info {
  std::uint32_t abi_version;
  const char* module_name;
  const char* description;
  void (*register_factories)(glassbox::Registrar&);
};

#define GLASSBOX_ENTRY_SYMBOL "glassbox_module_entry"

// GLASSBOX_MODULE("name", "description", register_fn) defines a module's entry point: the exported
// function GLASSBOX_ENTRY_SYMBOL that the registry finds in a loaded module. A module linked into the
// binary instead (GLASSBOX_STATIC_PLUGINS) is compiled with GLASSBOX_MODULE_ENTRY set to a name of its own
// (glassbox_module_entry_<target>), so that every built-in module's entry point can live in one binary; the
// registry calls it from the table of linked-in modules and checks what it returns in the same way.
#ifdef GLASSBOX_MODULE_ENTRY
#define GLASSBOX_MODULE_ENTRY_FN GLASSBOX_MODULE_ENTRY
#define GLASSBOX_MODULE_ENTRY_VISIBILITY "hidden"
#else
#define GLASSBOX_MODULE_ENTRY_FN glassbox_module_entry
#define GLASSBOX_MODULE_ENTRY_VISIBILITY "default"
#endif
#define GLASSBOX_MODULE(NAME, DESCRIPTION, REGISTER_FN)                                           \
  extern "C" __attribute__((visibility(GLASSBOX_MODULE_ENTRY_VISIBILITY))) const glassbox_module_info* \
  GLASSBOX_MODULE_ENTRY_FN() {                                                                    \
    static const glassbox_module_info info{GLASSBOX_ABI_VERSION, NAME, DESCRIPTION, REGISTER_FN}; \
    return &info;                                                                                 \
  }
