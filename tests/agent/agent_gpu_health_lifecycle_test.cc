// Issue 38 in the agent's lifecycle, on fakes only (agent_lifecycle_fixture.h): built-in node
// checks run as ddprun's own child (spawned through the launcher like a check command, before
// it), their outcomes reach the observers (metrics), and a restart waits for the last
// attempt's GPU memory (FakeGpuMemoryWait, answered by the test).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/coordination/local_coordinator.h"
#include "agent/health/builtin/check_outcome.h"
#include "common/exit_codes.h"
#include "tests/agent/agent_lifecycle_fixture.h"
#include "tests/support/temp_dir.h"

namespace ddprun::agent {
namespace {

using ::testing::HasSubstr;
using testing::ScriptedCoordinator;
using AgentGpuHealthLifecycleTest = testing::AgentLifecycleTest;

// Each kind's outcome, as "gpu pass".
class OutcomeRecorder final : public AgentObserver {
 public:
  void on_node_checks(const std::vector<builtin::CheckOutcome>& outcomes) override {
    for (const auto& o : outcomes) seen.push_back(o.check + (o.passed() ? " pass" : " fail"));
  }
  std::vector<std::string> seen;
};

TEST_F(AgentGpuHealthLifecycleTest, BuiltinChecksRunFirstInTheirOwnChildThenTheCommand) {
  ScriptedCoordinator coordinator;
  AgentOptions o = options(1);
  o.master_addr = "127.0.0.5";
  o.health_check.command = "builtin:gpu,path=/data ./site-check.sh --strict";
  ddprun::testing::TempDir logs;
  o.logs.log_dir = logs.path();
  agent_.emplace(std::move(o), io_, parts_.with(coordinator));
  OutcomeRecorder recorder;
  agent_->add_observer(recorder);
  agent_->start();
  io_.poll();

  ASSERT_EQ(launcher_.spawned.size(), 1u);
  const SpawnRequest& builtin = launcher_.spawned[0];
  const std::string base = logs.path() + "/job_fake/health_check_0_builtin";
  EXPECT_EQ(builtin.executable, "/proc/self/exe");
  EXPECT_EQ(builtin.argv, (std::vector<std::string>{"ddprun", "__node_check", "gpu,path=/data",
                                                    "127.0.0.5", base + ".json"}));
  EXPECT_EQ(builtin.stdout_target.path, base + ".stdout");
  // The child's findings, as it writes them before it exits.
  std::filesystem::create_directories(logs.path() + "/job_fake");
  std::ofstream(base + ".json") << builtin::outcomes_to_json({{"gpu", {}}, {"path", {}}});
  agent_->on_child_exit(1000, ExitStatus::exited(0));
  io_.poll();
  EXPECT_EQ(recorder.seen, (std::vector<std::string>{"gpu pass", "path pass"}));
  EXPECT_FALSE(std::filesystem::exists(base + ".json")) << "read and removed";

  ASSERT_EQ(launcher_.spawned.size(), 2u) << "the command runs once the built-in checks pass";
  EXPECT_EQ(launcher_.spawned[1].argv,
            (std::vector<std::string>{"sh", "-c", "./site-check.sh --strict"}));
  EXPECT_TRUE(coordinator.offers.empty()) << "no join before the command has passed too";
  agent_->on_child_exit(1001, ExitStatus::exited(0));
  io_.poll();
  EXPECT_EQ(coordinator.offers.size(), 1u);
}

TEST_F(AgentGpuHealthLifecycleTest, AFailingBuiltinCheckKeepsTheNodeOutWithItsFindings) {
  ScriptedCoordinator coordinator;
  AgentOptions o = options(1);
  o.health_check.command = "builtin:gpu ./never-run.sh";
  ddprun::testing::TempDir logs;
  o.logs.log_dir = logs.path();
  start(o, coordinator);
  ASSERT_EQ(launcher_.spawned.size(), 1u);
  const std::string base = logs.path() + "/job_fake/health_check_0_builtin";
  std::filesystem::create_directories(logs.path() + "/job_fake");
  std::ofstream(base + ".stdout") << "gpu: GPU 3: 12 uncorrectable ECC errors since the driver "
                                     "loaded\n";
  agent_->on_child_exit(1000, ExitStatus::exited(1));
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_EQ(launcher_.spawned.size(), 1u) << "neither the command nor a worker started";
  EXPECT_THAT(coordinator.exclude_reason,
              HasSubstr("its built-in checks (builtin:gpu) found a problem"));
  EXPECT_THAT(coordinator.exclude_reason, HasSubstr("GPU 3: 12 uncorrectable ECC errors"));
}

TEST_F(AgentGpuHealthLifecycleTest, ARestartWaitsUntilTheLastAttemptsGpuMemoryIsFree) {
  LocalCoordinator coordinator(io_, {.max_restarts = 1});
  parts_.gpu_memory.answer_at_once = false;
  start(options(2), coordinator);
  EXPECT_TRUE(parts_.gpu_memory.waited_for.empty()) << "no wait before the first round";
  agent_->on_child_exit(1001, ExitStatus::exited(3));
  agent_->on_child_exit(1000, ExitStatus::killed(SIGTERM));
  io_.poll();
  ASSERT_EQ(parts_.gpu_memory.waited_for.size(), 1u);
  EXPECT_EQ(parts_.gpu_memory.waited_for[0], (std::vector<pid_t>{1000, 1001}));
  EXPECT_EQ(launcher_.spawned.size(), 2u) << "no worker before the memory is free";
  parts_.gpu_memory.answer();
  io_.poll();
  ASSERT_EQ(launcher_.spawned.size(), 4u);
  EXPECT_EQ(testing::spawned_env(launcher_.spawned[2], "TORCHELASTIC_RESTART_COUNT"), "1");
  exit_all_from(2, ExitStatus::exited(0));
  EXPECT_EQ(agent_->exit_code(), 0);
}

TEST_F(AgentGpuHealthLifecycleTest, AWaitThatRunsOutStillRestarts) {
  LocalCoordinator coordinator(io_, {.max_restarts = 1});
  parts_.gpu_memory.answer_at_once = false;
  start(options(1), coordinator);
  agent_->on_child_exit(1000, ExitStatus::exited(3));
  io_.poll();
  parts_.gpu_memory.answer(Status::timed_out("pid 1000 holds 1024.0 MiB on GPU 0"));
  io_.poll();
  EXPECT_EQ(launcher_.spawned.size(), 2u) << "the restart goes on, after the error is logged";
}

TEST_F(AgentGpuHealthLifecycleTest, ASignalDuringTheWaitEndsTheJob) {
  LocalCoordinator coordinator(io_, {.max_restarts = 1});
  parts_.gpu_memory.answer_at_once = false;
  start(options(1), coordinator);
  agent_->on_child_exit(1000, ExitStatus::exited(3));
  io_.poll();
  ASSERT_TRUE(parts_.gpu_memory.pending);
  parts_.signals.deliver(SIGTERM);
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), 128 + SIGTERM);
  EXPECT_FALSE(parts_.gpu_memory.pending) << "the wait was cancelled";
  EXPECT_EQ(launcher_.spawned.size(), 1u);
}

}  // namespace
}  // namespace ddprun::agent
