// Device counting on fabricated /proc and /sys trees (tests/agent/fake_device_tree.h): each
// vendor's devices as their drivers list them, and each visibility variable its runtime reads
// (agent/devices/accelerators.h). No real device is assumed.
#include "agent/devices/accelerators.h"

#include <gtest/gtest.h>

#include "tests/agent/fake_device_tree.h"
#include "tests/support/temp_dir.h"

namespace ddprun::agent::devices {
namespace {

using ddprun::testing::FakeDeviceTree;

class AcceleratorsTest : public ::testing::Test {
 protected:
  // The one vendor the tree has, seen with `env`; a test failure if there is not exactly one.
  Accelerators only(const Environment& env = {}) {
    const std::vector<Accelerators> found = detect_accelerators(temp_.path(), env);
    EXPECT_EQ(found.size(), 1u);
    return found.empty() ? Accelerators{} : found.front();
  }
  int visible(const Environment& env) { return only(env).visible; }

  ddprun::testing::TempDir temp_;
  FakeDeviceTree tree_{temp_.path()};
};

// Four NVIDIA GPUs with their UUIDs.
class NvidiaTree : public AcceleratorsTest {
 protected:
  void SetUp() override {
    tree_.add_nvidia_gpu("0000:1b:00.0", "GPU-11111111-aaaa");
    tree_.add_nvidia_gpu("0000:43:00.0", "GPU-22222222-bbbb");
    tree_.add_nvidia_gpu("0000:52:00.0", "GPU-33333333-cccc");
    tree_.add_nvidia_gpu("0000:9d:00.0", "GPU-44444444-dddd");
  }
};

TEST_F(NvidiaTree, EveryGpuTheDriverListsWithoutAVisibilityVariable) {
  const Accelerators nvidia = only();
  EXPECT_EQ(nvidia.vendor, Vendor::kNvidia);
  EXPECT_EQ(nvidia.installed, 4);
  EXPECT_EQ(nvidia.visible, 4);
  EXPECT_EQ(nvidia.narrowed_by, "");
}

TEST_F(NvidiaTree, CudaVisibleDevicesNarrowsByIndexAndUuid) {
  EXPECT_EQ(visible({{"CUDA_VISIBLE_DEVICES", "2,0"}}), 2);
  EXPECT_EQ(visible({{"CUDA_VISIBLE_DEVICES", "0,5,1"}}), 1);
  EXPECT_EQ(visible({{"CUDA_VISIBLE_DEVICES", ""}}), 0);
  EXPECT_EQ(visible({{"CUDA_VISIBLE_DEVICES", "-1"}}), 0);
  EXPECT_EQ(visible({{"CUDA_VISIBLE_DEVICES", "GPU-3333,GPU-11111111-aaaa"}}), 2);
  EXPECT_EQ(visible({{"CUDA_VISIBLE_DEVICES", "GPU-3333,GPU-9999,GPU-1111"}}), 1);
  EXPECT_EQ(only({{"CUDA_VISIBLE_DEVICES", "1"}}).narrowed_by, "CUDA_VISIBLE_DEVICES=1");
}

TEST_F(NvidiaTree, OtherVendorsVariablesDoNotApply) {
  EXPECT_EQ(
      visible(
          {{"HIP_VISIBLE_DEVICES", "0"}, {"ROCR_VISIBLE_DEVICES", "0"}, {"ZE_AFFINITY_MASK", "0"}}),
      4);
}

// A CPU node and four GPU nodes in the KFD topology, and their DRM devices.
class AmdTree : public AcceleratorsTest {
 protected:
  void SetUp() override {
    tree_.add_kfd_cpu();
    for (std::uint64_t id : {0xa1ULL, 0xb2ULL, 0xc3ULL, 0xd4ULL}) tree_.add_kfd_gpu(id);
    for (int i = 0; i < 4; ++i) {
      tree_.add_drm_device(fmt::format("0000:{:02x}:00.0", 0x10 + i), 0x1002, "amdgpu", i, 128 + i);
    }
  }
};

TEST_F(AmdTree, KfdNodesWithSimdsAreTheGpus) {
  const Accelerators amd = only();
  EXPECT_EQ(amd.vendor, Vendor::kAmd);
  EXPECT_EQ(amd.installed, 4);
  EXPECT_EQ(amd.visible, 4);
}

TEST_F(AmdTree, RocrVisibleDevicesNarrowsByIndexAndUuid) {
  EXPECT_EQ(visible({{"ROCR_VISIBLE_DEVICES", "1,3"}}), 2);
  EXPECT_EQ(visible({{"ROCR_VISIBLE_DEVICES", ""}}), 0);
  EXPECT_EQ(visible({{"ROCR_VISIBLE_DEVICES", "0,-1,2"}}), 1);
  // rocminfo's UUID: "GPU-" and the KFD node's unique_id in 16 hex digits.
  EXPECT_EQ(visible({{"ROCR_VISIBLE_DEVICES", "GPU-00000000000000c3,GPU-00000000000000a1"}}), 2);
}

TEST_F(AmdTree, HipVisibleDevicesIndexesWhatRocrLeft) {
  EXPECT_EQ(visible({{"HIP_VISIBLE_DEVICES", "0,2,3"}}), 3);
  EXPECT_EQ(visible({{"HIP_VISIBLE_DEVICES", "-1"}}), 0);
  EXPECT_EQ(visible({{"ROCR_VISIBLE_DEVICES", "2,3"}, {"HIP_VISIBLE_DEVICES", "1"}}), 1);
  // Indices 2 and 3 of the installed GPUs are 0 and 1 after ROCR: HIP's 2 is past the end.
  EXPECT_EQ(visible({{"ROCR_VISIBLE_DEVICES", "2,3"}, {"HIP_VISIBLE_DEVICES", "0,2,1"}}), 1);
  EXPECT_EQ(only({{"ROCR_VISIBLE_DEVICES", "2,3"}, {"HIP_VISIBLE_DEVICES", "1"}}).narrowed_by,
            "ROCR_VISIBLE_DEVICES=2,3 HIP_VISIBLE_DEVICES=1");
}

TEST_F(AmdTree, CudaVisibleDevicesStandsInForAnUnsetHipVisibleDevices) {
  EXPECT_EQ(visible({{"CUDA_VISIBLE_DEVICES", "0,1"}}), 2);
  EXPECT_EQ(visible({{"ROCR_VISIBLE_DEVICES", "1,2,3"}, {"CUDA_VISIBLE_DEVICES", "2"}}), 1);
  // HIP's own name wins when both are set.
  EXPECT_EQ(visible({{"HIP_VISIBLE_DEVICES", "3"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}), 1);
  EXPECT_EQ(visible({{"HIP_VISIBLE_DEVICES", ""}, {"CUDA_VISIBLE_DEVICES", "0,1"}}), 0);
}

TEST_F(AcceleratorsTest, AmdRenderNodesWithoutAKfdTopology) {
  // Each GPU has a card and a render node: one device each. A non-AMD render node is not one.
  tree_.add_drm_device("0000:c1:00.0", 0x1002, "amdgpu", 0, 128);
  tree_.add_drm_device("0000:c2:00.0", 0x1002, "amdgpu", 1, 129);
  tree_.add_drm_device("0000:03:00.0", 0x1a03, "ast", 2, -1);
  const Accelerators amd = only();
  EXPECT_EQ(amd.vendor, Vendor::kAmd);
  EXPECT_EQ(amd.installed, 2);
  EXPECT_EQ(visible({{"HIP_VISIBLE_DEVICES", "1"}}), 1);
  // No UUIDs to check against: as many as listed, at most the GPUs there are.
  EXPECT_EQ(visible({{"ROCR_VISIBLE_DEVICES", "GPU-a,GPU-b,GPU-c"}}), 2);
}

TEST_F(AcceleratorsTest, IntelXeCardsCountTheirTilesUnderTheFlatHierarchy) {
  tree_.add_drm_device("0000:29:00.0", 0x8086, "xe", 1, 128, /*xe_tiles=*/2);
  tree_.add_drm_device("0000:3a:00.0", 0x8086, "xe", 2, 129, /*xe_tiles=*/2);
  const Accelerators intel = only();
  EXPECT_EQ(intel.vendor, Vendor::kIntel);
  EXPECT_EQ(intel.installed, 4);
  EXPECT_EQ(visible({{"ZE_AFFINITY_MASK", "0,3"}}), 2);
  EXPECT_EQ(visible({{"ZE_AFFINITY_MASK", "7,1"}}), 1);  // a device that is not there: ignored
  EXPECT_EQ(visible({{"ZE_FLAT_DEVICE_HIERARCHY", "COMPOSITE"}}), 2);
  EXPECT_EQ(visible({{"ZE_FLAT_DEVICE_HIERARCHY", "COMPOSITE"}, {"ZE_AFFINITY_MASK", "0.0,1"}}), 2);
  EXPECT_EQ(visible({{"ZE_FLAT_DEVICE_HIERARCHY", "COMPOSITE"}, {"ZE_AFFINITY_MASK", "1.1"}}), 1);
  EXPECT_EQ(
      only({{"ZE_FLAT_DEVICE_HIERARCHY", "COMPOSITE"}, {"ZE_AFFINITY_MASK", "1.1"}}).narrowed_by,
      "ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE ZE_AFFINITY_MASK=1.1");
  // CUDA's and ROCm's variables are not Level Zero's.
  EXPECT_EQ(visible({{"CUDA_VISIBLE_DEVICES", ""}, {"HIP_VISIBLE_DEVICES", ""}}), 4);
}

TEST_F(AcceleratorsTest, IntelI915GtsAreTilesAndOtherDriversAreNotGpus) {
  tree_.add_drm_device("0000:4d:00.0", 0x8086, "i915", 0, 128, 0, /*i915_gts=*/2);
  tree_.add_drm_device("0000:00:02.0", 0x8086, "i915", 1, 129);  // one tile
  tree_.add_drm_device("0000:00:03.0", 0x8086, "vfio-pci", 2, -1);
  EXPECT_EQ(only().installed, 3);
  EXPECT_EQ(visible({{"ZE_FLAT_DEVICE_HIERARCHY", "COMPOSITE"}}), 2);
}

TEST_F(AcceleratorsTest, EveryVendorInTorchsOrder) {
  tree_.add_drm_device("0000:29:00.0", 0x8086, "xe", 0, 128);
  tree_.add_kfd_gpu(0x1);
  tree_.add_nvidia_gpu("0000:1b:00.0", "");
  const std::vector<Accelerators> found = detect_accelerators(temp_.path(), {});
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].vendor, Vendor::kNvidia);
  EXPECT_EQ(found[1].vendor, Vendor::kAmd);
  EXPECT_EQ(found[2].vendor, Vendor::kIntel);
}

TEST_F(AcceleratorsTest, AnEmptyTreeHasNoAccelerators) {
  EXPECT_TRUE(detect_accelerators(temp_.path(), {{"CUDA_VISIBLE_DEVICES", "0,1"}}).empty());
  EXPECT_TRUE(detect_accelerators(temp_.path() + "/absent", {}).empty());
}

}  // namespace
}  // namespace ddprun::agent::devices
