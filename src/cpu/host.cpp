// The machine as this process may use it (see host.h).
#include "cpu/host.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace ggflow::cpu {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// An integer file (memory.max, cfs_quota_us, ...); -1 when missing, "max" or not a number.
int64_t read_int(const std::string& path) {
  std::istringstream in(read_text(path));
  int64_t v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// The cgroup path of a controller in /proc/self/cgroup ("ID:controllers:/path"): v2's line is
// "0::/path"; a v1 line lists `controller` among its comma-separated controllers.
std::string cgroup_path(const std::string& proc_cgroup, const std::string& controller) {
  std::istringstream in(proc_cgroup);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string ctrls = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controller.empty() ? ctrls.empty() : ("," + ctrls + ",").find("," + controller + ",") != std::string::npos)
      return path;
  }
  return {};
}

// dir and each of its ancestors below `root`, innermost first: a limit anywhere above applies too.
std::vector<std::string> ancestors(const std::string& root, std::string path) {
  std::vector<std::string> dirs;
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (;;) {
    dirs.push_back(root + path);
    if (path.empty()) break;
    path = path.substr(0, path.rfind('/'));
  }
  return dirs;
}

// The working set: usage minus the inactive file pages (page cache the kernel reclaims before it
// would OOM-kill), as the kubelet counts it; `stat_key` names them in memory.stat.
int64_t working_set(const std::string& dir, int64_t usage, const std::string& stat_key) {
  if (usage < 0) return usage;
  std::istringstream in(read_text(dir + "/memory.stat"));
  std::string key;
  int64_t v = 0;
  while (in >> key >> v)
    if (key == stat_key) return std::max<int64_t>(0, usage - v);
  return usage;
}

}  // namespace

double cgroup_cpu_quota(const std::string& proc_cgroup, const std::string& root) {
  double cores = 0;
  auto take = [&](double c) {
    if (c > 0 && (cores == 0 || c < cores)) cores = c;
  };
  if (proc_cgroup.find("0::") != std::string::npos) {  // v2: cpu.max "QUOTA PERIOD" or "max PERIOD"
    for (const auto& d : ancestors(root, cgroup_path(proc_cgroup, ""))) {
      std::istringstream in(read_text(d + "/cpu.max"));
      std::string quota;
      double period = 0;
      if (in >> quota >> period && quota != "max" && period > 0) take(std::strtod(quota.c_str(), nullptr) / period);
    }
  }
  const std::string v1 = cgroup_path(proc_cgroup, "cpu");
  if (!v1.empty())
    for (const std::string mount : {"/cpu,cpuacct", "/cpu"})
      for (const auto& d : ancestors(root + mount, v1)) {
        const int64_t q = read_int(d + "/cpu.cfs_quota_us"), p = read_int(d + "/cpu.cfs_period_us");
        if (q > 0 && p > 0) take(double(q) / double(p));
      }
  return cores;
}

CgroupMemory cgroup_memory(const std::string& proc_cgroup, const std::string& root) {
  CgroupMemory m;
  auto take = [&](int64_t limit, int64_t usage) {
    if (limit <= 0 || (m.limit > 0 && limit >= m.limit)) return;
    m.limit = limit, m.usage = usage;
  };
  if (proc_cgroup.find("0::") != std::string::npos)
    for (const auto& d : ancestors(root, cgroup_path(proc_cgroup, "")))
      take(read_int(d + "/memory.max"), working_set(d, read_int(d + "/memory.current"), "inactive_file"));
  const std::string v1 = cgroup_path(proc_cgroup, "memory");
  if (!v1.empty())
    for (const auto& d : ancestors(root + "/memory", v1)) {
      const int64_t limit = read_int(d + "/memory.limit_in_bytes");
      if (limit < (int64_t(1) << 60))  // v1 writes ~2^63 for none
        take(limit, working_set(d, read_int(d + "/memory.usage_in_bytes"), "total_inactive_file"));
    }
  return m;
}

CgroupMemory cgroup_memory() { return cgroup_memory(read_text("/proc/self/cgroup"), "/sys/fs/cgroup"); }

int usable_cores() {
  static const int cores = [] {
    int n = static_cast<int>(std::thread::hardware_concurrency());
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
      const int in_mask = CPU_COUNT(&set);
      if (in_mask > 0 && (n <= 0 || in_mask < n)) n = in_mask;
    }
    const double quota = cgroup_cpu_quota(read_text("/proc/self/cgroup"), "/sys/fs/cgroup");
    if (quota > 0) {
      const int q = std::max(1, static_cast<int>(std::ceil(quota - 1e-9)));
      if (n <= 0 || q < n) n = q;
    }
    return std::max(1, n);
  }();
  return cores;
}

}  // namespace ggflow::cpu
