#include "agent/worker_env.h"

#include <gtest/gtest.h>

namespace ddprun::agent {
namespace {

TEST(WorkerEnv, SetsExactlyTorchrunsVariablesOverTheBase) {
  EnvMap base{{"PATH", "/bin"}, {"RANK", "stale"}};
  AttemptContext attempt{"trainer", "10.0.0.1", 29501, 2, 3, "job-7", false};
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
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},
  };
  EXPECT_EQ(env, expected);
}

TEST(WorkerEnv, AgentStoreFlagIsPythonBoolean) {
  AttemptContext attempt;
  attempt.use_agent_store = true;
  EXPECT_EQ(build_worker_env({}, attempt, {}, "e").at("TORCHELASTIC_USE_AGENT_STORE"), "True");
}

TEST(WorkerEnv, EnvpHasKeyEqualsValue) {
  EXPECT_EQ(to_envp({{"A", "1"}, {"B", "x=y"}}), (std::vector<std::string>{"A=1", "B=x=y"}));
}

}  // namespace
}  // namespace ddprun::agent
