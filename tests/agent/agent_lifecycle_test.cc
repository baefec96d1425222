// The agent's lifecycle (start, supervise, restart, signals, finish) on fakes only
// (tests/agent/fake_agent_parts.h): no fork, no port, no file, no signal raised, no sleeps.
// Child exits and signals are fed by hand, timers run on a fake clock, and the Asio loop only
// runs what is already due (poll()).
#include "agent/agent.h"

#include <gtest/gtest.h>

#include <csignal>

#include "agent/coordination/local_coordinator.h"
#include "tests/agent/agent_lifecycle_fixture.h"

namespace ddprun::agent {
namespace {

using testing::AgentLifecycleTest;
using testing::node1_of_2;
using testing::ScriptedCoordinator;
using testing::spawned_env;

TEST_F(AgentLifecycleTest, StartsOneWorkerPerLocalRankWithTheContract) {
  LocalCoordinator coordinator(io_, {});
  start(options(2), coordinator);
  ASSERT_EQ(launcher_.spawned.size(), 2u);
  const SpawnRequest& r1 = launcher_.spawned[1];
  EXPECT_EQ(r1.executable, "/usr/bin/worker");
  EXPECT_EQ(r1.argv, (std::vector<std::string>{"worker", "--lr", "1"}));
  EXPECT_EQ(spawned_env(r1, "RANK"), "1");
  EXPECT_EQ(spawned_env(r1, "LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(spawned_env(r1, "TORCHELASTIC_RESTART_COUNT"), "0");
  EXPECT_EQ(spawned_env(r1, "TORCHELASTIC_MAX_RESTARTS"), "0");
  const std::string error_file = spawned_env(r1, "TORCHELASTIC_ERROR_FILE");
  EXPECT_EQ(error_file.rfind(log_dir_ + "/job_", 0), 0u) << error_file;
  EXPECT_NE(error_file.find("/attempt_0/1/error.json"), std::string::npos) << error_file;
  EXPECT_NE(spawned_env(r1, "MASTER_PORT"), "0");
  EXPECT_FALSE(agent_->exit_code());
}

TEST_F(AgentLifecycleTest, SuccessEndsWithZero) {
  LocalCoordinator coordinator(io_, {});
  start(options(2), coordinator);
  exit_all_from(0, ExitStatus::exited(0));
  EXPECT_EQ(agent_->exit_code(), 0);
}

TEST_F(AgentLifecycleTest, FailureStopsSiblingsRestartsWithNewPortAndCountThenSucceeds) {
  LocalCoordinator coordinator(io_, {.max_restarts = 2});
  start(options(2), coordinator);
  const std::string first_port = spawned_env(launcher_.spawned[0], "MASTER_PORT");
  agent_->on_child_exit(1001, ExitStatus::exited(3));
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGTERM}));
  EXPECT_EQ(launcher_.spawned.size(), 2u);  // no restart before every worker has stopped
  agent_->on_child_exit(1000, ExitStatus::killed(SIGTERM));
  io_.poll();
  ASSERT_EQ(launcher_.spawned.size(), 4u);
  EXPECT_EQ(spawned_env(launcher_.spawned[2], "TORCHELASTIC_RESTART_COUNT"), "1");
  EXPECT_NE(spawned_env(launcher_.spawned[2], "MASTER_PORT"), first_port);
  EXPECT_NE(spawned_env(launcher_.spawned[3], "TORCHELASTIC_ERROR_FILE").find("/attempt_1/1/"),
            std::string::npos);
  EXPECT_FALSE(agent_->exit_code());
  exit_all_from(2, ExitStatus::exited(0));
  EXPECT_EQ(agent_->exit_code(), 0);
}

// A Python worker's bootstrap says its script raised (worker_channel.h): the agent stops the
// siblings then, not once the failing interpreter has exited, and the failing worker is the
// root cause with its own exit code.
TEST_F(AgentLifecycleTest, AnExceptionToldOnTheWorkerChannelStopsTheSiblingsBeforeItsExit) {
  LocalCoordinator coordinator(io_, {});
  start(options(2), coordinator);
  EXPECT_EQ(spawned_env(launcher_.spawned[0], "DDPRUN_WORKER_SOCKET"), "/fake/agent.sock");
  parts_.channel.deliver({WorkerNotice::Kind::kException, 1001, "RuntimeError: boom"});
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGTERM}));
  EXPECT_TRUE(launcher_.signals_to(1001).empty());
  agent_->on_child_exit(1000, ExitStatus::killed(SIGTERM));
  io_.poll();
  EXPECT_FALSE(agent_->exit_code());  // the failing one has not exited yet
  agent_->on_child_exit(1001, ExitStatus::exited(1));
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), 1);
  // A notice from a process that is not a running worker changes nothing.
  parts_.channel.deliver({WorkerNotice::Kind::kException, 4242, "RuntimeError: late"});
  io_.poll();
}

