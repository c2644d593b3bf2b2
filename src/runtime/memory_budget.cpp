// The memory budget of a model run (see memory_budget.h).
#include "runtime/memory_budget.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "cpu/host.h"

namespace ggflow::runtime {

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

int64_t available_memory(std::string* where) {
  int64_t avail = -1;
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") {
      avail = kib * 1024;
      break;
    }
  if (where) *where = "this machine has available";
  const cpu::CgroupMemory cg = cpu::cgroup_memory();
  if (cg.limit > 0) {
    const int64_t left = std::max<int64_t>(0, cg.limit - std::max<int64_t>(0, cg.usage));
    if (avail < 0 || left < avail) {
      avail = left;
      if (where) *where = "this process's cgroup (container) memory limit of " + format_bytes(cg.limit) + " leaves";
    }
  }
  return avail;
}

Status check_memory_budget(const std::string& path, int64_t kv_bytes, int64_t max_memory) {
  std::error_code ec;
  const auto file = std::filesystem::file_size(path, ec);
  if (ec) return {};  // the reader names a missing or unreadable file
  const int64_t need = int64_t(file) + kv_bytes;
  const std::string what = format_bytes(int64_t(file)) + " of weights (" + path + ")" +
                           (kv_bytes > 0 ? " + " + format_bytes(kv_bytes) + " of KV cache" : "") + " = " + format_bytes(need);
  if (max_memory > 0 && need > max_memory)
    return make_error("the model needs " + what + ", more than --max-memory " + format_bytes(max_memory),
                      "raise --max-memory, use a smaller quantization, or shrink the KV cache");
  std::string where;
  const int64_t avail = available_memory(&where);
  if (max_memory <= 0 && avail >= 0 && need > avail)
    return make_error("the model needs " + what + ", more than the " + format_bytes(avail) + " " + where,
                      "free memory, use a smaller quantization, shrink the KV cache, or set --max-memory to try anyway");
  return {};
}

Status check_memory_budget(const std::string& path, int64_t kv_bytes, const std::string& max_memory_flag) {
  int64_t limit = 0;
  if (!max_memory_flag.empty()) {
    auto l = parse_bytes("--max-memory", max_memory_flag);
    if (!l) return l.error();
    limit = *l;
  }
  return check_memory_budget(path, kv_bytes, limit);
}

Result<int64_t> parse_bytes(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  double mult = 0;
  for (auto [u, m] : {std::pair<const char*, double>{"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0},
                      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}})
    if (unit == u) mult = m;
  if (used == 0 || mult == 0 || !(v > 0) || v * mult > 9e18)
    return make_error(flag + " = '" + text + "' is not a size", "write e.g. 512MiB, 8GiB or a number of bytes");
  return int64_t(v * mult);
}

}  // namespace ggflow::runtime
