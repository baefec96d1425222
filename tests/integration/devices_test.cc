// --nproc_per_node gpu|xpu on fabricated nodes: ddprun run as a real process over a device tree
// written to the test's temp dir (DDPRUN_DEVICE_ROOT, the test seam of launcher/value_parsers.h;
// tests/agent/fake_device_tree.h) starts one worker per visible device, and under
// --virtual-local-rank hands each its own device in its vendor's variable.
#include <nlohmann/json.hpp>

#include "tests/agent/fake_device_tree.h"
#include "tests/integration/ddprun_fixture.h"

namespace ddprun::testing {
namespace {

using Env = std::map<std::string, std::string>;

class DevicesTest : public DdprunTest {
 protected:
  void SetUp() override {
    DdprunTest::SetUp();
    // The node's own visibility variables must not reach this fabricated node.
    for (const char* name : {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                             "ZE_AFFINITY_MASK", "ZE_FLAT_DEVICE_HIERARCHY"}) {
      env_.erase(name);
    }
    env_["DDPRUN_DEVICE_ROOT"] = tree_.root().string();
  }

  // Runs dump_env.py under `args` and returns the environment of every worker, by global rank.
  std::vector<Env> worker_envs(std::vector<std::string> args) {
    args.push_back(worker("dump_env.py"));
    args.push_back("--by-rank");
    const RunResult run = run_ddprun(args);
    EXPECT_TRUE(ExitedWith(run, 0));
    std::vector<Env> envs;
    for (int rank = 0;; ++rank) {
      const std::string text = read_text_file(out("env_0_r" + std::to_string(rank) + ".json"));
      if (text.empty()) return envs;
      envs.push_back(nlohmann::json::parse(text).get<Env>());
    }
  }

  FakeDeviceTree tree_{temp().path() + "/node"};
};

TEST_F(DevicesTest, GpuOnAnAmdNodeStartsAWorkerPerVisibleGpuEachWithItsOwn) {
  tree_.add_kfd_cpu();
  for (std::uint64_t id : {0xa1ULL, 0xa2ULL, 0xa3ULL, 0xa4ULL}) tree_.add_kfd_gpu(id);
  env_["ROCR_VISIBLE_DEVICES"] = "0,1,3";  // three GPUs left, HIP numbers them 0-2
  env_["HIP_VISIBLE_DEVICES"] = "2,0,1";
  const std::vector<Env> envs = worker_envs({"--nproc_per_node", "gpu", "--virtual-local-rank"});
  ASSERT_EQ(envs.size(), 3u);
  const char* own[] = {"2", "0", "1"};
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const Env& e = envs[rank];
    EXPECT_EQ(e.at("LOCAL_WORLD_SIZE"), "3");
    EXPECT_EQ(e.at("LOCAL_RANK"), "0");
    EXPECT_EQ(e.at("HIP_VISIBLE_DEVICES"), own[rank]);
    EXPECT_EQ(e.at("CUDA_VISIBLE_DEVICES"), own[rank]);
    EXPECT_EQ(e.at("ROCR_VISIBLE_DEVICES"), "0,1,3");  // left as the agent has it
    EXPECT_EQ(e.count("ZE_AFFINITY_MASK"), 0u);
  }
}

TEST_F(DevicesTest, XpuOnAnIntelNodeHandsEachWorkerItsZeAffinityMask) {
  tree_.add_drm_device("0000:29:00.0", 0x8086, "xe", 0, 128, /*xe_tiles=*/2);
  const std::vector<Env> envs = worker_envs({"--nproc_per_node", "xpu", "--virtual-local-rank"});
  ASSERT_EQ(envs.size(), 2u);  // one card, two tiles: two devices under the FLAT hierarchy
  EXPECT_EQ(envs[0].at("ZE_AFFINITY_MASK"), "0");
  EXPECT_EQ(envs[1].at("ZE_AFFINITY_MASK"), "1");
}

TEST_F(DevicesTest, WithoutVirtualLocalRankWorkersInheritTheVariablesUntouched) {
  tree_.add_drm_device("0000:29:00.0", 0x8086, "xe", 0, 128, /*xe_tiles=*/2);
  tree_.add_drm_device("0000:3a:00.0", 0x8086, "xe", 1, 129, /*xe_tiles=*/2);
  env_["ZE_AFFINITY_MASK"] = "3,1,0";
  const std::vector<Env> envs = worker_envs({"--nproc_per_node", "auto"});
  ASSERT_EQ(envs.size(), 3u);
  for (const Env& e : envs) {
    EXPECT_EQ(e.at("ZE_AFFINITY_MASK"), "3,1,0");
    EXPECT_EQ(e.count("CUDA_VISIBLE_DEVICES"), 0u);
  }
}

TEST_F(DevicesTest, GpuOnANodeWithoutOneIsBadInput) {
  const RunResult run = run_ddprun({"--nproc_per_node", "gpu", worker("dump_env.py")});
  EXPECT_TRUE(ExitedWith(run, 2));
  EXPECT_NE(run.err.find("--nproc_per_node=gpu: this node has no NVIDIA or AMD GPU"),
            std::string::npos)
      << run.describe();
}

}  // namespace
}  // namespace ddprun::testing
