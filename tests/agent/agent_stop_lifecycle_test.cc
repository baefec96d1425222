// Failures the agent must not restart (issue 36), on fakes only: a rank's stop_job request
// through the worker channel, and --max_no_progress_restarts over the ranks' steps across
// attempts. Both end the job through the coordinator as not restartable, exit 79.
#include <gtest/gtest.h>

#include <csignal>

#include "agent/agent.h"
#include "agent/coordination/local_coordinator.h"
#include "agent/coordination/rendezvous_coordinator.h"
#include "agent/progress/restart_guard.h"
#include "common/exit_codes.h"
#include "tests/agent/agent_lifecycle_fixture.h"
#include "tests/agent/scripted_rendezvous_client.h"

namespace ddprun::agent {
namespace {

using testing::AgentLifecycleTest;
using testing::node1_of_2;
using testing::ScriptedCoordinator;

LocalRankProgress at_step(int local_rank, std::int64_t step) {
  LocalRankProgress p;
  p.local_rank = local_rank;
  p.state = RankState::kHeartbeating;
  p.last_step = step;
  return p;
}

TEST(RestartGuard, KAttemptsFailingAtTheSameStepAreNotRestartable) {
  RestartGuard guard(3);
  guard.attempt_failed({at_step(0, 1234), at_step(1, 1233)});
  EXPECT_EQ(guard.not_restartable(), "");
  guard.attempt_failed({at_step(0, 1234)});
  EXPECT_EQ(guard.not_restartable(), "");
  guard.attempt_failed({at_step(0, 1100), at_step(1, 1234)});
  EXPECT_EQ(guard.not_restartable(), "3 attempts in a row failed at step 1234: not restarting");
}

TEST(RestartGuard, ProgressBetweenFailuresStartsTheCountAgain) {
  RestartGuard guard(2);
  guard.attempt_failed({at_step(0, 10)});
  guard.attempt_failed({at_step(0, 11)});  // past 10: progress
  EXPECT_EQ(guard.not_restartable(), "");
  EXPECT_EQ(guard.attempts_without_progress(), 1u);
  guard.attempt_failed({at_step(0, 12)});
  EXPECT_EQ(guard.not_restartable(), "");
  guard.attempt_failed({});  // no step reported at all: no progress
  EXPECT_EQ(guard.not_restartable(), "2 attempts in a row failed at step 12: not restarting");
}

TEST(RestartGuard, OffByDefaultAndAStopRequestWinsOncePerAttempt) {
  RestartGuard guard;
  for (int i = 0; i < 10; ++i) guard.attempt_failed({});
  EXPECT_EQ(guard.not_restartable(), "");
  guard.stop_requested(3, "NaN loss");
  guard.stop_requested(2, "second");
  EXPECT_EQ(guard.not_restartable(), "rank 3 asked to stop the job: NaN loss");
  guard.attempt_started();
  EXPECT_EQ(guard.not_restartable(), "");
  RestartGuard never(2);
  never.attempt_failed({});
  never.attempt_failed({});
  EXPECT_EQ(never.not_restartable(), "2 attempts in a row failed before any step: not restarting");
}

// ddprun.stop_job: the rank that asked is the root cause, the others are stopped, and the job
// ends at once although restarts are left, exit 79 with the reason in the report.
TEST_F(AgentLifecycleTest, AStopJobRequestEndsTheJobWithoutARestartExit79) {
  LocalCoordinator coordinator(io_, {.max_restarts = 5});
  start(options(2), coordinator);
  WorkerNotice stop{WorkerNotice::Kind::kStopJob, 1001, "NaN loss at step 1200"};
  stop.local_rank = 1;
  parts_.channel.deliver(stop);
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGTERM}));
  agent_->on_child_exit(1000, ExitStatus::killed(SIGTERM));
  agent_->on_child_exit(1001, ExitStatus::exited(kExitDoNotRequeue));
  io_.poll();
  EXPECT_EQ(launcher_.spawned.size(), 2u);  // not restarted
  EXPECT_EQ(agent_->exit_code(), kExitDoNotRequeue);
}

