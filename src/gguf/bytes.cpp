#include "gguf/bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

namespace ggflow::gguf {

namespace {
// The live read-only file mappings: release_file_pages touches only bytes inside one of them.
std::mutex g_maps_mu;
std::vector<std::pair<const uint8_t*, size_t>> g_maps;
}  // namespace

bool release_file_pages(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  {
    std::lock_guard<std::mutex> lock(g_maps_mu);
    const bool inside = std::any_of(g_maps.begin(), g_maps.end(), [&](const auto& m) {
      return b >= m.first && n <= m.second && static_cast<size_t>(b - m.first) <= m.second - n;
    });
    if (!inside) return false;
  }
  // Only whole pages inside [b, b + n): a neighbour's bytes on a shared page stay resident.
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(b) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(b) + n) / page * page;
  if (hi <= lo) return true;
  return ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) == 0;
}

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
  {
    std::lock_guard<std::mutex> lock(g_maps_mu);
    g_maps.emplace_back(static_cast<const uint8_t*>(p), static_cast<size_t>(st.st_size));
  }
  return std::shared_ptr<const Bytes>(
      new MappedBytes(static_cast<const uint8_t*>(p), static_cast<size_t>(st.st_size)));
}

MappedBytes::~MappedBytes() {
  {
    std::lock_guard<std::mutex> lock(g_maps_mu);
    std::erase(g_maps, std::pair<const uint8_t*, size_t>(data_, size_));
  }
  ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace ggflow::gguf
