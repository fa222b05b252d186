// Out-of-line key functions of the error types, so their vtables live in libglassbox.
#include "glassbox/error.hpp"

namespace glassbox {

Error::~Error() = default;
ModelError::~ModelError() = default;
TokenizerError::~TokenizerError() = default;
PluginError::~PluginError() = default;
ConfigError::~ConfigError() = default;
InputError::~InputError() = default;
TraceError::~TraceError() = default;
OutputError::~OutputError() = default;

void rethrow_as_own(const Error& e) {
  if (dynamic_cast<const ModelError*>(&e)) throw ModelError(e.what());
  if (dynamic_cast<const TokenizerError*>(&e)) throw TokenizerError(e.what());
  if (dynamic_cast<const PluginError*>(&e)) throw PluginError(e.what());
  if (dynamic_cast<const ConfigError*>(&e)) throw ConfigError(e.what());
  if (dynamic_cast<const InputError*>(&e)) throw InputError(e.what());
  if (dynamic_cast<const TraceError*>(&e)) throw TraceError(e.what());
  if (dynamic_cast<const OutputError*>(&e)) throw OutputError(e.what());
  throw Error(e.what());
}

}  // namespace glassbox
