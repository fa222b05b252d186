// Building sampler chains from user specs, and file digests for the trace header.
#include "glassbox/pipeline.hpp"

#include <openssl/evp.h>

#include "glassbox/error.hpp"
#include "glassbox/model.hpp"

namespace glassbox {

const char* const kDefaultSamplerChain = "greedy";

std::vector<std::unique_ptr<Sampler>> build_sampler_stages(const Registry& reg, std::vector<PluginSpec> specs,
                                                          std::vector<std::string>& warnings) {
  if (specs.size() == 1 && specs[0].name == "default" && specs[0].params.empty())
    specs = parse_plugin_chain(kDefaultSamplerChain, "sampler");
  // Validate every stage before creating any: errors name the first bad one.
  for (const auto& s : specs) reg.resolve(PluginKind::Sampler, s);
  std::vector<std::unique_ptr<Sampler>> stages;
  std::string selector;
  for (const auto& s : specs) {
    stages.push_back(reg.make_sampler(s));
    if (!selector.empty())
      warnings.push_back("sampler stage '" + s.name + "' comes after '" + selector +
                         "', which already chooses the token: it has no effect");
    if (stages.back()->selects() && selector.empty()) selector = s.name;
  }
  if (selector.empty()) stages.push_back(reg.make_sampler(PluginSpec{"dist", {}}));
  return stages;
}

std::string sha256_file(const std::filesystem::path& path) {
  MappedFile f(path);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(f.data(), f.size(), md, &len, EVP_sha256(), nullptr) != 1)
    throw Error(path.string() + ": SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

}  // namespace glassbox
