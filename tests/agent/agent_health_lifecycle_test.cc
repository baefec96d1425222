// The node's health check as the agent runs it (--health_check), on fakes only
// (agent_lifecycle_fixture.h): the check is a spawn on the fake launcher whose exit the test
// feeds, its timeout and its interval run on the fake clock. A node that fails it leaves the job
// with kExitUnhealthy (69), for SLURM or a node manager to drain it.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "tests/agent/agent_lifecycle_fixture.h"

namespace ddprun::agent {
namespace {

using testing::node1_of_2;
using testing::ScriptedCoordinator;
using testing::spawned_env;
using AgentHealthLifecycleTest = testing::AgentLifecycleTest;

constexpr char kCheck[] = "nvidia-smi --query-gpu=ecc.errors.uncorrected --format=csv";

TEST_F(AgentHealthLifecycleTest, AFailingCheckKeepsTheNodeOutOfTheRoundAndEndsWith69) {
  ScriptedCoordinator coordinator;
  AgentOptions o = options(2);
  o.health_check.command = kCheck;
  start(o, coordinator);
  ASSERT_EQ(launcher_.spawned.size(), 1u);
  const SpawnRequest& check = launcher_.spawned[0];
  EXPECT_EQ(check.executable, "/bin/sh");
  EXPECT_EQ(check.argv, (std::vector<std::string>{"sh", "-c", kCheck}));
  EXPECT_EQ(spawned_env(check, "HOME"), "/home/trainer") << "the parts' base environment";
  EXPECT_EQ(spawned_env(check, "LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(spawned_env(check, "DDPRUN_ATTEMPT"), "0");
  EXPECT_TRUE(coordinator.offers.empty()) << "no join before the check has passed";

  agent_->on_child_exit(1000, ExitStatus::exited(1));
  io_.poll();
  EXPECT_EQ(kExitUnhealthy, 69);
  EXPECT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_TRUE(coordinator.offers.empty()) << "an unhealthy node never joins";
  EXPECT_EQ(launcher_.spawned.size(), 1u) << "no worker started";
  EXPECT_TRUE(coordinator.closed);
}

TEST_F(AgentHealthLifecycleTest, ACheckThatDoesNotFinishInTimeIsKilledAndTheNodeLeaves) {
  ScriptedCoordinator coordinator;
  AgentOptions o = options(1);
  o.health_check.command = kCheck;
  o.health_check.timeout = Millis(10'000);
  start(o, coordinator);
  ASSERT_EQ(launcher_.spawned.size(), 1u);
  parts_.advance(Millis(9'999));
  EXPECT_TRUE(launcher_.signals_to(1000).empty()) << "not before its timeout";
  parts_.advance(Millis(1));
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGKILL}));
  EXPECT_FALSE(agent_->exit_code()) << "its exit, once reaped, decides";
  agent_->on_child_exit(1000, ExitStatus::killed(SIGKILL));
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_TRUE(coordinator.offers.empty());
}

// --health_check_interval: a passing check lets the node join; the check runs again while the
// workers run, and when it fails the workers are stopped and the node leaves the job (the other
// nodes go on without it), without charging a restart.
TEST_F(AgentHealthLifecycleTest, ACheckThatFailsWhileTheWorkersRunStopsThemAndEndsWith69) {
  ScriptedCoordinator coordinator;
  AgentOptions o = options(2);
  o.health_check.command = kCheck;
  o.health_check.interval = Millis(60'000);
  start(o, coordinator);
  agent_->on_child_exit(1000, ExitStatus::exited(0));  // healthy: the node joins
  io_.poll();
  ASSERT_EQ(coordinator.offers.size(), 1u);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  ASSERT_EQ(launcher_.spawned.size(), 3u);  // the check, then two workers (pids 1001, 1002)
  EXPECT_EQ(launcher_.spawned[1].executable, "/usr/bin/worker");
  EXPECT_EQ(spawned_env(launcher_.spawned[1], "HOME"), "/home/trainer");

  parts_.advance(Millis(60'000));
  io_.poll();
  ASSERT_EQ(launcher_.spawned.size(), 4u);
  EXPECT_EQ(launcher_.spawned[3].executable, "/bin/sh");
  EXPECT_TRUE(launcher_.signals_to(1001).empty()) << "the workers run while the check does";
  agent_->on_child_exit(1003, ExitStatus::exited(3));
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1001), (std::vector<int>{SIGTERM}));
  EXPECT_EQ(launcher_.signals_to(1002), (std::vector<int>{SIGTERM}));
  agent_->on_child_exit(1001, ExitStatus::killed(SIGTERM));
  agent_->on_child_exit(1002, ExitStatus::killed(SIGTERM));
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_TRUE(coordinator.reports.empty()) << "not a worker failure: nothing to report";
  EXPECT_EQ(coordinator.exclude_reason.rfind("this node failed its health check", 0), 0u)
      << "the leave says why: " << coordinator.exclude_reason;
  EXPECT_FALSE(parts_.health_interval_timer.armed()) << "the checks end with the job";
}

}  // namespace
}  // namespace ddprun::agent
