// Memory-mapping a model file read-only; special files (FIFOs, devices) are refused, not opened.
#include "glassbox/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "glassbox/error.hpp"

namespace glassbox {

MappedFile::MappedFile(const std::filesystem::path& path) {
  // Check the kind first: open() on a FIFO would block until a writer appears.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw ModelError(path.string() + ": cannot open: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw ModelError(path.string() + ": not a regular file (expected a model file)");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) throw ModelError(path.string() + ": cannot open: " + std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ModelError(path.string() + ": not a regular file (expected a model file)");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw ModelError(path.string() + ": cannot map: " + std::strerror(errno));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace glassbox
