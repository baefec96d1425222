// Workers that do not die (issue 36), on fakes only (agent_lifecycle_fixture.h): a worker the
// fake launcher never reports after its SIGKILL is what a real one stuck in the kernel looks
// like to the agent (a real unkillable process cannot be made in a test). The bound
// (--kill_wait_timeout) runs on the fake clock; /proc is a fake ProcessInspector.
#include <gtest/gtest.h>

#include <csignal>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "agent/agent_metrics.h"
#include "common/exit_codes.h"
#include "metrics/registry.h"
#include "tests/agent/agent_lifecycle_fixture.h"

namespace ddprun::agent {
namespace {

using testing::node1_of_2;
using testing::ScriptedCoordinator;

// What spdlog's default logger says while it lives.
class LogCapture {
 public:
  LogCapture()
      : previous_(spdlog::default_logger()),
        sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    auto logger = std::make_shared<spdlog::logger>("capture", sink_);
    logger->set_pattern("%l %v");
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

constexpr char kUnkillableSeries[] = "ddprun_agent_workers_unkillable_total{job_id=\"job\"}";

class AgentUnkillableLifecycleTest : public testing::AgentLifecycleTest {
 protected:
  // Two workers (pids 1000, 1001), a 60 s shutdown timeout and a 30 s kill wait; the metrics
  // observe the agent.
  void start_two_workers(ScriptedCoordinator& coordinator) {
    AgentOptions o = options(2);
    o.kill_wait_timeout = Millis(30'000);
    start(o, coordinator);
    AgentMetricsOptions metrics_options;
    metrics_options.job_id = "job";
    metrics_.emplace(registry_, metrics_options, parts_.clock);
    agent_->add_observer(*metrics_);
    coordinator.pending_join(node1_of_2(0));
    io_.poll();
    ASSERT_EQ(launcher_.spawned.size(), 2u);
  }
  // Rank 0's worker fails; rank 1's is stopped with SIGTERM, then SIGKILLed at the shutdown
  // timeout, and is not reaped.
  void fail_and_kill() {
    agent_->on_child_exit(1000, ExitStatus::exited(1));
    io_.poll();
    parts_.advance(Millis(60'000));
    io_.poll();
    ASSERT_EQ(launcher_.signals_to(1001), (std::vector<int>{SIGTERM, SIGKILL}));
  }
  double unkillable_count() {
    std::istringstream lines(registry_.render());
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(std::string(kUnkillableSeries) + " ", 0) == 0) {
        return std::stod(line.substr(sizeof kUnkillableSeries));
      }
    }
    return -1;
  }

  metrics::Registry registry_;
  std::optional<AgentMetrics> metrics_;
};

TEST_F(AgentUnkillableLifecycleTest, AWorkerStillThereAfterSigkillIsNamedAndTheNodeLeavesWith71) {
  LogCapture log;
  ScriptedCoordinator coordinator;
  parts_.inspector.processes[1001] = {"D (disk sleep)", "nfs_wait_on_request",
                                      "python -u train.py"};
  start_two_workers(coordinator);
  fail_and_kill();
  EXPECT_EQ(unkillable_count(), 0) << "the series exists from the start";

  parts_.advance(Millis(29'999));
  io_.poll();
  EXPECT_FALSE(agent_->exit_code()) << "not before the bound";
  EXPECT_TRUE(parts_.inspector.inspected.empty());

  ::testing::internal::CaptureStderr();
  parts_.advance(Millis(1));
  io_.poll();
  const std::string report = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(kExitWorkerUnkillable, 71);
  ASSERT_EQ(agent_->exit_code(), kExitWorkerUnkillable) << "the node leaves at the bound";
  const std::string named =
      "worker pid 1001 (local_rank 1) did not exit 30 s after SIGKILL: state D (disk sleep), "
      "waiting in nfs_wait_on_request, command python -u train.py";
  EXPECT_NE(report.find(named), std::string::npos) << report;
  EXPECT_NE(report.find("exitcode  : 1 (pid: 1000)"), std::string::npos)
      << "the failure that began the stop is still listed\n"
      << report;
  EXPECT_NE(log.text().find("error " + named), std::string::npos) << log.text();
  EXPECT_EQ(unkillable_count(), 1);
  EXPECT_EQ(launcher_.abandoned, (std::vector<pid_t>{1001})) << "never waited for again";
  EXPECT_EQ(launcher_.signals_to(1001), (std::vector<int>{SIGTERM, SIGKILL}));
  EXPECT_TRUE(coordinator.reports.empty()) << "no restart is asked for: the node leaves";
  EXPECT_TRUE(coordinator.closed);
  EXPECT_EQ(coordinator.exclude_reason, named) << "the leave says why (issue 36)";
  EXPECT_EQ(coordinator.offers.size(), 1u) << "no new round";
  EXPECT_EQ(parts_.store.rounds_ended, 1) << "the store's round ends with the rest";

  // Should the kernel let it go after all, its exit is only an adopted child's.
  agent_->on_child_exit(1001, ExitStatus::killed(SIGKILL));
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), kExitWorkerUnkillable);
  EXPECT_EQ(launcher_.spawned.size(), 2u) << "never restarted";
}

TEST_F(AgentUnkillableLifecycleTest, AWorkerReapedBeforeTheBoundChangesNothing) {
  ScriptedCoordinator coordinator;
  start_two_workers(coordinator);
  fail_and_kill();
  parts_.advance(Millis(29'999));
  agent_->on_child_exit(1001, ExitStatus::killed(SIGKILL));
  io_.poll();
  ASSERT_EQ(coordinator.reports.size(), 1u) << "the failure is reported as ever";
  EXPECT_EQ(coordinator.reports[0].root_cause().pid, 1000);
  EXPECT_TRUE(coordinator.reports[0].cause.empty());
  EXPECT_FALSE(parts_.kill_wait_timer.armed());
  Coordinator::FailureDecision fail;
  fail.exit_code = 1;
  coordinator.pending_failure(fail);
  io_.poll();
  EXPECT_EQ(agent_->exit_code(), 1) << "the root cause's exit code";
  parts_.advance(Millis(60'000));
  EXPECT_TRUE(parts_.inspector.inspected.empty());
  EXPECT_TRUE(launcher_.abandoned.empty());
  EXPECT_EQ(unkillable_count(), 0);
}

// Ctrl-C twice: SIGKILL at once. A worker that outlives it still ends the job at the bound, and
// the node's exit says why (71), not the signal (130).
TEST_F(AgentUnkillableLifecycleTest, AfterASecondSignalTheBoundStillEndsTheJob) {
  ScriptedCoordinator coordinator;
  start_two_workers(coordinator);
  parts_.signals.deliver(SIGINT);
  parts_.signals.deliver(SIGINT);
  io_.poll();
  EXPECT_EQ(launcher_.signals_to(1000), (std::vector<int>{SIGINT, SIGKILL}));
  agent_->on_child_exit(1000, ExitStatus::killed(SIGKILL));
  io_.poll();
  ::testing::internal::CaptureStderr();
  parts_.advance(Millis(30'000));
  io_.poll();
  const std::string report = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(agent_->exit_code(), kExitWorkerUnkillable);
  EXPECT_NE(report.find("worker pid 1001 (local_rank 1) did not exit 30 s after SIGKILL: state "
                        "unknown, wait channel unknown, command unknown"),
            std::string::npos)
      << "what /proc could not say is said so\n"
      << report;
  EXPECT_EQ(launcher_.abandoned, (std::vector<pid_t>{1001}));
  EXPECT_EQ(unkillable_count(), 1);
}

}  // namespace
}  // namespace ddprun::agent
