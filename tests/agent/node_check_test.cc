// Issue 38: the built-in node checks on fakes: a fake NVML (fake_nvml.cc, loaded by path) and
// fake /sys trees in temp dirs. Each check passes on a healthy fake and fails on a broken one
// with a message naming the device, interface or path and the value seen.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/health/builtin/check_outcome.h"
#include "agent/health/builtin/gpu_check.h"
#include "agent/health/builtin/nic_check.h"
#include "agent/health/builtin/node_check_spec.h"
#include "agent/health/builtin/nvml_library.h"
#include "agent/health/builtin/path_check.h"
#include "tests/support/temp_dir.h"

namespace ddprun::agent::builtin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// ---- the flag's value ----

TEST(NodeCheckSpecTest, ACommandStaysACommand) {
  auto value = split_health_check("nvidia-smi --query-gpu=name,ecc --format=csv");
  ASSERT_TRUE(value.ok()) << value.error_message();
  EXPECT_EQ(value->builtin, "");
  EXPECT_EQ(value->command, "nvidia-smi --query-gpu=name,ecc --format=csv");
}

TEST(NodeCheckSpecTest, BuiltinItemsThenACommand) {
  auto value = split_health_check(
      "builtin:gpu=8,nic=eth0+mlx5_0,path=/data:min_free=10G  "
      "./site-check.sh --strict");
  ASSERT_TRUE(value.ok()) << value.error_message();
  EXPECT_EQ(value->builtin, "gpu=8,nic=eth0+mlx5_0,path=/data:min_free=10G");
  EXPECT_EQ(value->command, "./site-check.sh --strict");
  auto spec = parse_node_checks(value->builtin);
  ASSERT_TRUE(spec.ok()) << spec.error_message();
  ASSERT_TRUE(spec->gpu && spec->gpu->expected_count);
  EXPECT_EQ(*spec->gpu->expected_count, 8);
  ASSERT_TRUE(spec->nic);
  EXPECT_THAT(spec->nic->names, ElementsAre("eth0", "mlx5_0"));
  ASSERT_EQ(spec->paths.size(), 1u);
  EXPECT_EQ(spec->paths[0].path, "/data");
  EXPECT_EQ(spec->paths[0].min_free_bytes, 10ULL << 30);
}

TEST(NodeCheckSpecTest, BadItemsAreErrorsNamingThem) {
  EXPECT_THAT(split_health_check("builtin:gpu,nvme").error_message(),
              HasSubstr("built-in check 'nvme': unknown"));
  EXPECT_THAT(parse_node_checks("path=/data:min_free=10Q").error_message(),
              HasSubstr("'10Q' is not a size"));
  EXPECT_THAT(parse_node_checks("path=data").error_message(), HasSubstr("absolute path"));
  EXPECT_THAT(parse_node_checks("gpu=0").error_message(), HasSubstr("built-in check 'gpu=0'"));
  EXPECT_THAT(parse_node_checks("nic=eth0+").error_message(), HasSubstr("interface names"));
  EXPECT_THAT(split_health_check("builtin:").error_message(), HasSubstr("names no check"));
  EXPECT_EQ(parse_byte_size("512").value(), 512u);
  EXPECT_EQ(parse_byte_size("3k").value(), 3072u);
  EXPECT_FALSE(parse_byte_size("99999999999T").ok());  // would overflow
}

TEST(NodeCheckSpecTest, OutcomesRoundTripThroughTheirJson) {
  const std::vector<CheckOutcome> outcomes{{"gpu", {"GPU 1: lost"}}, {"path", {}}};
  auto back = outcomes_from_json(outcomes_to_json(outcomes));
  ASSERT_TRUE(back.ok()) << back.error_message();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].check, "gpu");
  EXPECT_THAT((*back)[0].problems, ElementsAre("GPU 1: lost"));
  EXPECT_TRUE((*back)[1].passed());
  EXPECT_FALSE(outcomes_from_json("{\"checks\": 3}").ok());
  EXPECT_FALSE(outcomes_from_json("not json").ok());
}

// ---- GPUs: the fake NVML and fake AMD sysfs trees ----

