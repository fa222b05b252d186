// glassbox/os.hpp's memory figures on POSIX systems: the peak resident set from getrusage, whose unit is
// the system's own (KiB on Linux and the BSDs, bytes on macOS).
#include <sys/resource.h>

#include "glassbox/os.hpp"

namespace glassbox::os {

std::uint64_t peak_resident_bytes() {
  struct rusage ru {};
  if (::getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss <= 0) return 0;
#if defined(__APPLE__)
  return static_cast<std::uint64_t>(ru.ru_maxrss);
#else
  return static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
#endif
}

}  // namespace glassbox::os
