#include "gguf/bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ggflow::gguf {

Result<std::shared_ptr<const Bytes>> MappedBytes::map(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return make_error("cannot open '" + path + "': " + std::strerror(errno),
                      "check the path; models are linked under models/ by `make run`");
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("'" + path + "' is not a regular file", "pass the path of a .gguf file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    return make_error("'" + path + "' is empty (0 bytes), not a GGUF file",
                      "the download or copy may have failed; fetch the file again");
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) return make_error("cannot map '" + path + "': " + std::strerror(err));
  return std::shared_ptr<const Bytes>(
      new MappedBytes(static_cast<const uint8_t*>(p), static_cast<size_t>(st.st_size)));
}

MappedBytes::~MappedBytes() { ::munmap(const_cast<uint8_t*>(data_), size_); }

}  // namespace ggflow::gguf
