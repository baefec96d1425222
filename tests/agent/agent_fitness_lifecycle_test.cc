// A node that leaves the job unfit to train (issue 36, "bad nodes kept out"), on fakes only
// (agent_lifecycle_fixture.h): its workers caused K of the job's last M failures
// (--node_failure_limit), a rank asked to exclude it (ddprun.exclude_node), its health check
// failed, or the rendezvous refused its host. Each leaves through Coordinator::close_excluded
// with the reason, exit 69.
#include <gtest/gtest.h>

#include <csignal>
#include <string>

#include "agent/agent_metrics.h"
#include "agent/coordination/rendezvous_coordinator.h"
#include "agent/health/failure_history.h"
#include "common/exit_codes.h"
#include "metrics/registry.h"
#include "tests/agent/agent_lifecycle_fixture.h"
#include "tests/agent/scripted_rendezvous_client.h"

namespace ddprun::agent {
namespace {

using testing::node1_of_2;
using testing::ScriptedCoordinator;
using AgentFitnessLifecycleTest = testing::AgentLifecycleTest;

constexpr char kTwoOfThree[] =
    "this node's workers were the root cause of 2 of the job's last 3 failures: leaving the job "
    "so that a spare can take its place";

// A job report whose root cause is global rank `rank`.
FailureReport report_of_rank(int rank) {
  FailureReport report;
  report.entrypoint = "train.py";
  WorkerFailure failure;
  failure.rank = rank;
  failure.exit = ExitStatus::exited(1);
  report.failures.push_back(failure);
  return report;
}

TEST(FailureHistory, KOfTheLastMFailuresMustBeThisNodes) {
  FailureHistory history(2, 3);
  history.record(true);
  EXPECT_EQ(history.leave_reason(), "");
  history.record(false);
  history.record(false);
  EXPECT_EQ(history.leave_reason(), "");
  history.record(true);  // [false, false, true]: the first fell out of the window
  EXPECT_EQ(history.leave_reason(), "");
  history.record(true);
  EXPECT_EQ(history.leave_reason(), kTwoOfThree);
}

TEST(FailureHistory, FewerFailuresThanTheWindowAreNamedAsSuch) {
  FailureHistory history(2, 5);
  history.record(true);
  history.record(true);
  EXPECT_EQ(history.leave_reason(),
            "this node's workers were the root cause of 2 of the job's last 2 failures: leaving "
            "the job so that a spare can take its place");
}

TEST(FailureHistory, OffByDefaultWithALimitOfZero) {
  FailureHistory history(0, 3);
  EXPECT_FALSE(history.enabled());
  for (int i = 0; i < 5; ++i) history.record(true);
  EXPECT_EQ(history.leave_reason(), "");
}

TEST(FailureHistory, TheRootCauseMustBeOneOfThisNodesRanksAndAWorker) {
  EXPECT_TRUE(FailureHistory::caused_by(report_of_rank(2), 2, 2));
  EXPECT_TRUE(FailureHistory::caused_by(report_of_rank(3), 2, 2));
  EXPECT_FALSE(FailureHistory::caused_by(report_of_rank(1), 2, 2));
  EXPECT_FALSE(FailureHistory::caused_by(report_of_rank(4), 2, 2));
  EXPECT_FALSE(FailureHistory::caused_by(FailureReport{}, 0, 2)) << "no failure in it";
  FailureReport lost = report_of_rank(2);
  lost.cause = "the rendezvous server at head:29400 was lost";
  EXPECT_FALSE(FailureHistory::caused_by(lost, 2, 2)) << "a cause outside the workers";
}

class NodeFailureLimitTest : public AgentFitnessLifecycleTest {
 protected:
  void start_limited(int limit, int window) {
    AgentOptions o = options(2);
    o.node_failures.limit = static_cast<uint32_t>(limit);
    o.node_failures.window = static_cast<uint32_t>(window);
    start(o, coordinator_);
    join(0);
  }
  void join(int restart_count) {
    ASSERT_TRUE(coordinator_.pending_join);
    std::exchange(coordinator_.pending_join, nullptr)(node1_of_2(restart_count, 10));
    io_.poll();
  }
  // This node's rank 2 (local rank 0) fails; the coordinator restarts the job with its report.
  void own_failure() {
    const std::size_t first = launcher_.spawned.size() - 2;
    agent_->on_child_exit(static_cast<pid_t>(1000 + first), ExitStatus::exited(1));
    io_.poll();
    exit_all_from(first + 1, ExitStatus::killed(SIGTERM));
    ASSERT_TRUE(coordinator_.pending_failure);
    Coordinator::FailureDecision decision;
    decision.restart = true;
    decision.report = report_of_rank(2);
    std::exchange(coordinator_.pending_failure, nullptr)(decision);
    io_.poll();
  }
  // Another node's rank 0 failed: the job restarts, and this node's workers are stopped.
  void failure_elsewhere() {
    CoordinatorEvent restart;
    restart.kind = CoordinatorEvent::Kind::kRejoin;
    restart.worker_failure = true;
    restart.report = report_of_rank(0);
    coordinator_.handler(restart);
    io_.poll();
    exit_all_from(launcher_.spawned.size() - 2, ExitStatus::killed(SIGTERM));
  }