TEST_F(AgentLifecycleTest, ANoticeFromAnUnknownProcessIsIgnored) {
  LocalCoordinator coordinator(io_, {});
  start(options(2), coordinator);
  parts_.channel.deliver({WorkerNotice::Kind::kException, 4242, "RuntimeError: not ours"});
  io_.poll();
  EXPECT_TRUE(launcher_.signals_to(1000).empty());
  EXPECT_TRUE(launcher_.signals_to(1001).empty());
  exit_all_from(0, ExitStatus::exited(0));
  EXPECT_EQ(agent_->exit_code(), 0);
}

// Records what the agent reports to its observers, as one line per event.
class RecordingObserver final : public AgentObserver {
 public:
  void on_joining(int attempt) override { add("joining " + std::to_string(attempt)); }
  void on_round_assigned(const RoundAssignment& a, Millis) override {
    add("assigned restart_count=" + std::to_string(a.restart_count));
  }
  void on_workers_started(const RoundAssignment&, int workers,
                          std::optional<SteadyTime> failed_at) override {
    add("started " + std::to_string(workers) + (failed_at ? " after a failure" : ""));
  }
  void on_worker_exited(int local_rank, pid_t, const ExitStatus& status) override {
    add("exited " + std::to_string(local_rank) + " code " + std::to_string(status.shell_code()));
  }
  void on_group_finished(const GroupResult& r) override {
    add(r.outcome == GroupResult::Outcome::kFailed ? "group failed" : "group done");
  }
  void on_restart(bool counted) override { add(counted ? "restart counted" : "restart free"); }
  void on_job_finished(int exit_code) override { add("finished " + std::to_string(exit_code)); }
  void add(std::string line) { events.push_back(std::move(line)); }
  std::vector<std::string> events;
};

TEST_F(AgentLifecycleTest, ObserversSeeEveryStepOfARestartedJob) {
  LocalCoordinator coordinator(io_, {.max_restarts = 1});
  RecordingObserver observer;
  agent_.emplace(options(2), io_, parts_.with(coordinator));
  agent_->add_observer(observer);
  agent_->start();
  io_.poll();
  agent_->on_child_exit(1001, ExitStatus::exited(3));
  agent_->on_child_exit(1000, ExitStatus::killed(SIGTERM));
  io_.poll();
  exit_all_from(2, ExitStatus::exited(0));
  EXPECT_EQ(observer.events,
            (std::vector<std::string>{"joining 0", "assigned restart_count=0", "started 2",
                                      "exited 1 code 3", "exited 0 code 143", "group failed",
                                      "restart counted", "joining 1", "assigned restart_count=1",
                                      "started 2 after a failure", "exited 0 code 0",
                                      "exited 1 code 0", "group done", "finished 0"}));
}

