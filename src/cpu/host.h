// What this process may use of the machine: its cores (CPU affinity and the cgroup's CPU quota,
// not only the host's count) and its memory (the cgroup's memory limit), so that defaults made
// from them (threads, the memory budget) fit a container or a `taskset` as they fit a bare host.
//
// cgroup v2 (`0::/path` in /proc/self/cgroup): cpu.max "QUOTA PERIOD" (or "max PERIOD") and
// memory.max / memory.current in /sys/fs/cgroup/<path> and every ancestor up to the root (the
// tightest wins). cgroup v1: cpu.cfs_quota_us / cpu.cfs_period_us under the cpu controller's
// mount, memory.limit_in_bytes / memory.usage_in_bytes under the memory controller's.
#pragma once

#include <cstdint>
#include <string>

namespace ggflow::cpu {

// The cores a default thread count should use: min(host cores, CPUs in the affinity mask,
// ceil(cgroup CPU quota / period)), at least 1. Read once.
int usable_cores();

// The cgroup's memory limit and usage in bytes (the working set: usage minus the inactive file
// pages of memory.stat, which the kernel reclaims first); limit -1 when there is none.
struct CgroupMemory {
  int64_t limit = -1;
  int64_t usage = -1;
};
CgroupMemory cgroup_memory();

// The pieces, for tests: `proc_cgroup` is /proc/self/cgroup's text, `root` the cgroup file
// system's mount point (/sys/fs/cgroup; v1 controllers are its sub-directories).
double cgroup_cpu_quota(const std::string& proc_cgroup, const std::string& root);  // cores; 0: no quota
CgroupMemory cgroup_memory(const std::string& proc_cgroup, const std::string& root);

}  // namespace ggflow::cpu