  ScriptedCoordinator coordinator_;
};

// K = 2 of M = 3: the second failure this node's workers cause stops it rejoining; it leaves
// the job saying why, exit 69, so that a spare takes its place.
TEST_F(NodeFailureLimitTest, TheKthFailureCausedHereMakesTheNodeLeaveWithTheReasonExit69) {
  start_limited(2, 3);
  own_failure();
  ASSERT_EQ(coordinator_.offers.size(), 2u) << "the first failure is restarted";
  join(1);
  ::testing::internal::CaptureStderr();
  own_failure();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_EQ(coordinator_.offers.size(), 2u) << "no third join";
  EXPECT_EQ(coordinator_.exclude_reason,
            "this node's workers were the root cause of 2 of the job's last 2 failures: leaving "
            "the job so that a spare can take its place");
  EXPECT_EQ(launcher_.spawned.size(), 4u);
  EXPECT_NE(err.find("Root Cause"), std::string::npos) << "the job's report: " << err;
}

// Other nodes' failures in between push this node's out of the window: it stays.
TEST_F(NodeFailureLimitTest, OtherNodesFailuresInBetweenAreNotCountedAsThisNodes) {
  start_limited(2, 3);
  own_failure();
  join(1);
  failure_elsewhere();
  join(2);
  failure_elsewhere();
  join(3);
  own_failure();  // the last three: elsewhere, elsewhere, here
  EXPECT_FALSE(agent_->exit_code());
  ASSERT_EQ(coordinator_.offers.size(), 5u);
  EXPECT_EQ(coordinator_.exclude_reason, "");
  join(4);
  own_failure();  // elsewhere, here, here
  EXPECT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_EQ(coordinator_.exclude_reason, kTwoOfThree);
}

TEST_F(NodeFailureLimitTest, OffItRestartsAsBefore) {
  start_limited(0, 3);
  for (int restart = 1; restart <= 4; ++restart) {
    own_failure();
    join(restart);
  }
  EXPECT_FALSE(agent_->exit_code());
  EXPECT_EQ(coordinator_.offers.size(), 5u);
}

// ddprun.exclude_node: the workers are stopped, nothing is reported as a worker failure (no
// restart is charged), the node leaves with the request as the reason, exit 69.
TEST_F(AgentFitnessLifecycleTest, ARanksExcludeRequestStopsTheWorkersAndLeavesWith69) {
  ScriptedCoordinator coordinator;
  start(options(2), coordinator);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  WorkerNotice exclude{WorkerNotice::Kind::kExcludeNode, 1001, "ECC errors on GPU 3"};
  exclude.local_rank = 1;
  parts_.channel.deliver(exclude);
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGTERM}));
  ::testing::internal::CaptureStderr();
  agent_->on_child_exit(1001, ExitStatus::exited(kExitUnhealthy));  // the rank that asked
  agent_->on_child_exit(1000, ExitStatus::killed(SIGTERM));
  io_.poll();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_TRUE(coordinator.reports.empty()) << "not a failure to restart";
  EXPECT_EQ(coordinator.exclude_reason, "rank 3 asked to exclude this node: ECC errors on GPU 3");
  EXPECT_NE(err.find("cause     : rank 3 asked to exclude this node: ECC errors on GPU 3"),
            std::string::npos)
      << err;
}