TEST_F(AgentLifecycleTest, RestartsExhaustedEndWithTheRootCausesCode) {
  LocalCoordinator coordinator(io_, {.max_restarts = 1});
  start(options(1), coordinator);
  exit_all_from(0, ExitStatus::exited(7));
  ASSERT_EQ(launcher_.spawned.size(), 2u);  // one restart
  exit_all_from(1, ExitStatus::killed(SIGSEGV));
  EXPECT_EQ(launcher_.spawned.size(), 2u);
  EXPECT_EQ(agent_->exit_code(), 128 + SIGSEGV);
}

TEST_F(AgentLifecycleTest, WorkerThatCannotStartFailsWith127) {
  LocalCoordinator coordinator(io_, {});
  launcher_.fail_executable = "/usr/bin/worker";
  start(options(2), coordinator);
  EXPECT_EQ(agent_->exit_code(), 127);
}

TEST_F(AgentLifecycleTest, GlobalRanksComeFromTheRoundAndMembershipChangeRejoinsWithoutARestart) {
  ScriptedCoordinator coordinator;
  start(options(2), coordinator);
  ASSERT_EQ(coordinator.offers.size(), 1u);
  EXPECT_EQ(coordinator.offers[0].local_world_size, 2);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  ASSERT_EQ(launcher_.spawned.size(), 2u);
  EXPECT_EQ(spawned_env(launcher_.spawned[1], "RANK"), "3");
  EXPECT_EQ(spawned_env(launcher_.spawned[1], "GROUP_RANK"), "1");
  EXPECT_EQ(spawned_env(launcher_.spawned[1], "WORLD_SIZE"), "4");
  EXPECT_EQ(spawned_env(launcher_.spawned[1], "MASTER_ADDR"), "127.0.0.9");
  EXPECT_EQ(spawned_env(launcher_.spawned[1], "MASTER_PORT"), "4242");
  // The budget the coordinator agreed on, not one the agent keeps.
  EXPECT_EQ(spawned_env(launcher_.spawned[1], "TORCHELASTIC_MAX_RESTARTS"), "3");

  coordinator.handler({CoordinatorEvent::Kind::kRejoin, "scale-up", {}, 1});
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGTERM}));
  exit_all_from(0, ExitStatus::killed(SIGTERM));
  ASSERT_EQ(coordinator.offers.size(), 2u);  // joined again
  EXPECT_TRUE(coordinator.reports.empty());  // a stop we asked for is not a failure
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  ASSERT_EQ(launcher_.spawned.size(), 4u);
  exit_all_from(2, ExitStatus::exited(0));
  ASSERT_TRUE(coordinator.pending_success);  // success goes through the exit barrier
  EXPECT_FALSE(agent_->exit_code());
  coordinator.pending_success(Status());
  EXPECT_EQ(agent_->exit_code(), 0);
}

// The workers succeeded and the agent waits at the exit barrier when the round ends elsewhere
// (a node lost for good, or failed): it joins the next round and runs its workers again.
TEST_F(AgentLifecycleTest, ARejoinAtTheExitBarrierRunsTheWorkersAgain) {
  ScriptedCoordinator coordinator;
  start(options(2), coordinator);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  exit_all_from(0, ExitStatus::exited(0));
  ASSERT_TRUE(coordinator.pending_success);
  coordinator.pending_success = nullptr;  // the coordinator drops the barrier's answer
  coordinator.handler({CoordinatorEvent::Kind::kRejoin, "member lost", {}, 1});
  io_.poll();
  ASSERT_EQ(coordinator.offers.size(), 2u);  // joined again
  EXPECT_FALSE(agent_->exit_code());
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  ASSERT_EQ(launcher_.spawned.size(), 4u);
  exit_all_from(2, ExitStatus::exited(0));
  ASSERT_TRUE(coordinator.pending_success);
  coordinator.pending_success(Status());
  EXPECT_EQ(agent_->exit_code(), 0);
}

