// The worker-group state machine on fakes: no fork, no sleeps, no real time.
#include "agent/process/worker_group.h"

#include <gtest/gtest.h>

#include <csignal>

#include "tests/agent/fake_process_launcher.h"

namespace ddprun::agent {
namespace {

using testing::FakeDeadlineTimer;
using testing::FakeProcessLauncher;

class GroupEventLog final : public WorkerGroupObserver {
 public:
  void on_worker_started(const WorkerLaunch& launch, SpawnedProcess&) override {
    started.push_back(launch.local_rank);
  }
  void on_group_finished(const GroupResult& r) override {
    ++finished_calls;
    result = r;
  }
  std::vector<int> started;
  int finished_calls = 0;
  std::optional<GroupResult> result;
};

class WorkerGroupTest : public ::testing::Test {
 protected:
  std::vector<WorkerLaunch> launches(int n) {
    std::vector<WorkerLaunch> out;
    for (int i = 0; i < n; ++i) {
      WorkerLaunch l;
      l.local_rank = i;
      l.rank = 10 + i;
      l.error_file = "/logs/attempt_0/" + std::to_string(i) + "/error.json";
      l.request.executable = "/usr/bin/worker";
      out.push_back(l);
    }
    return out;
  }

  FakeProcessLauncher launcher;
  FakeDeadlineTimer timer;
  FakeDeadlineTimer kill_wait_timer;
  FakeClock clock;
  GroupEventLog observer;
  WorkerGroup group{WorkerGroupOptions{Millis(5000), Millis(30'000), "node-a"},
                    launcher,
                    timer,
                    kill_wait_timer,
                    clock,
                    observer};
};

TEST_F(WorkerGroupTest, StartsEveryWorkerInRankOrder) {
  group.start(launches(3));
  EXPECT_EQ(launcher.spawned.size(), 3u);
  EXPECT_EQ(observer.started, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(group.running_pids(), (std::vector<pid_t>{1000, 1001, 1002}));
  EXPECT_FALSE(group.finished());
}

// A worker that reads the terminal from its background process group is stopped by SIGTTIN and
// would hold the whole job forever: it is a failure like any other.
TEST_F(WorkerGroupTest, AJobControlStopIsTheWorkersFailure) {
  group.start(launches(2));
  EXPECT_TRUE(group.on_child_stopped(1001, SIGTTIN));
  EXPECT_EQ(launcher.signals_to(1001), (std::vector<int>{SIGTERM, SIGKILL}));
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGTERM}));
  group.on_child_exit(1001, ExitStatus::killed(SIGKILL));
  group.on_child_exit(1000, ExitStatus::killed(SIGTERM));
  ASSERT_TRUE(observer.result);
  ASSERT_EQ(observer.result->outcome, GroupResult::Outcome::kFailed);
  ASSERT_EQ(observer.result->failures.size(), 1u);  // its later SIGKILL is no second failure
  const WorkerFailure& root = observer.result->failures[0];
  EXPECT_EQ(root.rank, 11);
  EXPECT_TRUE(root.exit.stopped);
  EXPECT_EQ(root.exit.signal, SIGTTIN);
  EXPECT_EQ(root.exit.shell_code(), 128 + SIGTTIN);
}

TEST_F(WorkerGroupTest, ASigstopPausesAWorkerWithoutFailingIt) {
  group.start(launches(2));
  EXPECT_TRUE(group.on_child_stopped(1000, SIGSTOP));  // a debugger or an operator
  EXPECT_TRUE(launcher.signals.empty());
  EXPECT_FALSE(group.finished());
  EXPECT_FALSE(group.on_child_stopped(4242, SIGTTIN));  // not a worker
}

TEST_F(WorkerGroupTest, SucceedsWhenEveryWorkerExitsZero) {
  group.start(launches(2));
  EXPECT_TRUE(group.on_child_exit(1001, ExitStatus::exited(0)));
  EXPECT_EQ(observer.finished_calls, 0);
  EXPECT_TRUE(group.on_child_exit(1000, ExitStatus::exited(0)));
  ASSERT_EQ(observer.finished_calls, 1);
  EXPECT_EQ(observer.result->outcome, GroupResult::Outcome::kSucceeded);
  EXPECT_TRUE(group.finished());
}

TEST_F(WorkerGroupTest, UnknownPidIsNotOurs) {
  group.start(launches(1));
  EXPECT_FALSE(group.on_child_exit(4242, ExitStatus::exited(1)));
  EXPECT_EQ(observer.finished_calls, 0);
}

TEST_F(WorkerGroupTest, ExitedWorkersGroupIsKilledAtOnceToEndGrandchildren) {
  group.start(launches(2));
  group.on_child_exit(1000, ExitStatus::exited(0));
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGKILL}));
  EXPECT_TRUE(launcher.signals_to(1001).empty());  // a sibling that succeeded disturbs nobody
}