class GpuCheckTest : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("DDPRUN_FAKE_NVML_CONFIG", (dir_ / "nvml").c_str(), 1); }
  void TearDown() override { ::unsetenv("DDPRUN_FAKE_NVML_CONFIG"); }
  void nvml(const std::string& config) { write_file(dir_ / "nvml", config); }
  CheckOutcome check(GpuCheckSpec spec = {}) {
    return check_gpus(spec, {DDPRUN_FAKE_NVML, dir_ / "sys"});
  }
  void amd_card(const std::string& card, const std::string& umc, const std::string& pages) {
    const std::string device = dir_ / ("sys/class/drm/" + card + "/device");
    write_file(device + "/vendor", "0x1002\n");
    if (!umc.empty()) write_file(device + "/ras/umc_err_count", umc);
    if (!pages.empty()) write_file(device + "/ras/gpu_vram_bad_pages", pages);
  }

  testing::TempDir dir_;
};

TEST_F(GpuCheckTest, HealthyGpusPass) {
  nvml("devices 2\n");
  EXPECT_THAT(check().problems, IsEmpty());
  EXPECT_THAT(check({2}).problems, IsEmpty());
}

TEST_F(GpuCheckTest, EachProblemNamesTheGpuAndTheValue) {
  nvml("devices 4\necc 1 3\nlost 2\nremap_pending 3\nretired_pending 0\n");
  const CheckOutcome outcome = check();
  EXPECT_EQ(outcome.check, "gpu");
  EXPECT_THAT(outcome.problems,
              ElementsAre("GPU 0: pages retired for memory errors wait for a GPU reset",
                          "GPU 1: 3 uncorrectable ECC errors since the driver loaded",
                          "GPU 2: fallen off the bus (NVML: GPU is lost)",
                          "GPU 3: rows remapped for memory errors wait for a GPU reset"));
}

TEST_F(GpuCheckTest, TheCountIsCheckedWhenGiven) {
  nvml("devices 7\n");
  EXPECT_THAT(check({8}).problems,
              ElementsAre("7 GPUs seen (7 NVIDIA, 0 AMD), expected 8 (builtin:gpu=8)"));
}

TEST_F(GpuCheckTest, NoNvmlAndNoAmdGpuFailsSayingBoth) {
  const CheckOutcome outcome = check_gpus({}, {dir_ / "no-such-libnvidia-ml.so", dir_ / "sys"});
  ASSERT_EQ(outcome.problems.size(), 1u);
  EXPECT_THAT(outcome.problems[0], HasSubstr("no GPU seen: NVML could not be loaded"));
  EXPECT_THAT(outcome.problems[0], HasSubstr("no AMD GPU under " + dir_.path() + "/sys"));
}

TEST_F(GpuCheckTest, NvmlThatCannotInitialiseIsNamed) {
  nvml("init_error 9\n");
  EXPECT_THAT(check().problems,
              ElementsAre(HasSubstr("could not be initialised: Driver Not Loaded (code 9)")));
}

TEST_F(GpuCheckTest, AmdGpusAreCountedAndTheirRasCountersRead) {
  const std::string no_nvml = dir_ / "no-such-libnvidia-ml.so";
  amd_card("card0", "ue: 0\nce: 5\n", "0x00000001 : 0x00001000 : R\n");
  amd_card("card1", "ue: 2\nce: 0\n", "0x00000002 : 0x00001000 : P\n0x03 : 0x1000 : P\n");
  write_file(dir_ / "sys/class/drm/card2/device/vendor", "0x8086\n");   // not AMD
  write_file(dir_ / "sys/class/drm/card0-DP-1/status", "connected\n");  // a connector
  const CheckOutcome outcome = check_gpus({2}, {no_nvml, dir_ / "sys"});
  const std::string card1 = "AMD GPU card1 (" + dir_.path() + "/sys/class/drm/card1/device)";
  EXPECT_THAT(outcome.problems,
              ElementsAre(card1 + ": 2 uncorrectable memory errors (ras/umc_err_count)",
                          card1 + ": 2 bad VRAM pages pending retirement "
                                  "(ras/gpu_vram_bad_pages; a reset is needed)"));
}

// The library wrapper as the memory wait uses it: the per-process list, grown past its first
// guess, and entries that disappear after some answers.
TEST_F(GpuCheckTest, ProcessListsComeBackWholeAndChangeOverTime) {
  std::string config = "devices 1\n";
  for (int pid = 100; pid < 140; ++pid) config += "process 0 " + std::to_string(pid) + " 4096\n";
  config += "process 0 7 1048576 2\n";
  nvml(config);
  auto nvml = NvmlLibrary::open(DDPRUN_FAKE_NVML);
  ASSERT_TRUE(nvml.ok()) << nvml.error_message();
  NvmlLibrary::Device device = nullptr;
  ASSERT_EQ((*nvml)->device(0, &device), kNvmlSuccess);
  for (size_t expected : {41u, 41u, 40u}) {
    std::vector<GpuProcess> listed;
    ASSERT_EQ((*nvml)->compute_processes(device, 0, &listed), kNvmlSuccess);
    EXPECT_EQ(listed.size(), expected);
  }
}

