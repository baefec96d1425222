// --nproc_per_node's values as torch 2.x's torchrun accepts them, counted over the node's
// accelerators: on hand-made findings, and through the command line over fabricated device
// trees (DDPRUN_DEVICE_ROOT, tests/agent/fake_device_tree.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "launcher/command_line.h"
#include "launcher/value_parsers.h"
#include "tests/agent/fake_device_tree.h"
#include "tests/support/temp_dir.h"

namespace ddprun::launcher {
namespace {

using agent::devices::Accelerators;
using agent::devices::Vendor;

constexpr int kCpus = 16;

// Sets (or, with nullptr, unsets) an environment variable for one test and restores it after.
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~EnvOverride() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

Accelerators kind(Vendor vendor, int installed, int visible, std::string narrowed_by = "") {
  return Accelerators{vendor, installed, visible, std::move(narrowed_by)};
}

NprocPerNode resolve_ok(const std::string& text, const std::vector<Accelerators>& found) {
  auto nproc = resolve_nproc_per_node(text, found, kCpus);
  EXPECT_TRUE(nproc) << nproc.status().message();
  return nproc ? nproc.value() : NprocPerNode{};
}

std::string resolve_error(const std::string& text, const std::vector<Accelerators>& found) {
  auto nproc = resolve_nproc_per_node(text, found, kCpus);
  EXPECT_FALSE(nproc);
  if (nproc) return "";
  EXPECT_TRUE(nproc.status().is_invalid_argument());
  return nproc.status().message();
}

TEST(NprocPerNode, GpuCountsNvidiaElseAmdGpus) {
  EXPECT_EQ(resolve_ok("gpu", {kind(Vendor::kNvidia, 8, 8)}).count, 8);
  const NprocPerNode amd = resolve_ok("gpu", {kind(Vendor::kAmd, 8, 2)});
  EXPECT_EQ(amd.count, 2);
  EXPECT_EQ(amd.accelerator, Vendor::kAmd);
  // Every NVIDIA GPU hidden: the AMD ones count.
  EXPECT_EQ(resolve_ok("gpu", {kind(Vendor::kNvidia, 1, 0), kind(Vendor::kAmd, 4, 4)}).count, 4);
}

TEST(NprocPerNode, XpuCountsIntelGpus) {
  const NprocPerNode intel =
      resolve_ok("xpu", {kind(Vendor::kNvidia, 2, 2), kind(Vendor::kIntel, 4, 3)});
  EXPECT_EQ(intel.count, 3);
  EXPECT_EQ(intel.accelerator, Vendor::kIntel);
}

TEST(NprocPerNode, AutoTakesTheFirstVisibleAcceleratorElseTheCpus) {
  EXPECT_EQ(resolve_ok("auto", {kind(Vendor::kIntel, 4, 4)}).count, 4);
  EXPECT_EQ(resolve_ok("auto", {kind(Vendor::kAmd, 2, 2), kind(Vendor::kIntel, 4, 4)}).accelerator,
            Vendor::kAmd);
  EXPECT_EQ(resolve_ok("auto", {kind(Vendor::kNvidia, 2, 0), kind(Vendor::kIntel, 4, 1)}).count, 1);
  const NprocPerNode none = resolve_ok("auto", {kind(Vendor::kNvidia, 2, 0)});
  EXPECT_EQ(none.count, kCpus);
  EXPECT_EQ(none.accelerator, std::nullopt);
  EXPECT_EQ(resolve_ok("auto", {}).count, kCpus);
  EXPECT_EQ(resolve_ok("cpu", {kind(Vendor::kNvidia, 8, 8)}).count, kCpus);
}

TEST(NprocPerNode, ANumberKeepsTheNodesAcceleratorForVirtualLocalRank) {
  const NprocPerNode two = resolve_ok("2", {kind(Vendor::kIntel, 4, 4)});
  EXPECT_EQ(two.count, 2);
  EXPECT_EQ(two.accelerator, Vendor::kIntel);
  EXPECT_EQ(resolve_ok("2", {}).accelerator, std::nullopt);
}

TEST(NprocPerNode, NoVisibleDeviceIsAnErrorSayingWhy) {
  const std::string hidden =
      resolve_error("gpu", {kind(Vendor::kAmd, 4, 0, "ROCR_VISIBLE_DEVICES=-1")});
  EXPECT_NE(hidden.find("--nproc_per_node=gpu"), std::string::npos) << hidden;
  EXPECT_NE(hidden.find("4 AMD GPU(s)"), std::string::npos) << hidden;
  EXPECT_NE(hidden.find("ROCR_VISIBLE_DEVICES=-1 hides them all"), std::string::npos) << hidden;
  const std::string none = resolve_error("gpu", {});
  EXPECT_NE(none.find("no NVIDIA or AMD GPU"), std::string::npos) << none;
  const std::string intel_only = resolve_error("gpu", {kind(Vendor::kIntel, 2, 2)});
  EXPECT_NE(intel_only.find("2 Intel GPU(s) are there: --nproc_per_node=xpu"), std::string::npos)
      << intel_only;
  const std::string no_xpu = resolve_error("xpu", {kind(Vendor::kNvidia, 2, 2)});
  EXPECT_NE(no_xpu.find("no Intel GPU"), std::string::npos) << no_xpu;
  EXPECT_NE(no_xpu.find("--nproc_per_node=gpu"), std::string::npos) << no_xpu;
}

TEST(NprocPerNode, OtherValuesAreErrorsNamingTheFlagAndItsValues) {
  for (const char* bad : {"0", "-2", "", "GPU", "cuda", "npu", "privateuseone", "2x"}) {
    const std::string error = resolve_error(bad, {kind(Vendor::kNvidia, 2, 2)});
    EXPECT_NE(error.find("--nproc_per_node=" + std::string(bad) + " is invalid"), std::string::npos)
        << error;
    EXPECT_NE(error.find("cpu, gpu, xpu or auto"), std::string::npos) << error;
  }
}

// ddprun's own command line over a fabricated node (DDPRUN_DEVICE_ROOT): what a user on that
// node would get.
class NprocOnFakeNodeTest : public ::testing::Test {
 protected:
  LaunchConfig parse_ok(const std::vector<std::string>& args) {
    auto parsed = parse_command_line(args);
    EXPECT_TRUE(parsed.config) << parsed.output;
    return parsed.config.value_or(LaunchConfig{});
  }

