// --numa-binding's plan on fabricated machines: a sysfs tree written to a temp dir (two
// sockets, two NUMA nodes, SMT siblings, two L3 domains per node, GPUs on both nodes), and the
// pure planner on hand-made topologies. No real topology is assumed.
#include "agent/process/numa_binding.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ddprun::agent {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text << "\n";
}

// 2 sockets × 1 NUMA node × 4 cores × 2 threads: node 0 = CPUs 0-3,8-11 (core c has threads
// c and c+8), node 1 = CPUs 4-7,12-15. Each node has two L3 domains of two cores. GPUs 0 and 1
// on node 0, GPUs 2 and 3 on node 1 (PCI order), plus a NIC that must be ignored.
class FakeSysfs : public ::testing::Test {
 protected:
  ddprun::testing::TempDir temp_;  // tests/support
  void SetUp() override {
    root_ = temp_.path();
    write(root_ / "devices/system/node/node0/cpulist", "0-3,8-11");
    write(root_ / "devices/system/node/node1/cpulist", "4-7,12-15");
    write(root_ / "devices/system/node/online", "0-1");
    for (int cpu = 0; cpu < 16; ++cpu) {
      const int core = cpu % 8;
      const fs::path dir = root_ / ("devices/system/cpu/cpu" + std::to_string(cpu));
      write(dir / "topology/physical_package_id", std::to_string(core / 4));
      write(dir / "topology/thread_siblings_list",
            std::to_string(core) + "," + std::to_string(core + 8));
      const int l3 = (core / 2) * 2;  // cores {0,1}, {2,3}, {4,5}, {6,7}
      write(dir / "cache/index3/level", "3");
      write(dir / "cache/index3/shared_cpu_list",
            std::to_string(l3) + "-" + std::to_string(l3 + 1) + "," + std::to_string(l3 + 8) + "-" +
                std::to_string(l3 + 9));
    }
  }
  void add_gpus() {
    const char* slots[] = {"0000:17:00.0", "0000:3a:00.0", "0000:86:00.0", "0000:b1:00.0"};
    for (int i = 0; i < 4; ++i) {
      const fs::path dev = root_ / "bus/pci/devices" / slots[i];
      write(dev / "vendor", "0x10de");
      write(dev / "class", "0x030200");
      write(dev / "numa_node", i < 2 ? "0" : "1");
    }
    const fs::path nic = root_ / "bus/pci/devices/0000:18:00.0";
    write(nic / "vendor", "0x15b3");
    write(nic / "class", "0x020000");
    write(nic / "numa_node", "0");
  }

  std::vector<std::set<int>> plan(NumaMode mode, int nproc, const std::set<int>& allowed = {}) {
    auto topology = read_cpu_topology(root_.string(), allowed);
    EXPECT_TRUE(topology.ok()) << topology.error_message();
    auto p = plan_numa_binding(mode, nproc, *topology);
    EXPECT_TRUE(p.ok()) << p.error_message();
    return p.ok() ? p.value() : std::vector<std::set<int>>{};
  }

  fs::path root_;
};

std::set<int> cpus(const std::string& list) { return parse_cpu_list(list).value(); }

TEST_F(FakeSysfs, GpuWorkersAreBoundToTheirGpusNode) {
  add_gpus();
  auto p = plan(NumaMode::kNode, 4);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0], cpus("0-3,8-11"));
  EXPECT_EQ(p[1], cpus("0-3,8-11"));
  EXPECT_EQ(p[2], cpus("4-7,12-15"));
  EXPECT_EQ(p[3], cpus("4-7,12-15"));
}

TEST_F(FakeSysfs, ExclusiveSplitsANodesPhysicalCoresWithTheirThreads) {
  add_gpus();
  auto p = plan(NumaMode::kExclusive, 4);
  EXPECT_EQ(p[0], cpus("0-1,8-9"));  // GPUs 0 and 1 share node 0's four cores
  EXPECT_EQ(p[1], cpus("2-3,10-11"));
  EXPECT_EQ(p[2], cpus("4-5,12-13"));
  EXPECT_EQ(p[3], cpus("6-7,14-15"));
}

TEST_F(FakeSysfs, CoreComplexGivesEachWorkerItsOwnL3Domain) {
  add_gpus();
  auto p = plan(NumaMode::kCoreComplex, 4);
  EXPECT_EQ(p[0], cpus("0-1,8-9"));
  EXPECT_EQ(p[1], cpus("2-3,10-11"));
  EXPECT_EQ(p[2], cpus("4-5,12-13"));
}

TEST_F(FakeSysfs, SocketModeCoversEveryNodeOfTheSocket) {
  add_gpus();
  auto p = plan(NumaMode::kSocket, 3);
  EXPECT_EQ(p[0], cpus("0-3,8-11"));
  EXPECT_EQ(p[2], cpus("4-7,12-15"));
}

TEST_F(FakeSysfs, WithoutGpusWorkersAreSpreadOverNodesInBlocks) {
  auto p = plan(NumaMode::kExclusive, 4);
  EXPECT_EQ(p[0], cpus("0-1,8-9"));
  EXPECT_EQ(p[1], cpus("2-3,10-11"));
  EXPECT_EQ(p[2], cpus("4-5,12-13"));
  EXPECT_EQ(p[3], cpus("6-7,14-15"));
  auto nodes = plan(NumaMode::kNode, 2);
  EXPECT_EQ(nodes[0], cpus("0-3,8-11"));
  EXPECT_EQ(nodes[1], cpus("4-7,12-15"));
}

TEST_F(FakeSysfs, OnlyCpusTheAgentMayUseCount) {
  auto p = plan(NumaMode::kNode, 2, cpus("0-1,4-5"));
  EXPECT_EQ(p[0], cpus("0-1"));
  EXPECT_EQ(p[1], cpus("4-5"));
}

TEST_F(FakeSysfs, ImpossiblePlansAreClearErrors) {
  auto topology = read_cpu_topology(root_.string(), cpus("0,8"));  // one core on node 0 only
  ASSERT_TRUE(topology.ok());
  auto crowded = plan_numa_binding(NumaMode::kExclusive, 2, *topology);
  ASSERT_FALSE(crowded.ok());
  EXPECT_NE(crowded.error_message().find("1 physical cores for 2 workers"), std::string::npos)
      << crowded.error_message();
  add_gpus();
  auto with_gpus = read_cpu_topology(root_.string(), {});
  auto too_many = plan_numa_binding(NumaMode::kNode, 5, *with_gpus);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error_message().find("5 workers but 4 GPUs"), std::string::npos);
  EXPECT_FALSE(read_cpu_topology((root_ / "nothing").string(), {}).ok());
}

TEST(CpuList, ParsesAndFormatsTheKernelsFormat) {
  EXPECT_EQ(cpus("0-2,5,7-8"), (std::set<int>{0, 1, 2, 5, 7, 8}));
  EXPECT_EQ(format_cpu_list({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_FALSE(parse_cpu_list("3-1").ok());
  EXPECT_FALSE(parse_cpu_list("a").ok());
  EXPECT_FALSE(parse_cpu_list("0-99999999").ok());
}

}  // namespace
}  // namespace ddprun::agent
