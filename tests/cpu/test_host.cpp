// cpu/host.h: the CPU quota and memory limit read from cgroup v2 and v1 trees, written here into
// a temporary directory laid out as /sys/fs/cgroup is, with /proc/self/cgroup's text beside them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "cpu/host.h"

namespace ggflow::cpu {
namespace {

namespace fs = std::filesystem;

class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ggflow-cgroup-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void put(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  std::string root() const { return root_.string(); }
  fs::path root_;
};

TEST_F(CgroupTree, V2QuotaIsTheTightestOfTheCgroupAndItsAncestors) {
  const std::string self = "0::/kubepods/pod1/ctr\n";
  EXPECT_EQ(cgroup_cpu_quota(self, root()), 0.0);  // no files: no quota
  put("kubepods/pod1/ctr/cpu.max", "max 100000\n");
  EXPECT_EQ(cgroup_cpu_quota(self, root()), 0.0);  // "max": unlimited
  put("kubepods/pod1/cpu.max", "250000 100000\n");  // the pod: 2.5 cores
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota(self, root()), 2.5);
  put("kubepods/pod1/ctr/cpu.max", "50000 100000\n");  // the container: half a core
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota(self, root()), 0.5);
  EXPECT_EQ(cgroup_cpu_quota("", root()), 0.0);  // no /proc/self/cgroup
}

TEST_F(CgroupTree, V2NamespaceRootReadsTheMountItself) {
  put("cpu.max", "200000 100000\n");
  put("memory.max", "2147483648\n");
  put("memory.current", "104857600\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("0::/\n", root()), 2.0);
  const CgroupMemory m = cgroup_memory("0::/\n", root());
  EXPECT_EQ(m.limit, 2147483648);
  EXPECT_EQ(m.usage, 104857600);
}

TEST_F(CgroupTree, V2MemoryTakesTheTightestLimitWithItsUsage) {
  const std::string self = "0::/a/b\n";
  EXPECT_EQ(cgroup_memory(self, root()).limit, -1);
  put("a/b/memory.max", "max\n");
  put("a/b/memory.current", "10\n");
  EXPECT_EQ(cgroup_memory(self, root()).limit, -1);
  put("a/memory.max", "4096\n");
  put("a/memory.current", "1000\n");
  CgroupMemory m = cgroup_memory(self, root());
  EXPECT_EQ(m.limit, 4096);
  EXPECT_EQ(m.usage, 1000);
  put("a/b/memory.max", "2048\n");
  m = cgroup_memory(self, root());
  EXPECT_EQ(m.limit, 2048);
  EXPECT_EQ(m.usage, 10);
  put("a/b/memory.current", "1500\n");  // 1000 of it reclaimable page cache: the working set is 500
  put("a/b/memory.stat", "anon 400\nfile 1100\nactive_file 100\ninactive_file 1000\n");
  EXPECT_EQ(cgroup_memory(self, root()).usage, 500);
}

TEST_F(CgroupTree, V1ControllersAreFoundByName) {
  const std::string self = "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n";
  put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  put("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_cpu_quota(self, root()), 0.0);
  put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "300000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota(self, root()), 3.0);
  put("memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  EXPECT_EQ(cgroup_memory(self, root()).limit, -1);
  put("memory/docker/abc/memory.limit_in_bytes", "1073741824\n");
  put("memory/docker/abc/memory.usage_in_bytes", "5000\n");
  const CgroupMemory m = cgroup_memory(self, root());
  EXPECT_EQ(m.limit, 1073741824);
  EXPECT_EQ(m.usage, 5000);
}

TEST(Host, UsableCoresIsAtLeastOneAndAtMostTheMachines) {
  const int n = usable_cores();
  EXPECT_GE(n, 1);
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw > 0) EXPECT_LE(n, static_cast<int>(hw));
}

}  // namespace
}  // namespace ggflow::cpu
