// The agent's service observers, driven by the real Agent on a fake launcher (no fork): the
// systemd status (ServiceStatus, to a recording notifier), the metrics of a failing health
// check (AgentMetrics), and the signals forwarded to workers without ending the job
// (SignalForwarder, with real signals raised in this process).
#include <gtest/gtest.h>

#include <csignal>
#include <sstream>
#include <string>

#include <boost/asio/executor_work_guard.hpp>

#include "agent/agent.h"
#include "agent/agent_metrics.h"
#include "agent/coordination/local_coordinator.h"
#include "agent/process/signal_forwarder.h"
#include "agent/service_status.h"
#include "common/exit_codes.h"
#include "metrics/registry.h"
#include "tests/agent/fake_agent_parts.h"
#include "tests/common/recording_notifier.h"

namespace ddprun::agent {
namespace {

using ddprun::testing::RecordingNotifier;
using testing::FakeAgentParts;

class ServiceObserversTest : public ::testing::Test {
 protected:
  AgentOptions options(int nproc) {
    AgentOptions o;
    o.command = {"/usr/bin/worker", {"worker"}, "worker"};
    o.nproc_per_node = nproc;
    o.shutdown_timeout = Millis(60'000);
    o.run_id = "job-7";
    o.hostname = "node-a";
    o.logs.log_dir = log_dir_;
    return o;
  }
  void start(AgentOptions o, Coordinator& coordinator, std::vector<AgentObserver*> observers) {
    agent_.emplace(std::move(o), io_, parts_.with(coordinator));
    for (AgentObserver* observer : observers) agent_->add_observer(*observer);
    agent_->start();
    io_.poll();
  }
  // The user signals sent to `pgid` (the agent itself also SIGKILLs a group whose leader ended,
  // for the grandchildren).
  std::vector<int> forwarded_to(pid_t pgid) const {
    std::vector<int> out;
    for (int signo : launcher_.signals_to(pgid)) {
      if (signo == SIGUSR1 || signo == SIGUSR2) out.push_back(signo);
    }
    return out;
  }
  void exit_worker(std::size_t index, ExitStatus status) {
    agent_->on_child_exit(static_cast<pid_t>(1000 + index), status);
    io_.poll();
  }

  const std::string log_dir_ = "/nonexistent/logs";  // FakeRunLogFiles creates nothing
  boost::asio::io_context io_;
  // poll() would stop the loop once nothing is pending (no real signal wait keeps it busy).
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> busy_ =
      boost::asio::make_work_guard(io_);
  FakeAgentParts parts_;
  testing::FakeProcessLauncher& launcher_ = parts_.launcher;
  std::optional<Agent> agent_;
};

TEST_F(ServiceObserversTest, ReadyOnceWorkersRunStatusOnEveryChangeStoppingLast) {
  RecordingNotifier notifier;
  ServiceStatus status(io_, notifier, "job-7");
  LocalCoordinator coordinator(io_, {.max_restarts = 2});
  start(options(2), coordinator, {&status});
  ASSERT_EQ(launcher_.spawned.size(), 2u);
  exit_worker(1, ExitStatus::exited(3));  // rank 1 fails; rank 0 is stopped
  exit_worker(0, ExitStatus::killed(SIGTERM));
  ASSERT_EQ(launcher_.spawned.size(), 4u);  // restarted
  exit_worker(2, ExitStatus::exited(0));
  exit_worker(3, ExitStatus::exited(0));
  ASSERT_EQ(agent_->exit_code(), 0);

  const std::string place = "round 0, world size 2 (1 node, this is node 0 with 2 workers)";
  const std::vector<std::string> expected{
      "STATUS=job job-7: joining the first round",
      "READY=1\nSTATUS=job job-7: running; " + place + "; restarts 0/2",
      "STATUS=job job-7: stopping workers; " + place + "; restarts 0/2; rank 1 exited with code 3",
      "STATUS=job job-7: restarting; " + place + "; restarts 1/2; rank 1 exited with code 3",
      "STATUS=job job-7: running; round 1, world size 2 (1 node, this is node 0 with 2 "
      "workers); restarts 1/2",
      "STATUS=job job-7: stopping workers; round 1, world size 2 (1 node, this is node 0 with 2 "
      "workers); restarts 1/2; every worker exited 0",
      "STATUS=job job-7: finished (exit code 0); round 1, world size 2 (1 node, this is node 0 "
      "with 2 workers); restarts 1/2; every worker exited 0",
      "STOPPING=1",
  };
  EXPECT_EQ(notifier.without_pings(), expected);
}

TEST_F(ServiceObserversTest, AFailedJobSaysSoAndStillEndsWithStopping) {
  RecordingNotifier notifier;
  ServiceStatus status(io_, notifier, "j");
  LocalCoordinator coordinator(io_, {});
  start(options(1), coordinator, {&status});
  exit_worker(0, ExitStatus::killed(SIGSEGV));
  ASSERT_EQ(agent_->exit_code(), 128 + SIGSEGV);
  const auto messages = notifier.without_pings();
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.back(), "STOPPING=1");
  EXPECT_NE(messages[messages.size() - 2].find("failed (exit code 139)"), std::string::npos)
      << messages[messages.size() - 2];
  EXPECT_NE(messages[messages.size() - 2].find("rank 0 was killed by SIGSEGV"), std::string::npos)
      << messages[messages.size() - 2];
  EXPECT_TRUE(status.ready_sent());
}

TEST_F(ServiceObserversTest, NoReadyWhenTheJobEndsBeforeItsWorkersRun) {
  RecordingNotifier notifier;
  ServiceStatus status(io_, notifier, "j");
  LocalCoordinator coordinator(io_, {});
  launcher_.fail_executable = "/usr/bin/worker";  // the first group cannot start
  start(options(1), coordinator, {&status});
  ASSERT_TRUE(agent_->exit_code());
  EXPECT_FALSE(status.ready_sent());
  EXPECT_EQ(notifier.without_pings().back(), "STOPPING=1");
}

// The value of the sample `series` (name and labels as rendered) in `text`; -1 when absent.
double sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// --health_check_interval: the check fails while the workers run. What systemd and Prometheus
// show is the check's own notice, the moment it fails, while the workers are still being
// stopped (the node's leaving, which says the same, comes only once they have exited).
TEST_F(ServiceObserversTest, AHealthCheckFailingWhileWorkersRunShowsInStatusAndMetrics) {
  RecordingNotifier notifier;
  ServiceStatus status(io_, notifier, "job-7");
  metrics::Registry registry;
  AgentMetrics metrics(registry, AgentMetricsOptions{"job-7", {}, {}}, parts_.clock);
  const std::string failures = "ddprun_agent_health_check_failures_total{job_id=\"job-7\"}";
  const std::string left =
      "ddprun_agent_node_exclusions_total{job_id=\"job-7\",reason=\"health_check\"}";
  LocalCoordinator coordinator(io_, {});
  AgentOptions o = options(1);
  o.health_check.command = "check-gpus";
  o.health_check.interval = Millis(60'000);
  start(o, coordinator, {&status, &metrics});
  ASSERT_EQ(launcher_.spawned.size(), 1u);  // the check before the round
  exit_worker(0, ExitStatus::exited(0));
  ASSERT_EQ(launcher_.spawned.size(), 2u);  // passed: the worker (pid 1001) runs
  EXPECT_TRUE(status.ready_sent());
  EXPECT_EQ(sample(registry.render(), failures), 0) << "a passing check is no failure";

  parts_.advance(Millis(60'000));
  io_.poll();
  ASSERT_EQ(launcher_.spawned.size(), 3u);  // the check again (pid 1002)
  const std::size_t before = notifier.without_pings().size();
  exit_worker(2, ExitStatus::exited(1));
  ASSERT_FALSE(agent_->exit_code()) << "the worker has not exited yet";
  const auto messages = notifier.without_pings();
  ASSERT_GT(messages.size(), before) << "nothing published when the check failed";
  EXPECT_EQ(messages.back().rfind("STATUS=job job-7: ", 0), 0u) << messages.back();
  EXPECT_NE(messages.back().find("this node failed its health check: it exited with status 1"),
            std::string::npos)
      << messages.back();
  const std::string text = registry.render();
  EXPECT_EQ(sample(text, failures), 1) << text;
  EXPECT_EQ(sample(text, left), -1) << "not left yet: the worker is still stopping";

  exit_worker(1, ExitStatus::killed(SIGTERM));
  ASSERT_EQ(agent_->exit_code(), kExitUnhealthy);
  EXPECT_EQ(sample(registry.render(), failures), 1) << "counted once";
  EXPECT_EQ(sample(registry.render(), left), 1);
  EXPECT_EQ(notifier.without_pings().back(), "STOPPING=1");
}

TEST_F(ServiceObserversTest, WatchdogPingsStopBeforeStopping) {
  RecordingNotifier notifier(std::chrono::microseconds(2000));
  ServiceStatus status(io_, notifier, "j");
  EXPECT_EQ(notifier.pings(), 1);  // from construction on: the loop is alive while joining
  LocalCoordinator coordinator(io_, {});
  start(options(1), coordinator, {&status});
  exit_worker(0, ExitStatus::exited(0));
  ASSERT_EQ(agent_->exit_code(), 0);
  ASSERT_EQ(notifier.messages.back(), "STOPPING=1");
  io_.restart();
  io_.run_for(std::chrono::milliseconds(20));  // ten intervals: no ping after STOPPING=1
  EXPECT_EQ(notifier.messages.back(), "STOPPING=1");
}

TEST_F(ServiceObserversTest, ProgressShowsWhileWorkersRunAndIsResentOnlyWhenItChanged) {
  RecordingNotifier notifier;
  ServiceStatus status(io_, notifier, "j");
  std::vector<RankProgress> ranks(2);
  ranks[0].rank = 4;
  ranks[1].rank = 5;
  ranks[0].last_step = 10;
  ranks[1].last_step = 11;
  int queries = 0;
  status.set_progress_query([&] {
    ++queries;
    return ranks;
  });
  RoundAssignment round;
  round.world_size = 8;
  round.group_world_size = 4;
  round.group_rank = 2;
  round.rank_offset = 4;
  status.on_round_assigned(round, Millis(0));
  status.on_workers_started(round, 2, std::nullopt);
  ASSERT_EQ(notifier.messages.size(), 1u);
  EXPECT_NE(notifier.messages[0].find("; steps 10-11, oldest heartbeat < 1 s"), std::string::npos)
      << notifier.messages[0];

  // The timer looks again; nothing changed: nothing is sent.
  auto wait_for_query = [&](int count) {
    for (int i = 0; i < 500 && queries < count; ++i) io_.run_one_for(std::chrono::milliseconds(10));
    return queries >= count;  // bounded: 5 s at most
  };
  ASSERT_TRUE(wait_for_query(2));
  EXPECT_EQ(notifier.messages.size(), 1u);
  // Rank 4 fell silent: the next look sends it, with the rank.
  ranks[0].heartbeat_age = Millis(2'500);
  ASSERT_TRUE(wait_for_query(3));
  ASSERT_EQ(notifier.messages.size(), 2u);
  EXPECT_NE(notifier.messages[1].find("running; round 0, world size 8 (4 nodes, this is node 2 "
                                      "with 2 workers); restarts 0/0; steps 10-11, oldest "
                                      "heartbeat 2.5 s (rank 4)"),
            std::string::npos)
      << notifier.messages[1];

  // Once the workers stop, the line no longer shows progress and the query is left alone.
  GroupResult finished;
  finished.outcome = GroupResult::Outcome::kSucceeded;
  status.on_group_finished(finished);
  EXPECT_EQ(notifier.messages.back().find("steps"), std::string::npos) << notifier.messages.back();
  status.on_job_finished(0);
  EXPECT_EQ(notifier.messages.back(), "STOPPING=1");
  const int asked = queries;
  io_.restart();
  io_.run_for(std::chrono::milliseconds(50));
  EXPECT_EQ(queries, asked);
}

TEST_F(ServiceObserversTest, StragglersShowWhileWorkersRunUntilNoneIsNamed) {
  RecordingNotifier notifier;
  ServiceStatus status(io_, notifier, "j");
  RoundAssignment round;
  round.world_size = 4;
  round.group_world_size = 2;
  status.on_round_assigned(round, Millis(0));
  status.on_workers_started(round, 2, std::nullopt);
  const size_t before = notifier.messages.size();
  status.on_stragglers({1500, 4, 200'000, {{3, 1, "127.0.0.2", 420'000}}});
  ASSERT_EQ(notifier.messages.size(), before + 1);
  EXPECT_NE(notifier.messages.back().find(
                "; straggler: rank 3 (node 127.0.0.2) 2.1x the median busy time of 200 ms"),
            std::string::npos)
      << notifier.messages.back();
  status.on_stragglers({1500, 4, 200'000, {{3, 1, "127.0.0.2", 430'000}}});  // same line
  EXPECT_EQ(notifier.messages.size(), before + 1);
  status.on_stragglers({1500, 4, 200'000, {}});
  EXPECT_EQ(notifier.messages.back().find("straggler"), std::string::npos)
      << notifier.messages.back();
}

TEST(DescribeStragglers, ManyAreShortenedToTheFirstFew) {
  rdzv::StragglerFinding f{1500, 64, 100'000, {}};
  for (uint32_t r = 0; r < 6; ++r) f.stragglers.push_back({r, 0, "n" + std::to_string(r), 200'000});
  EXPECT_EQ(describe_stragglers(f),
            "stragglers: rank 0 (node n0) 2.0x, rank 1 (node n1) 2.0x, rank 2 (node n2) 2.0x, "
            "rank 3 (node n3) 2.0x and 2 more the median busy time of 100 ms");
  EXPECT_EQ(describe_stragglers({1500, 64, 100'000, {}}), "");
}

TEST_F(ServiceObserversTest, ForwardsToRunningWorkerGroupsAndTheJobGoesOn) {
  SignalForwarder forwarder(io_, launcher_, {SIGUSR1, SIGUSR2});
  LocalCoordinator coordinator(io_, {});
  start(options(2), coordinator, {&forwarder});
  ASSERT_EQ(forwarder.running(), (std::set<pid_t>{1000, 1001}));
  ASSERT_EQ(::raise(SIGUSR1), 0);  // caught by the forwarder's signal_set on the loop
  for (int i = 0; i < 1000 && forwarder.forwarded() == 0; ++i) {
    io_.run_one_for(std::chrono::milliseconds(10));  // bounded: 10 s at most
  }
  ASSERT_EQ(forwarder.forwarded(), 1);
  EXPECT_EQ(forwarded_to(1000), (std::vector<int>{SIGUSR1}));
  EXPECT_EQ(forwarded_to(1001), (std::vector<int>{SIGUSR1}));
  EXPECT_FALSE(agent_->exit_code());  // unlike a handled signal, the job goes on

  exit_worker(1, ExitStatus::exited(0));  // rank 1 finished: its group is not signalled again
  EXPECT_EQ(forwarder.running(), (std::set<pid_t>{1000}));
  forwarder.forward(SIGUSR2);
  EXPECT_EQ(forwarded_to(1000), (std::vector<int>{SIGUSR1, SIGUSR2}));
  EXPECT_EQ(forwarded_to(1001), (std::vector<int>{SIGUSR1}));
  exit_worker(0, ExitStatus::exited(0));
  EXPECT_EQ(agent_->exit_code(), 0);
  EXPECT_TRUE(forwarder.running().empty());
}

TEST_F(ServiceObserversTest, NothingIsForwardedWhileNoWorkerRuns) {
  SignalForwarder forwarder(io_, launcher_, {SIGUSR1});
  forwarder.forward(SIGUSR1);  // before the first group
  EXPECT_EQ(forwarder.forwarded(), 0);
  EXPECT_TRUE(launcher_.signals.empty());
  LocalCoordinator coordinator(io_, {});
  start(options(1), coordinator, {&forwarder});
  exit_worker(0, ExitStatus::exited(0));
  ASSERT_EQ(agent_->exit_code(), 0);
  forwarder.forward(SIGUSR1);  // after the job: nothing to signal
  EXPECT_TRUE(forwarded_to(1000).empty());
}

TEST_F(ServiceObserversTest, AStoppedWorkerStillReceivesForwardedSignals) {
  SignalForwarder forwarder(io_, launcher_, {SIGUSR1});
  forwarder.on_worker_started(0, 4242);
  forwarder.on_worker_exited(0, 4242, ExitStatus::stopped_by(SIGTSTP));  // not ended
  EXPECT_EQ(forwarder.running(), (std::set<pid_t>{4242}));
  forwarder.on_worker_exited(0, 4242, ExitStatus::killed(SIGKILL));
  EXPECT_TRUE(forwarder.running().empty());
}

}  // namespace
}  // namespace ddprun::agent
