// The agent's metrics observed through a real Agent on a fake launcher (no fork, no sleeps):
// worker starts and exits by reason, group restarts by reason, failure → restart durations on
// a fake clock, gauges, the agent's state and /healthz, and the job's store counted across
// rounds (each round has a new store).
#include "agent/agent_metrics.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <boost/asio/ip/tcp.hpp>

#include "agent/agent.h"
#include "agent/coordination/local_coordinator.h"
#include "tests/agent/fake_process_launcher.h"
#include "tests/support/temp_dir.h"

namespace ddprun::agent {
namespace {

using testing::FakeProcessLauncher;

std::string env_of(const SpawnRequest& r, const std::string& key) {
  for (const auto& kv : r.envp) {
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  }
  return "";
}

// The value of the sample `series` (name and labels exactly as rendered) in `text`; -1 when
// it is not there.
double sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

class AgentMetricsTest : public ::testing::Test {
 protected:
  ddprun::testing::TempDir temp_;  // tests/support
  void SetUp() override { log_dir_ = temp_.path(); }

  void start(int nproc, Coordinator& coordinator) {
    AgentOptions o;
    o.command = {"/usr/bin/worker", {"worker"}, "worker"};
    o.nproc_per_node = nproc;
    o.shutdown_timeout = Millis(60'000);
    o.run_id = "j1";
    o.logs.log_dir = log_dir_;
    // The real parts: the metrics count a real store's connections.
    parts_.emplace(io_, o, clock_, EnvMap{{"PATH", "/usr/bin:/bin"}});
    agent_.emplace(std::move(o), io_, parts_->with(launcher_, coordinator));
    metrics_.emplace(registry_,
                     AgentMetricsOptions{"j1", [this] { return agent_->store_host().server(); }},
                     clock_);
    agent_->add_observer(*metrics_);
    agent_->start();
    io_.poll();
  }
  void exit_all_from(std::size_t first, ExitStatus status) {
    for (std::size_t i = first; i < launcher_.spawned.size(); ++i) {
      agent_->on_child_exit(static_cast<pid_t>(1000 + i), status);
    }
    io_.poll();
  }
  double value(const std::string& series) { return sample(registry_.render(), series); }

  std::string log_dir_;
  boost::asio::io_context io_;
  FakeProcessLauncher launcher_;
  FakeClock clock_;
  metrics::Registry registry_;
  std::optional<SystemAgentParts> parts_;
  std::optional<Agent> agent_;
  std::optional<AgentMetrics> metrics_;
};

TEST_F(AgentMetricsTest, RestartedJobCountsStartsExitsRestartsAndTheRestartDuration) {
  LocalCoordinator coordinator(io_, {.max_restarts = 1});
  start(2, coordinator);
  EXPECT_EQ(value("ddprun_agent_workers_running{job_id=\"j1\"}"), 2);
  EXPECT_EQ(value("ddprun_agent_state{job_id=\"j1\",state=\"running\"}"), 1);
  EXPECT_TRUE(metrics_->health().ok());

  agent_->on_child_exit(1001, ExitStatus::exited(3));
  EXPECT_EQ(value("ddprun_agent_state{job_id=\"j1\",state=\"stopping\"}"), 1);
  EXPECT_EQ(value("ddprun_agent_state{job_id=\"j1\",state=\"running\"}"), 0);
  EXPECT_TRUE(metrics_->health().ok()) << "restarting is not unhealthy";
  clock_.advance(std::chrono::milliseconds(40));  // failure → restarted group: 40 ms
  agent_->on_child_exit(1000, ExitStatus::killed(SIGTERM));
  io_.poll();
  ASSERT_EQ(launcher_.spawned.size(), 4u);

  EXPECT_EQ(value("ddprun_agent_worker_starts_total{job_id=\"j1\"}"), 4);
  EXPECT_EQ(value("ddprun_agent_worker_exits_total{job_id=\"j1\",reason=\"failure\",signal=\"\"}"),
            1);
  EXPECT_EQ(
      value("ddprun_agent_worker_exits_total{job_id=\"j1\",reason=\"signal\",signal=\"SIGTERM\"}"),
      1);
  EXPECT_EQ(value("ddprun_agent_group_restarts_total{job_id=\"j1\",reason=\"worker_failure\"}"), 1);
  EXPECT_EQ(value("ddprun_agent_group_restarts_total{job_id=\"j1\",reason=\"membership_change\"}"),
            0);
  EXPECT_EQ(value("ddprun_agent_restart_duration_seconds_count{job_id=\"j1\"}"), 1);
  EXPECT_DOUBLE_EQ(value("ddprun_agent_restart_duration_seconds_sum{job_id=\"j1\"}"), 0.04);
  EXPECT_EQ(value("ddprun_agent_restart_duration_seconds_bucket{job_id=\"j1\",le=\"0.025\"}"), 0);
  EXPECT_EQ(value("ddprun_agent_restart_duration_seconds_bucket{job_id=\"j1\",le=\"0.05\"}"), 1);
  EXPECT_EQ(value("ddprun_agent_rendezvous_rounds_total{job_id=\"j1\"}"), 2);
  EXPECT_EQ(value("ddprun_agent_rendezvous_join_seconds_count{job_id=\"j1\"}"), 2);
  EXPECT_EQ(value("ddprun_agent_job_restarts{job_id=\"j1\"}"), 1);
  EXPECT_EQ(value("ddprun_agent_job_max_restarts{job_id=\"j1\"}"), 1);
  EXPECT_EQ(value("ddprun_agent_workers_running{job_id=\"j1\"}"), 2);
  EXPECT_EQ(value("ddprun_agent_world_size{job_id=\"j1\"}"), 2);

  exit_all_from(2, ExitStatus::exited(0));
  ASSERT_EQ(agent_->exit_code(), 0);
  EXPECT_EQ(value("ddprun_agent_worker_exits_total{job_id=\"j1\",reason=\"success\",signal=\"\"}"),
            2);
  EXPECT_EQ(value("ddprun_agent_workers_running{job_id=\"j1\"}"), 0);
  EXPECT_EQ(value("ddprun_agent_state{job_id=\"j1\",state=\"succeeded\"}"), 1);
  const Status health = metrics_->health();
  EXPECT_FALSE(health.ok());
  EXPECT_NE(health.message().find("succeeded"), std::string::npos) << health.message();
}

TEST_F(AgentMetricsTest, FailedJobIsUnhealthyWithItsExitCode) {
  LocalCoordinator coordinator(io_, {});
  start(1, coordinator);
  exit_all_from(0, ExitStatus::exited(7));
  ASSERT_EQ(agent_->exit_code(), 7);
  EXPECT_EQ(value("ddprun_agent_state{job_id=\"j1\",state=\"failed\"}"), 1);
  const Status health = metrics_->health();
  ASSERT_FALSE(health.ok());
  EXPECT_NE(health.message().find("failed (exit code 7)"), std::string::npos) << health.message();
}

TEST_F(AgentMetricsTest, JobControlStopCountsOnceAsStopped) {
  LocalCoordinator coordinator(io_, {});
  start(2, coordinator);
  agent_->on_child_exit(1000, ExitStatus::stopped_by(SIGTTIN));  // a failure: the group stops
  agent_->on_child_exit(1000, ExitStatus::killed(SIGKILL));      // the agent's SIGKILL
  agent_->on_child_exit(1001, ExitStatus::killed(SIGTERM));
  io_.poll();
  EXPECT_EQ(
      value("ddprun_agent_worker_exits_total{job_id=\"j1\",reason=\"stopped\",signal=\"SIGTTIN\"}"),
      1);
  EXPECT_EQ(
      value("ddprun_agent_worker_exits_total{job_id=\"j1\",reason=\"signal\",signal=\"SIGKILL\"}"),
      -1)
      << "the stopped worker's end must not count twice";
  EXPECT_EQ(value("ddprun_agent_workers_running{job_id=\"j1\"}"), 0);
}

// A coordinator whose rounds the test hands out.
class MetricsCoordinator final : public Coordinator {
 public:
  void join(const JoinOffer&, std::function<void(Result<RoundAssignment>)> done) override {
    pending_join = std::move(done);
  }
  void report_failure(const FailureReport&, std::function<void(FailureDecision)> done) override {
    pending_failure = std::move(done);
  }
  void report_success(std::function<void(Status)> done) override {
    pending_success = std::move(done);
  }
  void set_event_handler(std::function<void(const CoordinatorEvent&)> h) override {
    handler = std::move(h);
  }
  void close() override {}

