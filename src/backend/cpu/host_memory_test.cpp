// read_host_memory on fake /proc and cgroup trees: MemAvailable alone, a v2 limit (and its ancestors'), a v1 limit.
#include "backend/cpu/host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace rs {
namespace {

namespace fs = std::filesystem;

class HostMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("rs_host_memory_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(proc() / "self");
    write(proc() / "meminfo", "MemTotal:       100000 kB\nMemFree:         1000 kB\nMemAvailable:    80000 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path proc() const { return root_ / "proc"; }
  fs::path cgroup() const { return root_ / "cgroup"; }
  static void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  static constexpr size_t kKiB = 1024;
  fs::path root_;
};

TEST_F(HostMemoryTest, MeminfoAloneWithoutACgroupLimit) {
  write(proc() / "self" / "cgroup", "0::/\n");
  write(cgroup() / "memory.max", "max\n");
  const HostMemory m = read_host_memory(proc(), cgroup());
  EXPECT_EQ(m.total_bytes, 100000 * kKiB);
  EXPECT_EQ(m.available_bytes, 80000 * kKiB);
  EXPECT_FALSE(m.cgroup_limit_bytes.has_value());
}

TEST_F(HostMemoryTest, CgroupV2LimitLessItsWorkingSet) {
  write(proc() / "self" / "cgroup", "0::/\n");
  write(cgroup() / "memory.max", std::to_string(40000 * kKiB) + "\n");
  write(cgroup() / "memory.current", std::to_string(15000 * kKiB) + "\n");
  write(cgroup() / "memory.stat", "anon 1\ninactive_file " + std::to_string(5000 * kKiB) + "\nactive_file 7\n");
  const HostMemory m = read_host_memory(proc(), cgroup());
  ASSERT_TRUE(m.cgroup_limit_bytes.has_value());
  EXPECT_EQ(*m.cgroup_limit_bytes, 40000 * kKiB);
  EXPECT_EQ(m.total_bytes, 40000 * kKiB);
  EXPECT_EQ(m.available_bytes, 30000 * kKiB);  // 40000 - (15000 - 5000)
}

TEST_F(HostMemoryTest, CgroupV2AncestorsLimitToo) {
  write(proc() / "self" / "cgroup", "0::/outer/inner\n");
  write(cgroup() / "outer" / "inner" / "memory.max", "max\n");
  write(cgroup() / "outer" / "memory.max", std::to_string(20000 * kKiB) + "\n");
  write(cgroup() / "outer" / "memory.current", std::to_string(12000 * kKiB) + "\n");
  const HostMemory m = read_host_memory(proc(), cgroup());
  ASSERT_TRUE(m.cgroup_limit_bytes.has_value());
  EXPECT_EQ(*m.cgroup_limit_bytes, 20000 * kKiB);
  EXPECT_EQ(m.available_bytes, 8000 * kKiB);
}

TEST_F(HostMemoryTest, CgroupV1MemoryController) {
  write(proc() / "self" / "cgroup", "12:cpu,cpuacct:/x\n11:memory:/docker/abc\n");
  // The container's mount lacks the host path /docker/abc: its own cgroup is the controller's root.
  write(cgroup() / "memory" / "memory.limit_in_bytes", std::to_string(60000 * kKiB) + "\n");
  write(cgroup() / "memory" / "memory.usage_in_bytes", std::to_string(50000 * kKiB) + "\n");
  write(cgroup() / "memory" / "memory.stat", "total_inactive_file " + std::to_string(10000 * kKiB) + "\n");
  const HostMemory m = read_host_memory(proc(), cgroup());
  EXPECT_EQ(m.total_bytes, 60000 * kKiB);
  EXPECT_EQ(m.available_bytes, 20000 * kKiB);
}

TEST_F(HostMemoryTest, CgroupV1UnlimitedIsIgnored) {
  write(proc() / "self" / "cgroup", "11:memory:/\n");
  write(cgroup() / "memory" / "memory.limit_in_bytes", "9223372036854771712\n");
  const HostMemory m = read_host_memory(proc(), cgroup());
  EXPECT_FALSE(m.cgroup_limit_bytes.has_value());
  EXPECT_EQ(m.available_bytes, 80000 * kKiB);
}

TEST_F(HostMemoryTest, UnreadableMeminfoGivesZeros) {
  fs::remove(proc() / "meminfo");
  const HostMemory m = read_host_memory(proc(), cgroup());
  EXPECT_EQ(m.total_bytes, 0u);
  EXPECT_EQ(m.available_bytes, 0u);
}

}  // namespace
}  // namespace rs