// ---- network interfaces: fake /sys/class/{net,infiniband} ----

class NicCheckTest : public ::testing::Test {
 protected:
  // `carrier` null: no carrier attribute (the kernel refuses to read it on a down interface).
  void interface(const std::string& name, const std::string& operstate, const char* carrier) {
    const std::string dir = dir_ / ("sys/class/net/" + name);
    write_file(dir + "/operstate", operstate + "\n");
    std::filesystem::remove(dir + "/carrier");
    if (carrier) write_file(dir + "/carrier", std::string(carrier) + "\n");
  }
  void ib_port(const std::string& device, int port, const std::string& state) {
    write_file(
        dir_ / ("sys/class/infiniband/" + device + "/ports/" + std::to_string(port) + "/state"),
        state + "\n");
  }
  CheckOutcome check(std::vector<std::string> names, const std::string& address = "127.0.0.1") {
    return check_nics({std::move(names)}, address, dir_ / "sys");
  }
  testing::TempDir dir_;
};

TEST_F(NicCheckTest, TheNodesOwnInterfaceIsFoundByItsAddress) {
  ASSERT_EQ(interface_of_address("127.0.0.1").value(), "lo");
  interface("lo", "unknown", "1");  // what loopback reports
  EXPECT_THAT(check({}).problems, IsEmpty());
  interface("lo", "down", nullptr);  // carrier unreadable when down, as the kernel does
  EXPECT_THAT(check({}).problems, ElementsAre("interface lo: operstate down, carrier unreadable"));
  EXPECT_THAT(check({}, "192.0.2.77").problems,  // TEST-NET-1: on no interface here
              ElementsAre("no interface of this node has its address 192.0.2.77"));
}

TEST_F(NicCheckTest, NamedInterfacesAndInfinibandPorts) {
  interface("eth0", "up", "1");
  interface("eth1", "up", "0");
  ib_port("mlx5_0", 1, "4: ACTIVE");
  ib_port("mlx5_1", 1, "4: ACTIVE");
  ib_port("mlx5_1", 2, "1: DOWN");
  EXPECT_THAT(check({"eth0", "mlx5_0"}).problems, IsEmpty());
  EXPECT_THAT(check({"eth1", "mlx5_1", "ib7"}).problems,
              ElementsAre("interface eth1: operstate up, carrier 0",
                          "InfiniBand mlx5_1 port 2: state 1: DOWN",
                          HasSubstr("interface ib7: not found")));
}

TEST_F(NicCheckTest, WithoutNamesEveryInfinibandPortIsChecked) {
  interface("lo", "unknown", "1");
  ib_port("mlx5_0", 1, "4: ACTIVE");
  EXPECT_THAT(check({}).problems, IsEmpty());
  ib_port("mlx5_3", 1, "2: INIT");
  EXPECT_THAT(check({}).problems, ElementsAre("InfiniBand mlx5_3 port 1: state 2: INIT"));
}

// ---- paths ----

TEST(PathCheckTest, AWritableDirectoryPassesAndLeavesNothingBehind) {
  testing::TempDir dir;
  EXPECT_THAT(check_paths({{dir.path(), 1024}}).problems, IsEmpty());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(PathCheckTest, EachFailureNamesThePathAndWhatWasSeen) {
  testing::TempDir dir;
  write_file(dir / "file", "x");
  const CheckOutcome outcome =
      check_paths({{dir / "missing", 0}, {dir / "file", 0}, {dir.path(), ~0ULL >> 1}});
  ASSERT_EQ(outcome.problems.size(), 3u);
  EXPECT_EQ(outcome.problems[0],
            "path " + dir.path() + "/missing: cannot be opened: No such file or directory");
  EXPECT_EQ(outcome.problems[1], "path " + dir.path() + "/file: is not a directory");
  EXPECT_THAT(outcome.problems[2], HasSubstr("path " + dir.path() + ": "));
  EXPECT_THAT(outcome.problems[2], HasSubstr("free, below min_free 8.0 EiB"));
}

}  // namespace
}  // namespace ddprun::agent::builtin
