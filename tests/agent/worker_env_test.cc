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
