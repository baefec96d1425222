// The launcher environment contract, parsed from fake environments (no processes).
#include <gtest/gtest.h>

#include <map>

#include "ddp/error.h"
#include "ddp/launch_env.h"

namespace {

ddp::EnvLookup fake(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const ddp::EnvLookup& env, bool allow_single = false) {
  try {
    ddp::read_launch_env(env, allow_single);
  } catch (const ddp::Error& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchEnvTest, ReadsDdprunEnvironment) {
  auto env = ddp::read_launch_env(fake({{"RANK", "3"},
                                        {"WORLD_SIZE", "4"},
                                        {"LOCAL_RANK", "1"},
                                        {"LOCAL_WORLD_SIZE", "2"},
                                        {"GROUP_RANK", "1"},
                                        {"MASTER_ADDR", "10.0.0.5"},
                                        {"MASTER_PORT", "29501"},
                                        {"TORCHELASTIC_RESTART_COUNT", "2"},
                                        {"TORCHELASTIC_MAX_RESTARTS", "3"},
                                        {"TORCHELASTIC_RUN_ID", "job7"},
                                        {"TORCHELASTIC_USE_AGENT_STORE", "False"}}),
                                  false);
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.group_rank, 1);
  EXPECT_EQ(env.master_addr, "10.0.0.5");
  EXPECT_EQ(env.master_port, 29501);
  EXPECT_EQ(env.restart_count, 2);
  EXPECT_EQ(env.max_restarts, 3);
  EXPECT_EQ(env.run_id, "job7");
  EXPECT_FALSE(env.use_agent_store);
  EXPECT_TRUE(env.from_launcher);
}

TEST(LaunchEnvTest, TorchrunAgentStoreFlag) {
  auto env = ddp::read_launch_env(fake({{"RANK", "0"},
                                        {"WORLD_SIZE", "2"},
                                        {"MASTER_PORT", "1"},
                                        {"TORCHELASTIC_USE_AGENT_STORE", "True"}}),
                                  false);
  EXPECT_TRUE(env.use_agent_store);
}

TEST(LaunchEnvTest, OutsideALauncherIsAClearErrorUnlessAllowed) {
  const std::string message = error_of(fake({}));
  EXPECT_NE(message.find("RANK and WORLD_SIZE are not set"), std::string::npos) << message;
  EXPECT_NE(message.find("allow_single_process"), std::string::npos) << message;
  auto env = ddp::read_launch_env(fake({}), true);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_FALSE(env.from_launcher);
}

TEST(LaunchEnvTest, MalformedValuesNameTheVariable) {
  EXPECT_NE(error_of(fake({{"RANK", "x"}, {"WORLD_SIZE", "2"}})).find("RANK='x'"),
            std::string::npos);
  EXPECT_NE(error_of(fake({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "5"}}))
                .find("RANK=2 is not below WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(error_of(fake({{"RANK", "0"}})).find("WORLD_SIZE is not set"), std::string::npos);
  EXPECT_NE(error_of(fake({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}))
                .find("MASTER_PORT=70000"),
            std::string::npos);
  EXPECT_NE(
      error_of(
          fake({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TORCHELASTIC_USE_AGENT_STORE", "maybe"}}))
          .find("TORCHELASTIC_USE_AGENT_STORE='maybe'"),
      std::string::npos);
}

}  // namespace