// A process of the rank's that is not the worker itself (a data-loader worker) asked: the
// rank's worker may run on, so every worker is stopped and the rank is the root cause.
TEST_F(AgentLifecycleTest, AStopJobRequestFromAWorkersChildStopsEveryWorker) {
  LocalCoordinator coordinator(io_, {.max_restarts = 5});
  start(options(2), coordinator);
  WorkerNotice stop{WorkerNotice::Kind::kStopJob, 4242, "bad batch"};
  stop.local_rank = 1;
  parts_.channel.deliver(stop);
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGTERM}));
  EXPECT_EQ(launcher_.signals_to(1001), (std::vector<int>{SIGTERM}));
  exit_all_from(0, ExitStatus::killed(SIGTERM));
  EXPECT_EQ(launcher_.spawned.size(), 2u);
  EXPECT_EQ(agent_->exit_code(), kExitDoNotRequeue);
}

// The request reaches a networked coordinator as the report's not_restartable, with exit 79;
// the report's root cause is the rank that asked.
TEST_F(AgentLifecycleTest, AStopJobRequestIsReportedAsNotRestartable) {
  ScriptedCoordinator coordinator;
  start(options(2), coordinator);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  agent_->on_child_exit(1000, ExitStatus::exited(kExitDoNotRequeue));  // its exit came first
  WorkerNotice stop{WorkerNotice::Kind::kStopJob, 1000, "bad data"};
  stop.local_rank = 0;
  parts_.channel.deliver(stop);
  agent_->on_child_exit(1001, ExitStatus::killed(SIGTERM));
  io_.poll();
  ASSERT_EQ(coordinator.reports.size(), 1u);
  const FailureReport& report = coordinator.reports[0];
  EXPECT_EQ(report.not_restartable, "rank 2 asked to stop the job: bad data");
  EXPECT_EQ(report.exit_code(), kExitDoNotRequeue);
  EXPECT_EQ(report.root_cause().rank, 2);
  EXPECT_NE(report.render().find("not restarted: rank 2 asked to stop the job: bad data"),
            std::string::npos)
      << report.render();
}

// --max_no_progress_restarts 3 with restarts left: the third failure at the same step ends it.
TEST_F(AgentLifecycleTest, ThreeFailuresAtTheSameStepStopTheJobExit79) {
  LocalCoordinator coordinator(io_, {.max_restarts = 10});
  AgentOptions o = options(1);
  o.progress.max_no_progress_restarts = 3;
  parts_.progress.ranks = {at_step(0, 1234)};
  start(o, coordinator);
  for (std::size_t attempt = 0; attempt < 2; ++attempt) {
    exit_all_from(attempt, ExitStatus::exited(1));
    ASSERT_EQ(launcher_.spawned.size(), attempt + 2);  // restarted
  }
  exit_all_from(2, ExitStatus::exited(1));
  EXPECT_EQ(launcher_.spawned.size(), 3u);
  EXPECT_EQ(agent_->exit_code(), kExitDoNotRequeue);
}

TEST_F(AgentLifecycleTest, FailuresWithProgressBetweenThemKeepRestarting) {
  LocalCoordinator coordinator(io_, {.max_restarts = 10});
  AgentOptions o = options(1);
  o.progress.max_no_progress_restarts = 2;
  start(o, coordinator);
  for (std::size_t attempt = 0; attempt < 5; ++attempt) {
    parts_.progress.ranks = {at_step(0, 100 * static_cast<std::int64_t>(attempt + 1))};
    exit_all_from(attempt, ExitStatus::exited(1));
    ASSERT_EQ(launcher_.spawned.size(), attempt + 2) << attempt;
  }
  EXPECT_FALSE(agent_->exit_code());
}

