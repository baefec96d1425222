// What the agent's lifecycle tests share: a fixture that builds a real Agent over the fakes of
// fake_agent_parts.h, and a coordinator the test answers by hand. Child exits, signals, hang
// verdicts and health-check exits are fed by hand, timers run on the parts' fake clock, and the
// Asio loop only runs what is already due (poll()): no fork, no port, no file, no sleep.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "agent/agent.h"
#include "tests/agent/fake_agent_parts.h"

namespace ddprun::agent::testing {

// The value of `key` in a spawn's environment; "<unset>" when it has none.
inline std::string spawned_env(const SpawnRequest& r, const std::string& key) {
  for (const auto& kv : r.envp) {
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  }
  return "<unset>";
}

class AgentLifecycleTest : public ::testing::Test {
 protected:
  AgentOptions options(int nproc) {
    AgentOptions o;
    o.command = {"/usr/bin/worker", {"worker", "--lr", "1"}, "worker"};
    o.nproc_per_node = nproc;
    o.shutdown_timeout = Millis(60'000);
    o.run_id = "job";
    o.hostname = "node-a";
    o.logs.log_dir = log_dir_;
    return o;
  }

  // Builds the agent over `coordinator` and starts the first round.
  Agent& start(AgentOptions o, Coordinator& coordinator) {
    agent_.emplace(std::move(o), io_, parts_.with(coordinator));
    agent_->start();
    io_.poll();
    return *agent_;
  }
  // Feeds exits for the workers spawned from index `first` on, then runs what became due.
  // Every spawn (a worker or a health check) gets pid 1000 + its index.
  void exit_all_from(std::size_t first, ExitStatus status) {
    for (std::size_t i = first; i < launcher_.spawned.size(); ++i) {
      agent_->on_child_exit(static_cast<pid_t>(1000 + i), status);
    }
    io_.poll();
  }

  const std::string log_dir_ = "/nonexistent/logs";  // FakeRunLogFiles creates nothing
  boost::asio::io_context io_;
  // poll() would stop the loop once nothing is pending (no real signal wait keeps it busy).
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> busy_ =
      boost::asio::make_work_guard(io_);
  FakeAgentParts parts_;
  FakeProcessLauncher& launcher_ = parts_.launcher;
  std::optional<Agent> agent_;
};

// A coordinator that records calls and answers only when the test says so; job_progress() is
// answered at once with `job`, as a multi-node rendezvous would (shares_progress()).
class ScriptedCoordinator final : public Coordinator {
 public:
  void join(const JoinOffer& offer, std::function<void(Result<RoundAssignment>)> done) override {
    offers.push_back(offer);
    pending_join = std::move(done);
  }
  void report_failure(const FailureReport& report,
                      std::function<void(FailureDecision)> done) override {
    reports.push_back(report);
    pending_failure = std::move(done);
  }
  void report_success(std::function<void(Status)> done) override {
    pending_success = std::move(done);
  }
  void set_event_handler(std::function<void(const CoordinatorEvent&)> h) override {
    handler = std::move(h);
  }
  bool shares_progress() const override { return shares; }
  void share_progress(const std::vector<RankProgress>& ranks, uint32_t, StragglerHandler) override {
    shared.push_back(ranks);
  }
  void job_progress(std::function<void(Result<std::vector<RankProgress>>)> done) override {
    ++job_queries;
    done(job);
  }
  void close() override { closed = true; }
  void close_excluded(const std::string& reason) override {
    exclude_reason = reason;
    closed = true;
  }

  std::vector<JoinOffer> offers;
  std::vector<FailureReport> reports;
  std::function<void(Result<RoundAssignment>)> pending_join;
  std::function<void(FailureDecision)> pending_failure;
  std::function<void(Status)> pending_success;
  std::function<void(const CoordinatorEvent&)> handler;
  bool closed = false;
  std::string exclude_reason;  // what close_excluded() said; empty: a plain close
  bool shares = false;         // a multi-node job's coordinator
  std::vector<std::vector<RankProgress>> shared;  // each share_progress(), in order
  std::vector<RankProgress> job;                  // what job_progress() answers
  int job_queries = 0;
};

// Node 1 of 2, two ranks each: this node holds global ranks 2 and 3.
inline RoundAssignment node1_of_2(int restart_count, int max_restarts = 3) {
  RoundAssignment a;
  a.max_restarts = max_restarts;
  a.group_rank = 1;
  a.group_world_size = 2;
  a.rank_offset = 2;
  a.world_size = 4;
  a.master_addr = "127.0.0.9";
  a.master_port = 4242;
  a.restart_count = restart_count;
  return a;
}

}  // namespace ddprun::agent::testing
