#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/escape.h"

namespace trace {

MappedFile::~MappedFile() {
  if (map_ != nullptr && size_ > 0) munmap(map_, size_);
}

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;  // before the message is built
    return NotFound(EscapePathForDisplay(path) + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return IOError(EscapePathForDisplay(path) + ": cannot stat: " + std::strerror(err));
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* map = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return IOError(EscapePathForDisplay(path) + ": cannot mmap: " + std::strerror(err));
    }
    file->map_ = map;
  }
  ::close(fd);
  return file;
}

}  // namespace trace