TEST_F(WorkerGroupTest, FailureSendsSigtermToEverySiblingAndArmsTheDeadline) {
  group.start(launches(3));
  clock.advance(std::chrono::seconds(3));
  group.on_child_exit(1001, ExitStatus::exited(3));
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGTERM}));
  EXPECT_EQ(launcher.signals_to(1002), (std::vector<int>{SIGTERM}));
  EXPECT_EQ(launcher.signals_to(1001), (std::vector<int>{SIGKILL}));  // only its leftovers
  ASSERT_TRUE(timer.armed());
  EXPECT_EQ(*timer.armed_for, Millis(5000));
  EXPECT_EQ(observer.finished_calls, 0);  // siblings still running
}

// Issue 22: once a hang is found, a rank that dies of it (its peer on another node was stopped)
// must not take the others' stacks with a SIGTERM.
TEST_F(WorkerGroupTest, AfterAHangVerdictAFailureStopsTheSiblingsWithSigabrt) {
  group.start(launches(3));
  group.stop_failures_with(SIGABRT);
  group.on_child_exit(1001, ExitStatus::exited(1));
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGABRT}));
  EXPECT_EQ(launcher.signals_to(1002), (std::vector<int>{SIGABRT}));
  ASSERT_TRUE(timer.armed());  // and SIGKILL at the deadline, as for any failure
}

TEST_F(WorkerGroupTest, SiblingsThatIgnoreSigtermAreKilledAtTheDeadline) {
  group.start(launches(2));
  group.on_child_exit(1000, ExitStatus::exited(1));
  timer.fire();
  EXPECT_EQ(launcher.signals_to(1001), (std::vector<int>{SIGTERM, SIGKILL}));
  group.on_child_exit(1001, ExitStatus::killed(SIGKILL));
  ASSERT_EQ(observer.finished_calls, 1);
  EXPECT_EQ(observer.result->outcome, GroupResult::Outcome::kFailed);
}

TEST_F(WorkerGroupTest, FailureRecordNamesRankPidExitAndErrorFile) {
  group.start(launches(2));
  group.on_child_exit(1001, ExitStatus::killed(SIGSEGV));
  group.on_child_exit(1000, ExitStatus::killed(SIGTERM));  // our own stop: not a failure
  ASSERT_TRUE(observer.result);
  ASSERT_EQ(observer.result->failures.size(), 1u);
  const WorkerFailure& f = observer.result->failures[0];
  EXPECT_EQ(f.local_rank, 1);
  EXPECT_EQ(f.rank, 11);
  EXPECT_EQ(f.pid, 1001);
  EXPECT_EQ(f.exit.signal, SIGSEGV);
  EXPECT_EQ(f.hostname, "node-a");
  EXPECT_EQ(f.error_file, "/logs/attempt_0/1/error.json");
  EXPECT_EQ(f.time, format_report_time(clock.wall_now()));
  EXPECT_FALSE(timer.armed());  // cancelled once everyone exited
}

TEST_F(WorkerGroupTest, StopForwardsTheSignalToEveryWorkerGroup) {
  group.start(launches(2));
  group.stop(SIGINT);
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGINT}));
  EXPECT_EQ(launcher.signals_to(1001), (std::vector<int>{SIGINT}));
  group.on_child_exit(1000, ExitStatus::killed(SIGINT));
  group.on_child_exit(1001, ExitStatus::exited(0));
  ASSERT_TRUE(observer.result);
  EXPECT_EQ(observer.result->outcome, GroupResult::Outcome::kStopped);
  EXPECT_EQ(observer.result->stop_signal, SIGINT);
  EXPECT_TRUE(observer.result->failures.empty());
}

