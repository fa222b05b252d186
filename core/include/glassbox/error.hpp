// Typed errors thrown by glassbox's library code; only main() turns them into exit codes.
#pragma once
#include <stdexcept>
#include <string>

namespace glassbox {

// Every error message is one line naming the file, field or value and what was expected.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ModelError : Error { using Error::Error; };      // checkpoint file unusable
struct TokenizerError : Error { using Error::Error; };  // tokenizer file unusable
struct PluginError : Error { using Error::Error; };     // module failed to load or threw
struct ConfigError : Error { using Error::Error; };     // unknown name, bad parameter/option value
struct InputError : Error { using Error::Error; };      // prompt too long, bad input text
struct TraceError : Error { using Error::Error; };      // trace file unusable

}  // namespace glassbox