// Multi-node: another node's worker failure (a counted restart) ends an attempt here too; the
// node that reports the K-th failure in a row says it is not restartable.
TEST_F(AgentLifecycleTest, AnotherNodesFailuresCountTowardsNoProgress) {
  ScriptedCoordinator coordinator;
  AgentOptions o = options(1);
  o.progress.max_no_progress_restarts = 2;
  parts_.progress.ranks = {at_step(0, 50)};
  start(o, coordinator);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  CoordinatorEvent elsewhere;
  elsewhere.kind = CoordinatorEvent::Kind::kRejoin;
  elsewhere.worker_failure = true;
  coordinator.handler(elsewhere);
  io_.poll();
  exit_all_from(0, ExitStatus::killed(SIGTERM));
  ASSERT_EQ(coordinator.offers.size(), 2u);
  coordinator.pending_join(node1_of_2(1));
  io_.poll();
  exit_all_from(1, ExitStatus::exited(1));
  ASSERT_EQ(coordinator.reports.size(), 1u);
  EXPECT_EQ(coordinator.reports[0].not_restartable,
            "2 attempts in a row failed at step 50: not restarting");
}

// Over the rendezvous: the reason travels with the report (and exit 79), the server's JobFailed
// answers it; another node's worker failure is a kRejoin that says so.
TEST(RendezvousCoordinatorNotRestartable, TheReasonGoesToTheServerAndItsAnswerEndsTheJob) {
  testing::ScriptedRendezvousClient client;
  RendezvousCoordinatorOptions o;
  o.job.max_nodes = 2;
  o.job.max_restarts = 3;
  o.node_id = "node-b";
  o.server = "head:29400";
  RendezvousCoordinator coordinator(o, client);
  std::vector<CoordinatorEvent> events;
  coordinator.set_event_handler([&](const CoordinatorEvent& e) { events.push_back(e); });
  auto join = [&](uint64_t round) {
    coordinator.join({1, "10.0.0.2", 5000}, [](Result<RoundAssignment>) {});
    if (client.pending_connect) std::exchange(client.pending_connect, nullptr)(Status());
    rdzv::RoundAssigned a;
    a.job_id = "job";
    a.round = round;
    a.group_world_size = 2;
    a.local_world_size = 1;
    a.world_size = 2;
    a.max_restarts = 3;
    std::exchange(client.pending_join, nullptr)(a);
  };
  join(0);
  client.push(rdzv::RestartRequested{0, rdzv::RestartReason::kWorkerFailure, "node a", "{}"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].worker_failure);
  join(1);
  client.push(rdzv::RestartRequested{1, rdzv::RestartReason::kScaleUp, "node c", ""});
  ASSERT_EQ(events.size(), 2u);
  EXPECT_FALSE(events[1].worker_failure);
  join(2);
  FailureReport report;
  report.entrypoint = "train.py";
  report.failures.push_back({});
  report.not_restartable = "rank 0 asked to stop the job: bad data";
  std::optional<Coordinator::FailureDecision> decision;
  coordinator.report_failure(report, [&](Coordinator::FailureDecision d) { decision = d; });
  ASSERT_EQ(client.failure_reports.size(), 1u);
  EXPECT_EQ(client.failure_reports[0].not_restartable, report.not_restartable);
  EXPECT_EQ(client.failure_reports[0].exit_code, kExitDoNotRequeue);
  client.push(rdzv::JobFailed{rdzv::JobFailureReason::kNotRestartable, "must not be restarted",
                              client.failure_reports[0].failure_report, kExitDoNotRequeue});
  ASSERT_TRUE(decision);
  EXPECT_FALSE(decision->restart);
  EXPECT_EQ(decision->exit_code, kExitDoNotRequeue);
  EXPECT_EQ(decision->report.not_restartable, report.not_restartable);
  coordinator.close();
}

}  // namespace
}  // namespace ddprun::agent
