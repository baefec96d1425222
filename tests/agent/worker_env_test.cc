#include "agent/process/worker_env.h"

#include <gtest/gtest.h>

namespace ddprun::agent {
namespace {

TEST(WorkerEnv, SetsExactlyTorchrunsVariablesOverTheBase) {
  EnvMap base{{"PATH", "/bin"}, {"RANK", "stale"}};
  AttemptContext attempt{"trainer", "10.0.0.1", 29501, 2,     3,
                         "job-7",   false,      true,  false, "SIGTERM,SIGUSR1"};
  WorkerPlacement p{1, 5, 2, 3, 2, 6, 5, 6};
  EnvMap env = build_worker_env(base, attempt, p, "/logs/err.json");
  const EnvMap expected{
      {"PATH", "/bin"},
      {"LOCAL_RANK", "1"},
      {"RANK", "5"},
      {"GROUP_RANK", "2"},
      {"ROLE_RANK", "5"},
      {"ROLE_NAME", "trainer"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"WORLD_SIZE", "6"},
      {"GROUP_WORLD_SIZE", "3"},
      {"ROLE_WORLD_SIZE", "6"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29501"},
      {"TORCHELASTIC_RESTART_COUNT", "2"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_RUN_ID", "job-7"},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"TORCHELASTIC_ERROR_FILE", "/logs/err.json"},
      {"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGUSR1"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},
  };
  EXPECT_EQ(env, expected);
}

TEST(WorkerEnv, TheUsersNcclSettingStaysAndTheLegacyNameOnlyForTorchThatReadsIt) {
  AttemptContext torch2;
  EnvMap env = build_worker_env({{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}}, torch2, {}, "e");
  EXPECT_EQ(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "0");
  EXPECT_EQ(env.count("NCCL_ASYNC_ERROR_HANDLING"), 0u);  // 2.x would warn about it
  EXPECT_EQ(build_worker_env({}, torch2, {}, "e").at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");

  AttemptContext torch1;
  torch1.legacy_nccl_env = true;
  EXPECT_EQ(build_worker_env({}, torch1, {}, "e").at("NCCL_ASYNC_ERROR_HANDLING"), "1");
  // The user's value under either name reaches what torch 1.x reads.
  EXPECT_EQ(build_worker_env({{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}}, torch1, {}, "e")
                .at("NCCL_ASYNC_ERROR_HANDLING"),
            "0");
  EXPECT_EQ(build_worker_env({{"NCCL_ASYNC_ERROR_HANDLING", "2"}}, torch1, {}, "e")
                .at("NCCL_ASYNC_ERROR_HANDLING"),
            "2");
}

TEST(WorkerEnv, VirtualLocalRankShowsEachWorkerOnlyItsOwnGpuAsDeviceZero) {
  AttemptContext attempt;
  attempt.virtual_local_rank = true;
  WorkerPlacement third{2, 6, 1, 2, 4, 8, 6, 8};
  EnvMap env = build_worker_env({{"CUDA_VISIBLE_DEVICES", "4,5,6,7"}}, attempt, third, "e");
  EXPECT_EQ(env.at("LOCAL_RANK"), "0");
  EXPECT_EQ(env.at("RANK"), "6");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "6");
  EXPECT_EQ(build_worker_env({}, attempt, third, "e").at("CUDA_VISIBLE_DEVICES"), "2");
  attempt.virtual_local_rank = false;
  EXPECT_EQ(build_worker_env({}, attempt, third, "e").at("LOCAL_RANK"), "2");
  EXPECT_EQ(build_worker_env({}, attempt, third, "e").count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST(WorkerEnv, VirtualLocalRankNarrowsHipVisibleDevicesAsTorchrun2Does) {
  AttemptContext attempt;
  attempt.virtual_local_rank = true;
  attempt.accelerator = devices::Vendor::kAmd;
  WorkerPlacement second{1, 1, 0, 1, 4, 4, 1, 4};
  // A set HIP_VISIBLE_DEVICES is the list; both names get the worker's entry.
  EnvMap env = build_worker_env({{"HIP_VISIBLE_DEVICES", "6, 7"}, {"CUDA_VISIBLE_DEVICES", "0,1"}},
                                attempt, second, "e");
  EXPECT_EQ(env.at("HIP_VISIBLE_DEVICES"), "7");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "7");
  // Without it, CUDA_VISIBLE_DEVICES's entry (HIP reads that name too); ROCR_VISIBLE_DEVICES
  // stays whole: HIP's index counts among the GPUs it leaves.
  env = build_worker_env({{"ROCR_VISIBLE_DEVICES", "4,5,6,7"}}, attempt, second, "e");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(env.count("HIP_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(env.at("ROCR_VISIBLE_DEVICES"), "4,5,6,7");
  EXPECT_EQ(env.count("ZE_AFFINITY_MASK"), 0u);
  // An empty HIP_VISIBLE_DEVICES is not the list (torchrun's test is its truth).
  env = build_worker_env({{"HIP_VISIBLE_DEVICES", ""}, {"CUDA_VISIBLE_DEVICES", "2,3"}}, attempt,
                         second, "e");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "3");
  EXPECT_EQ(env.at("HIP_VISIBLE_DEVICES"), "");
}

TEST(WorkerEnv, VirtualLocalRankNarrowsZeAffinityMaskOnIntelNodes) {
  AttemptContext attempt;
  attempt.virtual_local_rank = true;
  attempt.accelerator = devices::Vendor::kIntel;
  WorkerPlacement third{2, 2, 0, 1, 4, 4, 2, 4};
  EnvMap env = build_worker_env({{"ZE_AFFINITY_MASK", "0.0,0.1,1.0,1.1"}}, attempt, third, "e");
  EXPECT_EQ(env.at("ZE_AFFINITY_MASK"), "1.0");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "2");  // as torchrun sets it, whatever the node
  EXPECT_EQ(build_worker_env({}, attempt, third, "e").at("ZE_AFFINITY_MASK"), "2");
  EXPECT_EQ(
      build_worker_env({{"ZE_AFFINITY_MASK", ""}}, attempt, third, "e").at("ZE_AFFINITY_MASK"),
      "2");
  // Not on other nodes, and never without --virtual-local-rank: then every worker inherits the
  // agent's variables untouched, as under torchrun.
  attempt.accelerator = devices::Vendor::kNvidia;
  EXPECT_EQ(build_worker_env({}, attempt, third, "e").count("ZE_AFFINITY_MASK"), 0u);
  attempt.accelerator = devices::Vendor::kIntel;
  attempt.virtual_local_rank = false;
  env = build_worker_env({{"ZE_AFFINITY_MASK", "0,1"}, {"HIP_VISIBLE_DEVICES", "3,4"}}, attempt,
                         third, "e");
  EXPECT_EQ(env.at("ZE_AFFINITY_MASK"), "0,1");
  EXPECT_EQ(env.at("HIP_VISIBLE_DEVICES"), "3,4");
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST(WorkerEnv, AgentStoreFlagIsPythonBoolean) {
  AttemptContext attempt;
  attempt.use_agent_store = true;
  EXPECT_EQ(build_worker_env({}, attempt, {}, "e").at("TORCHELASTIC_USE_AGENT_STORE"), "True");
}

TEST(WorkerEnv, WorkersNeverInheritTheServiceManagersVariables) {
  // The agent runs as a Type=notify unit: these are its own, for READY/WATCHDOG/STOPPING.
  const EnvMap base{{"NOTIFY_SOCKET", "/run/systemd/notify"},
                    {"WATCHDOG_USEC", "30000000"},
                    {"WATCHDOG_PID", "4242"},
                    {"NOTIFY_SOCKET_NOT", "kept"},
                    {"PATH", "/bin"}};
  const EnvMap env = build_worker_env(base, {}, {}, "e");
  EXPECT_EQ(env.count("NOTIFY_SOCKET"), 0u);
  EXPECT_EQ(env.count("WATCHDOG_USEC"), 0u);
  EXPECT_EQ(env.count("WATCHDOG_PID"), 0u);
  EXPECT_EQ(env.at("NOTIFY_SOCKET_NOT"), "kept");  // only the exact names go
  EXPECT_EQ(env.at("PATH"), "/bin");
}

TEST(WorkerEnv, EnvpHasKeyEqualsValue) {
  EXPECT_EQ(to_envp({{"A", "1"}, {"B", "x=y"}}), (std::vector<std::string>{"A=1", "B=x=y"}));
}

}  // namespace
}  // namespace ddprun::agent