  ddprun::testing::TempDir temp_;
  ddprun::testing::FakeDeviceTree tree_{temp_.path()};
  EnvOverride root_{"DDPRUN_DEVICE_ROOT", temp_.path().c_str()};
  EnvOverride python_{"PYTHON_EXEC", "/bin/sh"};  // no test depends on an interpreter
  EnvOverride cuda_{"CUDA_VISIBLE_DEVICES", nullptr};
  EnvOverride hip_{"HIP_VISIBLE_DEVICES", nullptr};
  EnvOverride rocr_{"ROCR_VISIBLE_DEVICES", nullptr};
  EnvOverride ze_{"ZE_AFFINITY_MASK", nullptr};
  EnvOverride hierarchy_{"ZE_FLAT_DEVICE_HIERARCHY", nullptr};
};

TEST_F(NprocOnFakeNodeTest, GpuOnAnAmdNodeCountsItsVisibleGpus) {
  tree_.add_kfd_cpu();
  for (std::uint64_t id : {11ULL, 12ULL, 13ULL}) tree_.add_kfd_gpu(id);
  const LaunchConfig all = parse_ok({"--nproc_per_node", "gpu", "t.py"});
  EXPECT_EQ(all.agent.nproc_per_node, 3);
  EXPECT_EQ(all.agent.accelerator, Vendor::kAmd);
  EnvOverride hip("HIP_VISIBLE_DEVICES", "2,0");
  EXPECT_EQ(parse_ok({"--nproc-per-node=gpu", "t.py"}).agent.nproc_per_node, 2);
  EXPECT_EQ(parse_nproc_per_node("auto").value(), 2);
}

TEST_F(NprocOnFakeNodeTest, XpuOnAnIntelNodeAndGpuOnANvidiaNode) {
  tree_.add_drm_device("0000:29:00.0", 0x8086, "xe", 0, 128, 2);
  EXPECT_EQ(parse_ok({"--nproc_per_node", "xpu", "t.py"}).agent.nproc_per_node, 2);
  auto gpu = parse_command_line({"--nproc_per_node", "gpu", "t.py"});
  ASSERT_FALSE(gpu.config);
  EXPECT_EQ(gpu.exit_code, 2);
  EXPECT_NE(gpu.output.find("--nproc_per_node=xpu"), std::string::npos) << gpu.output;
  tree_.add_nvidia_gpu("0000:1b:00.0", "GPU-1");
  tree_.add_nvidia_gpu("0000:1c:00.0", "GPU-2");
  EnvOverride cuda("CUDA_VISIBLE_DEVICES", "1");
  const LaunchConfig nvidia = parse_ok({"--nproc_per_node", "gpu", "t.py"});
  EXPECT_EQ(nvidia.agent.nproc_per_node, 1);
  EXPECT_EQ(nvidia.agent.accelerator, Vendor::kNvidia);
}

TEST_F(NprocOnFakeNodeTest, CpuOnlyNode) {
  EXPECT_FALSE(parse_nproc_per_node("gpu"));
  EXPECT_GE(parse_nproc_per_node("auto").value(), 1);
  EXPECT_GE(parse_nproc_per_node("cpu").value(), 1);
  EXPECT_EQ(parse_ok({"t.py"}).agent.accelerator, std::nullopt);
}

}  // namespace
}  // namespace ddprun::launcher