// A process of the rank's (a data-loader worker) asked: every worker is stopped, once.
TEST_F(AgentFitnessLifecycleTest, AnExcludeRequestFromAWorkersChildStopsEveryWorker) {
  ScriptedCoordinator coordinator;
  start(options(2), coordinator);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  WorkerNotice exclude{WorkerNotice::Kind::kExcludeNode, 4242, "bad NIC"};
  exclude.local_rank = 0;
  parts_.channel.deliver(exclude);
  parts_.channel.deliver(exclude);  // a second request does not escalate to SIGKILL
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGTERM}));
  EXPECT_EQ(launcher_.signals_to(1001), (std::vector<int>{SIGTERM}));
  exit_all_from(0, ExitStatus::killed(SIGTERM));
  EXPECT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_EQ(coordinator.exclude_reason, "rank 2 asked to exclude this node: bad NIC");
}

TEST_F(AgentFitnessLifecycleTest, AFailedHealthCheckLeavesSayingWhy) {
  ScriptedCoordinator coordinator;
  AgentOptions o = options(1);
  o.health_check.command = "exit 1";
  start(o, coordinator);
  agent_->on_child_exit(1000, ExitStatus::exited(1));
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_NE(coordinator.exclude_reason.find("this node failed its health check"), std::string::npos)
      << coordinator.exclude_reason;
}

// The rendezvous keeps this host out for a cool-down: exit 69 with its sentence, not 1.
TEST_F(AgentFitnessLifecycleTest, AJoinRefusedBecauseTheHostIsKeptOutEndsWith69) {
  ScriptedCoordinator coordinator;
  start(options(1), coordinator);
  coordinator.pending_join(
      Status::excluded("host node-a is kept out of job 'job' until 12:00:00 UTC: bad GPU"));
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_TRUE(launcher_.spawned.empty());
  EXPECT_EQ(coordinator.exclude_reason, "") << "it was kept out: nothing to say";
}

TEST(RendezvousCoordinatorExclusion, TheLeaveSaysWhyAndAnotherNodesFailureCarriesItsReport) {
  testing::ScriptedRendezvousClient client;
  RendezvousCoordinatorOptions o;
  o.job.max_nodes = 2;
  o.node_id = "node-b";
  o.server = "head:29400";
  RendezvousCoordinator coordinator(o, client);
  std::vector<CoordinatorEvent> events;
  coordinator.set_event_handler([&](const CoordinatorEvent& e) { events.push_back(e); });
  coordinator.join({1, "10.0.0.2", 5000}, [](Result<RoundAssignment>) {});
  std::exchange(client.pending_connect, nullptr)(Status());
  rdzv::RoundAssigned a;
  a.job_id = "job";
  a.group_world_size = 2;
  a.local_world_size = 1;
  a.world_size = 2;
  std::exchange(client.pending_join, nullptr)(a);
  client.push(rdzv::RestartRequested{0, rdzv::RestartReason::kWorkerFailure, "node a",
                                     nlohmann::json(report_of_rank(0)).dump()});
  ASSERT_EQ(events.size(), 1u);
  ASSERT_EQ(events[0].report.failures.size(), 1u);
  EXPECT_EQ(events[0].report.root_cause().rank, 0);
  coordinator.close_excluded("rank 1 asked to exclude this node: bad NIC");
  bool left = false;
  coordinator.close_gracefully([&] { left = true; });
  EXPECT_TRUE(left);
  EXPECT_TRUE(client.closed);
  EXPECT_EQ(client.exclude_reason, "rank 1 asked to exclude this node: bad NIC");
}

TEST(AgentFitnessMetrics, RequestsAndExclusionsAreCountedByReason) {
  metrics::Registry registry;
  FakeClock clock;
  AgentMetrics metrics(registry, AgentMetricsOptions{"j1"}, clock);
  metrics.on_exclude_requested(3, "ECC errors");
  metrics.on_left_unfit(UnfitReason::kExcludeRequest, "rank 3 asked to exclude this node");
  metrics.on_left_unfit(UnfitReason::kFailures, "this node's workers were ...");
  const std::string text = registry.render();
  EXPECT_NE(text.find("ddprun_agent_exclude_requests_total{job_id=\"j1\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ddprun_agent_node_exclusions_total{job_id=\"j1\",reason=\"failures\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("ddprun_agent_node_exclusions_total{job_id=\"j1\",reason=\"exclude_request\"} 1"),
      std::string::npos)
      << text;
}

}  // namespace
}  // namespace ddprun::agent