  std::function<void(Result<RoundAssignment>)> pending_join;
  std::function<void(FailureDecision)> pending_failure;
  std::function<void(Status)> pending_success;
  std::function<void(const CoordinatorEvent&)> handler;
};

RoundAssignment round_of(int round, int nodes, int restart_count) {
  RoundAssignment a;
  a.round = round;
  a.group_rank = 1;
  a.group_world_size = nodes;
  a.rank_offset = 1;
  a.world_size = nodes;
  a.master_addr = "127.0.0.9";
  a.master_port = 4242;
  a.restart_count = restart_count;
  a.max_restarts = 3;
  return a;
}

TEST_F(AgentMetricsTest, RestartsElsewhereAndMembershipChangesAreToldApart) {
  MetricsCoordinator coordinator;
  start(1, coordinator);
  EXPECT_EQ(value("ddprun_agent_state{job_id=\"j1\",state=\"joining\"}"), 1);
  EXPECT_TRUE(metrics_->health().ok()) << "waiting for a round is starting";
  clock_.advance(std::chrono::seconds(2));  // the join takes 2 s
  coordinator.pending_join(round_of(0, 2, 0));
  io_.poll();
  EXPECT_DOUBLE_EQ(value("ddprun_agent_rendezvous_join_seconds_sum{job_id=\"j1\"}"), 2.0);
  EXPECT_EQ(value("ddprun_agent_nodes{job_id=\"j1\"}"), 2);
  EXPECT_EQ(value("ddprun_agent_group_rank{job_id=\"j1\"}"), 1);

  // A node joins: scale-up, not a restart of the job's budget.
  coordinator.handler({CoordinatorEvent::Kind::kRejoin, "scale-up", {}, 1});
  exit_all_from(0, ExitStatus::killed(SIGTERM));
  coordinator.pending_join(round_of(1, 3, 0));
  io_.poll();
  EXPECT_EQ(value("ddprun_agent_group_restarts_total{job_id=\"j1\",reason=\"membership_change\"}"),
            1);
  EXPECT_EQ(value("ddprun_agent_nodes{job_id=\"j1\"}"), 3);
  EXPECT_EQ(value("ddprun_agent_round{job_id=\"j1\"}"), 1);

  // Another node's worker failed: the server counted a restart; this node restarts too.
  coordinator.handler({CoordinatorEvent::Kind::kRejoin, "workers failed elsewhere", {}, 1});
  exit_all_from(1, ExitStatus::killed(SIGTERM));
  coordinator.pending_join(round_of(2, 3, 1));
  io_.poll();
  EXPECT_EQ(value("ddprun_agent_group_restarts_total{job_id=\"j1\",reason=\"worker_failure\"}"), 1);
  EXPECT_EQ(value("ddprun_agent_group_restarts_total{job_id=\"j1\",reason=\"membership_change\"}"),
            1);
  EXPECT_EQ(value("ddprun_agent_restart_duration_seconds_count{job_id=\"j1\"}"), 0)
      << "no failure on this node";
}

TEST_F(AgentMetricsTest, StoreCountsAddUpAcrossRoundsWhileEachRoundHasANewStore) {
  LocalCoordinator coordinator(io_, {.max_restarts = 1});
  start(1, coordinator);
  EXPECT_EQ(value("ddprun_store_hosted{job_id=\"j1\"}"), 1);
  // A client of the first round's store: one accepted connection.
  const int port = std::stoi(env_of(launcher_.spawned[0], "MASTER_PORT"));
  boost::asio::ip::tcp::socket client(io_);
  client.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)});
  for (int i = 0; i < 1000 && value("ddprun_store_connections{job_id=\"j1\"}") != 1; ++i) {
    io_.run_one_for(std::chrono::milliseconds(10));  // the store accepts on the loop
  }
  EXPECT_EQ(value("ddprun_store_connections{job_id=\"j1\"}"), 1);
  EXPECT_EQ(value("ddprun_store_connections_accepted_total{job_id=\"j1\"}"), 1);

