// Assembling a run from names: sampler chains from specs, file digests. Used by the CLI and tests.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "glassbox/registry.hpp"
#include "glassbox/sampling.hpp"

namespace glassbox {

// The chain `--sampler default` stands for (documented in docs/samplers.md).
extern const char* const kDefaultSamplerChain;

// Expands "default", creates each stage in order, and appends a weighted draw ("dist") when
// the last stage does not select. Stages placed after a selecting stage add a warning.
std::vector<std::unique_ptr<Sampler>> build_sampler_stages(const Registry& reg, std::vector<PluginSpec> specs,
                                                          std::vector<std::string>& warnings);

// Hex SHA-256 of a file's bytes.
std::string sha256_file(const std::filesystem::path& path);
// SHA-256 of bytes already in memory (e.g. a model's own mapping), lowercase hex.
std::string sha256_bytes(const void* data, std::size_t size);

}  // namespace glassbox
