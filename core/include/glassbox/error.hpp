// Typed errors thrown by glassbox's library code; only main() turns them into exit codes.
#pragma once
#include <stdexcept>
#include <string>

namespace glassbox {

// Every error message is one line naming the file, field or value and what was expected.
// The destructors are defined in libglassbox (their "key function"), so the vtables and type
// info live there, not in the plugin that threw: an error outlives the module it came from.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
  ~Error() override;
};
struct ModelError : Error { using Error::Error; ~ModelError() override; };          // checkpoint file unusable
struct TokenizerError : Error { using Error::Error; ~TokenizerError() override; };  // tokenizer file unusable
struct PluginError : Error { using Error::Error; ~PluginError() override; };        // module failed to load or threw
struct ConfigError : Error { using Error::Error; ~ConfigError() override; };        // unknown name, bad parameter/option value
struct InputError : Error { using Error::Error; ~InputError() override; };          // prompt too long, bad input text
struct TraceError : Error { using Error::Error; ~TraceError() override; };          // trace file unusable
struct OutputError : Error { using Error::Error; ~OutputError() override; };        // an output file or stdout cannot be written

// Rethrows `e` as a fresh object of the same glassbox type built by libglassbox itself.
[[noreturn]] void rethrow_as_own(const Error& e);

}  // namespace glassbox