  exit_all_from(0, ExitStatus::exited(1));  // restart: the first store closes, a new one opens
  ASSERT_EQ(launcher_.spawned.size(), 2u);
  EXPECT_NE(std::stoi(env_of(launcher_.spawned[1], "MASTER_PORT")), port);
  EXPECT_EQ(value("ddprun_store_connections{job_id=\"j1\"}"), 0);
  EXPECT_EQ(value("ddprun_store_connections_accepted_total{job_id=\"j1\"}"), 1)
      << "the closed store's count is kept";
  EXPECT_EQ(value("ddprun_store_operations_total{job_id=\"j1\",op=\"set\"}"), 0);
}

// The ranks' progress as the callback gives it at each scrape: a step only once reported, an
// age only once a heartbeat came; no worker families at all without the callback.
TEST(AgentProgressMetricsTest, EachRanksStepAndAgeAppearWithWhatItReported) {
  FakeClock clock;
  std::vector<RankProgress> progress(3);
  progress[0] = {4, "n", 0, 17, Millis(1500), true};
  progress[1] = {5, "n", 1, std::nullopt, Millis(250), true};    // heartbeats without a step
  progress[2] = {6, "n", 2, std::nullopt, Millis(9000), false};  // nothing yet
  metrics::Registry registry;
  AgentMetricsOptions options;
  options.job_id = "j1";
  options.progress = [&progress] { return progress; };
  AgentMetrics metrics(registry, options, clock);
  std::string text = registry.render();
  const std::string r0 = "{job_id=\"j1\",local_rank=\"0\",rank=\"4\"}";
  const std::string r1 = "{job_id=\"j1\",local_rank=\"1\",rank=\"5\"}";
  const std::string r2 = "{job_id=\"j1\",local_rank=\"2\",rank=\"6\"}";
  EXPECT_EQ(sample(text, "ddprun_worker_last_step" + r0), 17);
  EXPECT_EQ(sample(text, "ddprun_worker_heartbeat_age_seconds" + r0), 1.5);
  EXPECT_EQ(sample(text, "ddprun_worker_last_step" + r1), -1) << text;  // absent
  EXPECT_EQ(sample(text, "ddprun_worker_heartbeat_age_seconds" + r1), 0.25);
  EXPECT_EQ(text.find("rank=\"6\""), std::string::npos) << text;
  // Read again at the next scrape: a new step shows.
  progress[0].last_step = 18;
  EXPECT_EQ(sample(registry.render(), "ddprun_worker_last_step" + r0), 18);

  metrics::Registry without;
  AgentMetrics no_progress(without, AgentMetricsOptions{"j1", {}, {}}, clock);
  EXPECT_EQ(without.render().find("ddprun_worker_"), std::string::npos);
}

