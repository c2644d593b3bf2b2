#include "runtime/logits_dump.h"

#include <bit>
#include <cstdio>

namespace ggflow::runtime {

static_assert(std::endian::native == std::endian::little, "the dump is written in native (little-endian) order");

Status write_logits_dump(const std::string& path, const std::vector<float>& rows) {
  FILE* f = std::fopen(path.c_str(), "wb");
  const bool ok = f && std::fwrite(rows.data(), sizeof(float), rows.size(), f) == rows.size();
  if (f && std::fclose(f) != 0) return make_error("cannot write '" + path + "'", "check the path and free disk space");
  if (!ok) return make_error("cannot write '" + path + "'", "check the path and free disk space");
  return {};
}

Result<std::vector<float>> read_logits_dump(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return make_error("cannot open '" + path + "'");
  std::vector<float> v;
  float buf[1024];
  size_t n;
  while ((n = std::fread(buf, sizeof(float), 1024, f)) > 0) v.insert(v.end(), buf, buf + n);
  std::fclose(f);
  return v;
}

}  // namespace ggflow::runtime