TEST_F(AgentLifecycleTest, FailureDuringARestartRequestedElsewhereRejoinsWithoutReporting) {
  ScriptedCoordinator coordinator;
  start(options(2), coordinator);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  agent_->on_child_exit(1000, ExitStatus::exited(1));  // our worker fails as its peer vanishes
  coordinator.handler({CoordinatorEvent::Kind::kRejoin, "member lost", {}, 1});
  exit_all_from(1, ExitStatus::killed(SIGTERM));
  EXPECT_TRUE(coordinator.reports.empty());  // the server has ended that round already
  EXPECT_EQ(coordinator.offers.size(), 2u);  // straight to the next round
}

TEST_F(AgentLifecycleTest, JobFailureElsewherePrintsTheJobsReportAndExitsWithItsCode) {
  ScriptedCoordinator coordinator;
  start(options(1), coordinator);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  FailureReport elsewhere;
  elsewhere.entrypoint = "worker";
  WorkerFailure f;
  f.rank = 0;
  f.exit = ExitStatus::exited(5);
  elsewhere.failures.push_back(f);
  coordinator.handler({CoordinatorEvent::Kind::kJobFailed, "restarts exhausted", elsewhere, 5});
  exit_all_from(0, ExitStatus::killed(SIGTERM));
  EXPECT_EQ(agent_->exit_code(), 5);
  EXPECT_TRUE(coordinator.closed);
}

TEST_F(AgentLifecycleTest, OwnFailureIsReportedAndTheCoordinatorDecides) {
  ScriptedCoordinator coordinator;
  start(options(1), coordinator);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  exit_all_from(0, ExitStatus::exited(9));
  ASSERT_EQ(coordinator.reports.size(), 1u);
  EXPECT_EQ(coordinator.reports[0].root_cause().rank, 2);
  EXPECT_EQ(coordinator.reports[0].exit_code(), 9);
  coordinator.pending_failure({true, coordinator.reports[0], 9});
  io_.poll();
  EXPECT_EQ(coordinator.offers.size(), 2u);  // restart: join the next round
  coordinator.pending_join(node1_of_2(1));
  io_.poll();
  EXPECT_EQ(spawned_env(launcher_.spawned[1], "TORCHELASTIC_RESTART_COUNT"), "1");
}

// --shutdown_timeout on the fake clock: SIGTERM first, SIGKILL for whoever is still running when
// it has passed, and the job ends with 128 + the signal that stopped it.
TEST_F(AgentLifecycleTest, SigtermStopsTheWorkersAndSigkillsThoseLeftAfterTheShutdownTimeout) {
  LocalCoordinator coordinator(io_, {});
  AgentOptions o = options(2);
  o.shutdown_timeout = Millis(30'000);
  start(o, coordinator);
  parts_.signals.deliver(SIGTERM);
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGTERM}));
  EXPECT_EQ(launcher_.signals_to(1001), (std::vector<int>{SIGTERM}));
  ASSERT_TRUE(parts_.shutdown_timer.armed());

  agent_->on_child_exit(1000, ExitStatus::killed(SIGTERM));  // rank 0 obeys in time
  parts_.advance(Millis(29'999));
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1001), (std::vector<int>{SIGTERM})) << "not before the timeout";
  parts_.advance(Millis(1));
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1001), (std::vector<int>{SIGTERM, SIGKILL}));
  EXPECT_FALSE(agent_->exit_code()) << "the agent waits for the killed worker's exit";

  agent_->on_child_exit(1001, ExitStatus::killed(SIGKILL));
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), 128 + SIGTERM);
  EXPECT_EQ(launcher_.spawned.size(), 2u) << "a signal ends the job: no restart";
  EXPECT_FALSE(parts_.shutdown_timer.armed());
  EXPECT_FALSE(parts_.signals.handler) << "the agent stops watching signals when done";
}

