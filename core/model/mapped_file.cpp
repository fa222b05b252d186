// Memory-mapping a model file read-only; special files (FIFOs, devices) are refused, not opened. The
// system calls are glassbox/os.hpp's (core/src/platform/files_posix.cpp).
#include "glassbox/model/mapped_file.hpp"

#include "glassbox/file_io.hpp"
#include "glassbox/os.hpp"

namespace glassbox {

bool stamp_of(const std::filesystem::path& path, FileStamp& out) { return os::file_stamp(path, out); }

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  const os::FileMap map = os::map_file(path);
  data_ = map.data;
  size_ = map.size;
  stamp_ = map.stamp;
  note_input(path);  // no output of this process may replace it (file_io.hpp)
}

MappedFile::~MappedFile() { os::unmap_file({data_, size_, stamp_}); }

}  // namespace glassbox