// Stragglers: each rank's busy time from its heartbeats, whether the job's last finding named
// it, and the job-wide count and median (the same on every node).
TEST(AgentProgressMetricsTest, BusyTimesAndStragglersPerRankAndForTheJob) {
  FakeClock clock;
  std::vector<RankProgress> progress(3);
  progress[0] = {2, "n", 0, 17, Millis(10), true};
  progress[0].busy = std::chrono::microseconds(50'000);
  progress[1] = {3, "n", 1, 17, Millis(10), true};
  progress[1].busy = std::chrono::microseconds(210'000);
  progress[2] = {4, "n", 2, 17, Millis(10), true};  // reports no busy time
  metrics::Registry registry;
  AgentMetricsOptions options;
  options.job_id = "j1";
  options.progress = [&progress] { return progress; };
  AgentMetrics metrics(registry, options, clock);
  const std::string r0 = "{job_id=\"j1\",local_rank=\"0\",rank=\"2\"}";
  const std::string r1 = "{job_id=\"j1\",local_rank=\"1\",rank=\"3\"}";
  const std::string r2 = "{job_id=\"j1\",local_rank=\"2\",rank=\"4\"}";
  std::string text = registry.render();
  EXPECT_EQ(sample(text, "ddprun_worker_step_busy_seconds" + r0), 0.05) << text;
  EXPECT_EQ(sample(text, "ddprun_worker_step_busy_seconds" + r1), 0.21);
  EXPECT_EQ(sample(text, "ddprun_worker_step_busy_seconds" + r2), -1);  // absent
  // Nothing judged yet: no straggler families.
  EXPECT_EQ(text.find("straggler"), std::string::npos) << text;

  metrics.on_stragglers({1500, 8, 50'000, {{3, 1, "n", 210'000}, {9, 1, "m", 300'000}}});
  text = registry.render();
  EXPECT_EQ(sample(text, "ddprun_worker_straggler" + r0), 0) << text;
  EXPECT_EQ(sample(text, "ddprun_worker_straggler" + r1), 1);
  EXPECT_EQ(sample(text, "ddprun_worker_straggler" + r2), -1);  // not measured: not judged
  EXPECT_EQ(sample(text, "ddprun_job_stragglers{job_id=\"j1\"}"), 2);
  EXPECT_EQ(sample(text, "ddprun_job_step_busy_median_seconds{job_id=\"j1\"}"), 0.05);

  metrics.on_stragglers({1500, 8, 60'000, {}});  // rank 3 caught up
  text = registry.render();
  EXPECT_EQ(sample(text, "ddprun_worker_straggler" + r1), 0);
  EXPECT_EQ(sample(text, "ddprun_job_stragglers{job_id=\"j1\"}"), 0);
}

// Issue 38: each run of the built-in node checks counts each kind's outcome.
TEST_F(AgentMetricsTest, BuiltinNodeChecksAreCountedByCheckAndOutcome) {
  LocalCoordinator coordinator(io_, {});
  start(1, coordinator);
  metrics_->on_node_checks({{"gpu", {"GPU 0: fallen off the bus"}}, {"path", {}}});
  metrics_->on_node_checks({{"gpu", {}}, {"path", {}}});
  const auto series = [](const char* check, const char* outcome) {
    return fmt::format(
        "ddprun_agent_node_checks_total{{job_id=\"j1\",check=\"{}\",outcome=\"{}\"}}", check,
        outcome);
  };
  EXPECT_EQ(value(series("gpu", "fail")), 1);
  EXPECT_EQ(value(series("gpu", "pass")), 1);
  EXPECT_EQ(value(series("path", "pass")), 2);
  EXPECT_EQ(value(series("nic", "pass")), -1) << "a check not asked for is not a series";
}

}  // namespace
}  // namespace ddprun::agent