TEST_F(WorkerGroupTest, SecondStopEscalatesToSigkill) {
  group.start(launches(1));
  group.stop(SIGINT);
  group.stop(SIGINT);
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGINT, SIGKILL}));
}

TEST_F(WorkerGroupTest, WorkerThatCannotStartFailsTheGroupAndStopsTheOthers) {
  auto l = launches(3);
  l[1].request.executable = "/missing";
  launcher.fail_executable = "/missing";
  group.start(l);
  EXPECT_EQ(launcher.spawned.size(), 1u);  // rank 2 never started
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGTERM}));
  group.on_child_exit(1000, ExitStatus::killed(SIGTERM));
  ASSERT_TRUE(observer.result);
  ASSERT_EQ(observer.result->failures.size(), 1u);
  EXPECT_EQ(observer.result->failures[0].local_rank, 1);
  EXPECT_EQ(observer.result->failures[0].exit.code, 127);
  EXPECT_NE(observer.result->failures[0].error_message.find("/missing"), std::string::npos);
}

TEST_F(WorkerGroupTest, WorkerWhoseExecFailsFailsTheGroupAndTheOthersAreStopped) {
  launcher.exec_fails_for = 1001;
  group.start(launches(3));
  EXPECT_EQ(launcher.spawned.size(), 3u);  // all forked before any exec was confirmed
  EXPECT_EQ(observer.started, (std::vector<int>{0, 2}));
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGTERM}));
  EXPECT_EQ(launcher.signals_to(1002), (std::vector<int>{SIGTERM}));
  EXPECT_TRUE(launcher.signals_to(1001).empty());  // reaped by the launcher already
  group.on_child_exit(1000, ExitStatus::killed(SIGTERM));
  group.on_child_exit(1002, ExitStatus::killed(SIGTERM));
  ASSERT_TRUE(observer.result);
  ASSERT_EQ(observer.result->failures.size(), 1u);
  EXPECT_EQ(observer.result->failures[0].local_rank, 1);
  EXPECT_EQ(observer.result->failures[0].exit.code, 127);
}

TEST_F(WorkerGroupTest, FirstObservedFailureIsTheRootCause) {
  group.start(launches(3));
  group.on_child_exit(1002, ExitStatus::exited(7));
  group.on_child_exit(1000, ExitStatus::exited(1));  // exits during the stop: a consequence
  group.on_child_exit(1001, ExitStatus::killed(SIGTERM));
  ASSERT_TRUE(observer.result);
  ASSERT_EQ(observer.result->failures.size(), 1u);
  EXPECT_EQ(observer.result->failures[0].rank, 12);
  EXPECT_EQ(observer.finished_calls, 1);
}

// A worker's bootstrap says its script raised (worker_channel.h): the others are stopped at
// once, the failing one is left to finish its own exit, and that exit completes its record.
TEST_F(WorkerGroupTest, AWorkerThatSaysItIsFailingStopsTheOthersAndIsTheRootCause) {
  group.start(launches(3));
  EXPECT_TRUE(group.worker_failing(1001));
  EXPECT_TRUE(launcher.signals_to(1001).empty());  // on its way out by itself
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGTERM}));
  EXPECT_EQ(launcher.signals_to(1002), (std::vector<int>{SIGTERM}));
  EXPECT_TRUE(timer.armed());
  group.on_child_exit(1000, ExitStatus::killed(SIGTERM));  // the siblings end first
  group.on_child_exit(1002, ExitStatus::killed(SIGTERM));
  EXPECT_FALSE(group.finished());
  group.on_child_exit(1001, ExitStatus::exited(3));
  ASSERT_TRUE(observer.result);
  ASSERT_EQ(observer.result->outcome, GroupResult::Outcome::kFailed);
  ASSERT_EQ(observer.result->failures.size(), 1u);
  EXPECT_EQ(observer.result->failures[0].rank, 11);
  EXPECT_EQ(observer.result->failures[0].pid, 1001);
  EXPECT_EQ(observer.result->failures[0].exit.shell_code(), 3);
}

TEST_F(WorkerGroupTest, AFailingWorkerThatNeverExitsIsKilledAtTheDeadline) {
  group.start(launches(2));
  ASSERT_TRUE(group.worker_failing(1000));
  group.on_child_exit(1001, ExitStatus::killed(SIGTERM));
  timer.fire();
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGKILL}));
}

