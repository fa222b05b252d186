// The range check of a --seed option bound straight to an integer (compare, explain, synth): CLI11 reads
// "-1" into a uint64_t as 2^64-1 and would take it silently; `run`'s --seed goes through run_options.cpp.
#pragma once
#include <charconv>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace glassbox::cli {

inline CLI::Validator seed_range() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::uint64_t v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc() || p != s.data() + s.size())
          return "'" + s + "' is not a seed (expected an integer in 0.." + std::to_string(UINT64_MAX) + ")";
        return "";
      },
      "0.." + std::to_string(UINT64_MAX), "seed");
}

}  // namespace glassbox::cli