TEST_F(AgentLifecycleTest, WorkersThatStopInTimeAreNeverSigkilledByTheTimeout) {
  LocalCoordinator coordinator(io_, {});
  start(options(2), coordinator);
  parts_.signals.deliver(SIGINT);
  io_.poll();
  exit_all_from(0, ExitStatus::killed(SIGINT));
  EXPECT_EQ(agent_->exit_code(), 128 + SIGINT);
  EXPECT_FALSE(parts_.shutdown_timer.armed()) << "cancelled once every worker had stopped";
  const auto before = launcher_.signals.size();
  parts_.advance(Millis(60'000));
  EXPECT_EQ(launcher_.signals.size(), before);
}

TEST_F(AgentLifecycleTest, ASecondSignalSigkillsAtOnce) {
  LocalCoordinator coordinator(io_, {});
  start(options(1), coordinator);
  parts_.signals.deliver(SIGTERM);
  parts_.signals.deliver(SIGTERM);
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGTERM, SIGKILL}));
  exit_all_from(0, ExitStatus::killed(SIGKILL));
  EXPECT_EQ(agent_->exit_code(), 128 + SIGTERM);
}

TEST_F(AgentLifecycleTest, ASignalWhileJoiningEndsTheJobWithoutStartingWorkers) {
  ScriptedCoordinator coordinator;
  start(options(2), coordinator);
  parts_.signals.deliver(SIGTERM);
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), 128 + SIGTERM);
  EXPECT_TRUE(coordinator.closed);
  if (coordinator.pending_join) coordinator.pending_join(node1_of_2(0));  // an answer too late
  io_.poll();
  EXPECT_TRUE(launcher_.spawned.empty());
}

// Each round offers a fresh store port, prepares its attempt's directories and its progress
// watch, and ends the store's round once every worker has exited; a successful job removes its
// temporary log directory.
TEST_F(AgentLifecycleTest, EachRoundGetsItsStoreLogsAndProgressFromTheParts) {
  LocalCoordinator coordinator(io_, {.max_restarts = 1});
  AgentOptions o = options(2);
  o.logs.log_dir.clear();  // a temporary directory
  start(o, coordinator);
  EXPECT_EQ(spawned_env(launcher_.spawned[0], "MASTER_PORT"), "40000");
  EXPECT_EQ(spawned_env(launcher_.spawned[1], "DDPRUN_HEARTBEAT_FILE"),
            "/nonexistent/job_fake/attempt_0/progress/1");
  EXPECT_EQ(parts_.progress.started.size(), 2u);
  exit_all_from(0, ExitStatus::exited(1));
  EXPECT_EQ(parts_.store.rounds_ended, 1);
  EXPECT_EQ(parts_.progress.attempts_ended, 1);
  ASSERT_EQ(launcher_.spawned.size(), 4u);
  EXPECT_EQ(spawned_env(launcher_.spawned[2], "MASTER_PORT"), "40001");
  EXPECT_EQ(parts_.log_files.prepared_attempts, (std::vector<int>{0, 1}));
  EXPECT_FALSE(parts_.log_files.removed);
  exit_all_from(2, ExitStatus::exited(0));
  EXPECT_EQ(agent_->exit_code(), 0);
  EXPECT_TRUE(parts_.log_files.removed);
  EXPECT_EQ(parts_.store.rounds_assigned, 2);
}

// A failed worker's report carries the last lines of its stderr log when it went to a file.
TEST_F(AgentLifecycleTest, TheReportOfARedirectedWorkerHasItsStderrTail) {
  ScriptedCoordinator coordinator;
  AgentOptions o = options(1);
  o.logs.redirects.all = kStderr;
  start(o, coordinator);
  coordinator.pending_join(node1_of_2(0));
  io_.poll();
  parts_.log_files.file_lines[log_dir_ + "/job_fake/attempt_0/0/stderr.log"] = {"Traceback",
                                                                                "ValueError: x"};
  exit_all_from(0, ExitStatus::exited(1));
  ASSERT_EQ(coordinator.reports.size(), 1u);
  EXPECT_EQ(coordinator.reports[0].root_cause().stderr_tail,
            (std::vector<std::string>{"Traceback", "ValueError: x"}));
}

}  // namespace
}  // namespace ddprun::agent
