// `glassbox serve` in a build without its HTTP server (GLASSBOX_SERVE=OFF: the WebAssembly build, which has
// no sockets or threads): the command is there and says so.
#include "glassbox/error.hpp"
#include "serve.hpp"

namespace glassbox::cli {

void run_server(const ServeOptions&) {
  throw ConfigError("serve: this build has no HTTP server (built without cpp-httplib, as the WebAssembly build is); "
                    "run `glassbox serve` with a native glassbox");
}

}  // namespace glassbox::cli