TEST_F(WorkerGroupTest, OnlyARunningWorkerOfARunningGroupCanSayItIsFailing) {
  group.start(launches(2));
  EXPECT_FALSE(group.worker_failing(4242));          // not ours
  group.on_child_exit(1000, ExitStatus::exited(1));  // a failure: the group is stopping
  EXPECT_TRUE(group.worker_failing(1001));           // ours, but no second failure
  group.on_child_exit(1001, ExitStatus::killed(SIGTERM));
  ASSERT_TRUE(observer.result);
  ASSERT_EQ(observer.result->failures.size(), 1u);
  EXPECT_EQ(observer.result->failures[0].rank, 10);
  EXPECT_FALSE(group.worker_failing(1001));  // reaped
}

TEST_F(WorkerGroupTest, ReapedWorkersAreNeverSignalledAgain) {
  group.start(launches(2));
  group.on_child_exit(1000, ExitStatus::exited(0));
  group.stop(SIGTERM);
  timer.fire();
  EXPECT_EQ(launcher.signals_to(1000), (std::vector<int>{SIGKILL}));  // only at its reaping
  EXPECT_EQ(launcher.signals_to(1001), (std::vector<int>{SIGTERM, SIGKILL}));
}

// Issue 36: a SIGKILLed worker the kernel does not let go (uninterruptible sleep) is given up
// at the kill-wait bound, so the group finishes; it is never signalled or waited for again.
TEST_F(WorkerGroupTest, AWorkerNotReapedWithinTheKillWaitIsGivenUp) {
  group.start(launches(3));
  group.on_child_exit(1000, ExitStatus::exited(1));
  EXPECT_FALSE(kill_wait_timer.armed()) << "no SIGKILL yet";
  timer.fire();  // the shutdown timeout: SIGKILL
  ASSERT_TRUE(kill_wait_timer.armed());
  EXPECT_EQ(kill_wait_timer.armed_for, Millis(30'000));
  group.on_child_exit(1001, ExitStatus::killed(SIGKILL));  // 1001 goes, 1002 does not
  clock.advance(Millis(30'000));
  kill_wait_timer.fire();
  ASSERT_EQ(observer.finished_calls, 1);
  EXPECT_EQ(observer.result->outcome, GroupResult::Outcome::kFailed);
  ASSERT_EQ(observer.result->unkillable.size(), 1u);
  EXPECT_EQ(observer.result->unkillable[0].pid, 1002);
  EXPECT_EQ(observer.result->unkillable[0].local_rank, 2);
  EXPECT_EQ(observer.result->unkillable[0].rank, 12);
  EXPECT_TRUE(group.running_pids().empty());
  EXPECT_FALSE(group.on_child_exit(1002, ExitStatus::killed(SIGKILL))) << "no longer ours";
  group.stop(SIGKILL);
  EXPECT_EQ(launcher.signals_to(1002), (std::vector<int>{SIGTERM, SIGKILL}));
}

// Each worker gets the whole bound from its own first SIGKILL: one killed for a job-control
// stop early is given up at its bound, one killed later at its own.
TEST_F(WorkerGroupTest, EachWorkerHasTheKillWaitFromItsOwnSigkill) {
  group.start(launches(2));
  group.on_child_stopped(1000, SIGTTIN);  // SIGKILL to 1000 now, SIGTERM to 1001
  EXPECT_EQ(kill_wait_timer.armed_for, Millis(30'000));
  clock.advance(Millis(5'000));
  timer.fire();  // SIGKILL to 1001 (and 1000 again: its bound still runs from the first)
  EXPECT_EQ(kill_wait_timer.armed_for, Millis(25'000));
  clock.advance(Millis(25'000));
  kill_wait_timer.fire();
  EXPECT_EQ(observer.finished_calls, 0) << "1001 still has 5 s";
  EXPECT_EQ(group.running_pids(), (std::vector<pid_t>{1001}));
  EXPECT_EQ(kill_wait_timer.armed_for, Millis(5'000));
  group.on_child_exit(1001, ExitStatus::killed(SIGKILL));
  ASSERT_EQ(observer.finished_calls, 1);
  ASSERT_EQ(observer.result->unkillable.size(), 1u);
  EXPECT_EQ(observer.result->unkillable[0].pid, 1000);
  EXPECT_FALSE(kill_wait_timer.armed());
}

}  // namespace
}  // namespace ddprun::agent
