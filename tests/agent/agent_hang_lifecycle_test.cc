// The agent's response to a hang, on fakes only (agent_lifecycle_fixture.h): the progress watch
// says the ranks hung, the agent stops its workers with SIGABRT so that each prints its stack,
// reads what each was doing from that stack, and reports the rank that stopped first as the
// root cause. In a multi-node job the waits for the other nodes run on the fake clock.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "tests/agent/agent_lifecycle_fixture.h"

namespace ddprun::agent {
namespace {

using testing::node1_of_2;
using testing::ScriptedCoordinator;

// What Python's faulthandler prints when a rank waiting in a barrier is stopped with SIGABRT.
const std::vector<std::string> kStackInABarrier = {
    "Fatal Python error: Aborted",
    "",
    "Current thread 0x00007fd980abd040 (most recent call first):",
    "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 3152 "
    "in barrier",
    "  File \"/job/train.py\", line 30 in <module>",
};
// ... and for a rank stuck in the script itself, outside any collective: the culprit.
const std::vector<std::string> kStackInTheScript = {
    "Fatal Python error: Aborted",
    "",
    "Current thread 0x00007f1d3c9f2040 (most recent call first):",
    "  File \"/job/data.py\", line 88 in load",
    "  File \"/job/train.py\", line 29 in <module>",
};

// Both local ranks heartbeated up to step 7 and then fell silent for 300 s (up to `now`).
std::vector<LocalRankProgress> silent_after_step_7(SteadyTime now) {
  std::vector<LocalRankProgress> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].local_rank = r;
    ranks[r].state = RankState::kHeartbeating;
    ranks[r].last_step = 7;
    ranks[r].last_heartbeat = now - Millis(300'000);
    ranks[r].silent_for = Millis(300'000);
    ranks[r].heartbeats = 8;
  }
  return ranks;
}

RankProgress other_node_rank(int rank, RankActivity activity) {
  RankProgress p;
  p.rank = rank;
  p.node = "node-b";
  p.local_rank = rank;
  p.last_step = 7;
  p.activity = activity;
  return p;
}

class AgentHangLifecycleTest : public testing::AgentLifecycleTest {
 protected:
  // Node 1 of 2 (global ranks 2 and 3) with its workers running and their stderr in log files.
  void start_node(ScriptedCoordinator& coordinator) {
    AgentOptions o = options(2);
    o.logs.redirects.all = kStderr;
    start(o, coordinator);
    coordinator.pending_join(node1_of_2(0));
    io_.poll();
    ASSERT_EQ(launcher_.spawned.size(), 2u);
    parts_.progress.ranks = silent_after_step_7(parts_.clock.steady_now());
  }
  void give_stacks() {
    const std::string attempt = log_dir_ + "/job_fake/attempt_0/";
    parts_.log_files.file_lines[attempt + "0/stderr.log"] = kStackInABarrier;
    parts_.log_files.file_lines[attempt + "1/stderr.log"] = kStackInTheScript;
  }
  void hang() {
    ASSERT_TRUE(parts_.progress.events.on_hang);
    parts_.progress.events.on_hang({parts_.clock.steady_now(), parts_.progress.ranks});
    io_.poll();
  }
};

TEST_F(AgentHangLifecycleTest, AHangVerdictStopsTheWorkersWithSigabrtAndTheReportNamesTheHungRank) {
  ScriptedCoordinator coordinator;  // progress not shared: this node decides alone
  start_node(coordinator);
  hang();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGABRT}));
  EXPECT_EQ(launcher_.signals_to(1001), (std::vector<int>{SIGABRT}));
  EXPECT_TRUE(coordinator.reports.empty()) << "not before the workers have printed their stacks";

  give_stacks();
  exit_all_from(0, ExitStatus::killed(SIGABRT));
  ASSERT_EQ(coordinator.reports.size(), 1u);
  const FailureReport& report = coordinator.reports[0];
  ASSERT_EQ(report.failures.size(), 1u) << "only the rank that stopped first is a culprit";
  const WorkerFailure& root = report.root_cause();
  EXPECT_EQ(root.rank, 3);
  EXPECT_TRUE(root.hung);
  EXPECT_EQ(root.exit.signal, SIGABRT);
  EXPECT_NE(root.error_message.find("rank 3 (node node-a, local_rank 1) hung"), std::string::npos)
      << root.error_message;
  EXPECT_NE(root.error_message.find("no progress for 300 s after step 7"), std::string::npos)
      << root.error_message;
  EXPECT_NE(root.error_message.find("data.py:88"), std::string::npos) << root.error_message;
  EXPECT_NE(report.render().find(root.error_message), std::string::npos) << report.render();
  EXPECT_EQ(root.stderr_tail, kStackInTheScript);

  coordinator.pending_failure({false, report, 128 + SIGABRT});
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), 128 + SIGABRT);
}

// Multi-node: the node waits (polling the rendezvous on the fake clock) until the other node
// has its verdict too before stopping its workers, then until the other node's stacks are read
// before naming the culprit among every rank of the job.
TEST_F(AgentHangLifecycleTest, AMultiNodeHangWaitsForTheOtherNodesVerdictAndStacksOnTheFakeClock) {
  ScriptedCoordinator coordinator;
  coordinator.shares = true;
  start_node(coordinator);
  coordinator.job = {other_node_rank(0, RankActivity::kUnknown),
                     other_node_rank(1, RankActivity::kUnknown)};
  hang();
  ASSERT_FALSE(coordinator.shared.empty());
  ASSERT_EQ(coordinator.shared.back().size(), 2u);
  EXPECT_EQ(coordinator.shared.back()[0].activity, RankActivity::kStopping);
  EXPECT_TRUE(launcher_.signals.empty()) << "the other node has no verdict yet";
  EXPECT_TRUE(parts_.hang_timer.armed());

  coordinator.job = {other_node_rank(0, RankActivity::kStopping),
                     other_node_rank(1, RankActivity::kStopping)};
  parts_.advance(Millis(50));
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGABRT}));
  EXPECT_EQ(launcher_.signals_to(1001), (std::vector<int>{SIGABRT}));

  give_stacks();
  exit_all_from(0, ExitStatus::killed(SIGABRT));
  EXPECT_TRUE(coordinator.reports.empty()) << "the other node's stacks are not read yet";
  coordinator.job = {other_node_rank(0, RankActivity::kInCollective),
                     other_node_rank(1, RankActivity::kInCollective)};
  parts_.advance(Millis(50));
  io_.poll();
  ASSERT_EQ(coordinator.reports.size(), 1u);
  const WorkerFailure& root = coordinator.reports[0].root_cause();
  EXPECT_EQ(root.rank, 3);
  EXPECT_TRUE(root.hung);
  EXPECT_NE(root.error_message.find("rank 3 (node node-a, local_rank 1) hung"), std::string::npos)
      << root.error_message;
}

TEST_F(AgentHangLifecycleTest, AVerdictAfterTheWorkersHaveExitedChangesNothing) {
  ScriptedCoordinator coordinator;
  start_node(coordinator);
  exit_all_from(0, ExitStatus::exited(0));
  ASSERT_TRUE(coordinator.pending_success);
  const std::size_t signals_before = launcher_.signals.size();
  parts_.progress.events.on_hang({parts_.clock.steady_now(), parts_.progress.ranks});
  io_.poll();
  EXPECT_EQ(launcher_.signals.size(), signals_before);
  coordinator.pending_success(Status());
  EXPECT_EQ(agent_->exit_code(), 0);
}

}  // namespace
}  // namespace ddprun::agent
