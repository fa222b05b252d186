// Building sampler chains from user specs, and file digests for the trace header.
#include "glassbox/pipeline.hpp"

#include <fstream>
#include <memory>
#include <vector>

#include <openssl/evp.h>

#include "glassbox/error.hpp"
#include "glassbox/model.hpp"

namespace glassbox {

// llama.cpp's order (truncate first, then reshape): top-k bounds the work, top-p and min-p trim
// the tail relative to the mass and to the best token, temperature 0.8 sharpens what is left,
// and the automatically appended "dist" draws. Documented in docs/samplers.md.
const char* const kDefaultSamplerChain = "top-k:40,top-p:0.95,min-p:0.05,temperature:0.8";

std::vector<std::unique_ptr<Sampler>> build_sampler_stages(const Registry& reg, std::vector<PluginSpec> specs,
                                                          std::vector<std::string>& warnings) {
  // "default" (without a value) stands for the default chain wherever it appears.
  std::vector<PluginSpec> expanded;
  for (auto& s : specs) {
    if (s.name == "default" && s.params.empty()) {
      for (auto& d : parse_plugin_chain(kDefaultSamplerChain, "sampler")) expanded.push_back(std::move(d));
    } else {
      expanded.push_back(std::move(s));
    }
  }
  specs = std::move(expanded);
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

namespace {
std::string hex(const unsigned char* md, unsigned int len) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += digits[md[i] >> 4];
    out += digits[md[i] & 15];
  }
  return out;
}
}  // namespace

std::string sha256_bytes(const void* data, std::size_t size) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, size, md, &len, EVP_sha256(), nullptr) != 1) throw Error("SHA-256 failed");
  return hex(md, len);
}

std::string sha256_file(const std::filesystem::path& path) {
  // Streamed through a fixed buffer: mapping the file a second time would count its pages twice in
  // the resident set of a process that has the model mapped already.
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open for hashing");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error(path.string() + ": SHA-256 failed");
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0 && EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<std::size_t>(in.gcount())) != 1)
      throw Error(path.string() + ": SHA-256 failed");
  }
  if (in.bad()) throw InputError(path.string() + ": read error while hashing");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) throw Error(path.string() + ": SHA-256 failed");
  return hex(md, len);
}

}  // namespace glassbox
