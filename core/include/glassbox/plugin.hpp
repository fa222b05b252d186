// The plugin ABI: the one entry point every module exports, and the registrar it fills.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "glassbox/forward/attention.hpp"
#include "glassbox/model/metadata.hpp"
#include "glassbox/params.hpp"
#include "glassbox/sampler.hpp"
#include "glassbox/tokenizer.hpp"

// Bumped whenever an interface above, Params or Candidates changes layout or meaning.
#ifndef GLASSBOX_ABI_VERSION
#define GLASSBOX_ABI_VERSION 5
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

// `model` is the model file's metadata (GGUF keys, or the few a llama2.c header implies), so a
// tokenizer stored inside the model file needs no file of its own.
using TokenizerFactory = std::function<std::unique_ptr<Tokenizer>(const Params&, const Metadata& model)>;
using AttentionFactory = std::function<std::unique_ptr<KvStore>(const AttentionShape&, const Params&)>;
using SamplerFactory = std::function<std::unique_ptr<Sampler>(const Params&)>;
// Any kind's factory; its alternative's index is the PluginKind it makes.
using AnyFactory = std::variant<TokenizerFactory, AttentionFactory, SamplerFactory>;
inline PluginKind factory_kind(const AnyFactory& f) { return static_cast<PluginKind>(f.index()); }

// A module's register function adds its factories here: one entry point for every kind.
class Registrar {
 public:
  virtual ~Registrar() = default;
  virtual void add(FactoryInfo info, AnyFactory f) = 0;
  void add_tokenizer(FactoryInfo info, TokenizerFactory f) { add(std::move(info), std::move(f)); }
  void add_attention(FactoryInfo info, AttentionFactory f) { add(std::move(info), std::move(f)); }
  void add_sampler(FactoryInfo info, SamplerFactory f) { add(std::move(info), std::move(f)); }
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

// GLASSBOX_MODULE("name", "description", register_fn) defines a module's entry point.
#define GLASSBOX_MODULE(NAME, DESCRIPTION, REGISTER_FN)                                   \
  extern "C" __attribute__((visibility("default"))) const glassbox_module_info*          \
  glassbox_module_entry() {                                                               \
    static const glassbox_module_info info{GLASSBOX_ABI_VERSION, NAME, DESCRIPTION, REGISTER_FN}; \
    return &info;                                                                         \
  }
