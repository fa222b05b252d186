// The web build's umask (web/web.cmake: in glassbox_cli's objects, so in both targets): the host's under node
// (process.umask()), 022 in a page. Emscripten's own starts at 0777, so every file glassbox created (mode
// 0666 & ~umask, core/src/file_io.cpp's default_mode) got mode 0000.
#include <emscripten.h>
#include <sys/stat.h>

namespace {
__attribute__((constructor)) void glassbox_host_umask() {
  const int mask = EM_ASM_INT({
    return (typeof process === 'object' && process && typeof process.umask === 'function') ? process.umask() : 18;
  });
  ::umask(static_cast<mode_t>(mask & 0777));
}
}  // namespace
