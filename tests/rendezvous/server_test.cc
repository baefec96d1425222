// An in-process server on port 0 with many real clients on loopback (each node its own
// 127.0.0.N): rounds, pushes, restarts, the exit barrier, and isolation between jobs.
#include <atomic>
#include <set>

#include "rendezvous/server/round_state.h"
#include "tests/rendezvous/rdzv_test_util.h"

namespace ddprun::rdzv::testing {
namespace {

class ServerTest : public ::testing::Test {
 protected:
  std::vector<std::unique_ptr<TestNode>> start_nodes(int n, const std::string& job = "job") {
    std::vector<std::unique_ptr<TestNode>> nodes;
    for (int i = 0; i < n; ++i)
      nodes.push_back(start_node(io_, node_options(server_.port(), job, i)));
    EXPECT_TRUE(run_until(io_, [&] {
      for (auto& node : nodes)
        if (!node->connected) return false;
      return true;
    }));
    for (auto& node : nodes) EXPECT_TRUE(node->connected->ok()) << node->connected->message();
    return nodes;
  }
  void join_all(std::vector<std::unique_ptr<TestNode>>& nodes, uint32_t min, uint32_t max,
                uint32_t max_restarts = 0) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      start_join(*nodes[i], join_request("node-" + std::to_string(i), min, max, max_restarts));
    }
  }
  bool all_assigned(std::vector<std::unique_ptr<TestNode>>& nodes) {
    return run_until(io_, [&] {
      for (auto& node : nodes)
        if (!node->assignment) return false;
      return true;
    });
  }
  template <class T>
  bool all_got(std::vector<std::unique_ptr<TestNode>>& nodes, size_t n = 1) {
    return run_until(io_, [&] {
      for (auto& node : nodes)
        if (node && node->count<T>() < n) return false;
      return true;
    });
  }

  ServerThread server_;
  boost::asio::io_context io_;
};

TEST_F(ServerTest, ManyClientsJoinOneRoundWithConsistentRanks) {
  constexpr int kNodes = 64;
  auto nodes = start_nodes(kNodes);
  join_all(nodes, kNodes, kNodes);
  ASSERT_TRUE(all_assigned(nodes));
  std::set<uint32_t> ranks, offsets;
  for (auto& node : nodes) {
    ASSERT_TRUE(node->assignment->ok()) << node->assignment->error_message();
    const RoundAssignment& a = node->assignment->value();
    ranks.insert(a.group_rank);
    offsets.insert(a.rank_offset);
    EXPECT_EQ(a.rank_offset, a.group_rank * 2);
    EXPECT_EQ(a.world_size, 2u * kNodes);
    EXPECT_EQ(a.group_world_size, static_cast<uint32_t>(kNodes));
    EXPECT_EQ(a.master_port, 29500);
    EXPECT_EQ(a.job_id, "job");
  }
  EXPECT_EQ(ranks.size(), static_cast<size_t>(kNodes));
  EXPECT_EQ(*ranks.rbegin(), static_cast<uint32_t>(kNodes - 1));
}

// Issue 22: a server hosted by an agent names, in every RoundAssigned, the standby server of the
// member with the lowest group rank other than its own node: where the rendezvous moves should
// that node be lost. A job that moves there goes on counting its restarts.
TEST(SuccessorTest, AnAgentHostedServerNamesTheLowestRankedOtherMembersStandby) {
  ServerOptions options = ServerThread::test_options();
  options.host_node_id = "node-0";
  ServerThread server(options);
  boost::asio::io_context io;
  std::vector<std::unique_ptr<TestNode>> nodes;
  for (int i = 0; i < 3; ++i)
    nodes.push_back(start_node(io, node_options(server.port(), "job", i)));
  ASSERT_TRUE(run_until(io, [&] {
    for (auto& n : nodes)
      if (!n->connected) return false;
    return true;
  }));
  for (int i = 0; i < 3; ++i) {
    JoinRequest r = join_request("node-" + std::to_string(i), 3, 3, 5);
    r.node.node_rank_hint = static_cast<uint32_t>(i);
    r.node.master_addr = "127.0.0." + std::to_string(i + 1);
    r.standby_port = static_cast<uint16_t>(i == 1 ? 0 : 4000 + i);  // node-1 offers none
    r.restarts_used = i == 2 ? 2 : 0;  // as a job that moved here after two restarts
    start_join(*nodes[i], r);
  }
  ASSERT_TRUE(run_until(io, [&] {
    for (auto& n : nodes)
      if (!n->assignment) return false;
    return true;
  }));
  for (auto& n : nodes) {
    ASSERT_TRUE(n->assignment->ok()) << n->assignment->error_message();
    const RoundAssignment& a = n->assignment->value();
    EXPECT_EQ(a.successor_host, "127.0.0.3");  // node-0 hosts, node-1 has no standby
    EXPECT_EQ(a.successor_port, 4002);
    EXPECT_EQ(a.restart_count, 2u);
  }
}

// Issue 36: the host's process gone (its connections closed, its port refusing), a node waited
// heartbeat_timeout before moving to the successor. With a successor named, the closed
// connection and the refused reconnect are enough; without one (a daemon, which may come back
// at the same address), the node keeps its window. heartbeat_timeout here is far longer than
// the waits: the loss must come from the refusal.
void expect_the_loss_after_the_server_is_gone(bool successor_named) {
  ServerOptions options = ServerThread::test_options();
  if (successor_named) options.host_node_id = "node-0";
  auto server = std::make_unique<ServerThread>(options);
  boost::asio::io_context io;
  std::vector<std::unique_ptr<TestNode>> nodes;
  for (int i = 0; i < 2; ++i) {
    ClientOptions o = node_options(server->port(), "job", i);
    o.heartbeat_timeout = successor_named ? 60s : 2s;  // past the server's shutdown grace
    nodes.push_back(start_node(io, o));
  }
  ASSERT_TRUE(run_until(io, [&] { return nodes[0]->connected && nodes[1]->connected; }));
  for (int i = 0; i < 2; ++i) {
    JoinRequest r = join_request("node-" + std::to_string(i), 1, 2);
    r.node.master_addr = "127.0.0." + std::to_string(i + 1);
    r.standby_port = 4000;
    start_join(*nodes[i], r);
  }
  ASSERT_TRUE(run_until(io, [&] { return nodes[0]->assignment && nodes[1]->assignment; }));
  ASSERT_TRUE(nodes[1]->assignment->ok()) << nodes[1]->assignment->error_message();
  EXPECT_EQ(nodes[1]->assignment->value().successor_host.empty(), !successor_named);
  server->stop();
  ASSERT_TRUE(run_until(
      io, [&] { return nodes[1]->count<ConnectionLost>() > 0; }, 10s));
  const std::string why = nodes[1]->last<ConnectionLost>()->message;
  if (successor_named) {
    EXPECT_NE(why.find("refuses connections (nothing listens there any more): the server's "
                       "process is gone"),
              std::string::npos)
        << why;
  } else {
    EXPECT_EQ(why.find("process is gone"), std::string::npos) << why;
    EXPECT_NE(why.find("could not reach the rendezvous server"), std::string::npos) << why;
  }
}

TEST(GoneServerTest, WithASuccessorNamedANodeGivesUpAtOnceWhenTheServersProcessIsGone) {
  expect_the_loss_after_the_server_is_gone(/*successor_named=*/true);
}

TEST(GoneServerTest, WithoutASuccessorANodeKeepsItsWindowToReconnect) {
  expect_the_loss_after_the_server_is_gone(/*successor_named=*/false);
}

TEST_F(ServerTest, ADaemonNamesNoSuccessor) {
  auto nodes = start_nodes(2);
  for (size_t i = 0; i < nodes.size(); ++i) {
    JoinRequest r = join_request("node-" + std::to_string(i), 2, 2);
    r.standby_port = 4000;
    start_join(*nodes[i], r);
  }
  ASSERT_TRUE(all_assigned(nodes));
  for (auto& n : nodes) EXPECT_TRUE(n->assignment->value().successor_host.empty());
}

TEST_F(ServerTest, WorkerFailureRestartsEveryMemberThenFailsWithTheSameReportEverywhere) {
  auto nodes = start_nodes(3);
  join_all(nodes, 3, 3, /*max_restarts=*/1);
  ASSERT_TRUE(all_assigned(nodes));
  nodes[1]->client->report_worker_failure("{\"rank\":3}", 3);
  ASSERT_TRUE(all_got<RestartRequested>(nodes));
  for (auto& n : nodes) {
    EXPECT_EQ(n->last<RestartRequested>()->reason, RestartReason::kWorkerFailure);
    EXPECT_EQ(n->last<RestartRequested>()->failure_report, "{\"rank\":3}");
  }
  join_all(nodes, 3, 3, 1);
  ASSERT_TRUE(all_assigned(nodes));
  for (auto& n : nodes) EXPECT_EQ(n->assignment->value().restart_count, 1u);
  nodes[2]->client->report_worker_failure("{\"rank\":5}", 7);
  ASSERT_TRUE(all_got<JobFailed>(nodes));
  for (auto& n : nodes) {
    EXPECT_EQ(n->last<JobFailed>()->failure_report, "{\"rank\":5}");
    EXPECT_EQ(n->last<JobFailed>()->exit_code, 7);
  }
}

TEST_F(ServerTest, ExitBarrierPushesJobSucceededToAll) {
  auto nodes = start_nodes(3);
  join_all(nodes, 3, 3);
  ASSERT_TRUE(all_assigned(nodes));
  for (auto& n : nodes) n->client->report_success();
  ASSERT_TRUE(all_got<JobSucceeded>(nodes));
  std::optional<bool> closed;
  nodes[0]->client->close([&] { closed = true; });
  ASSERT_TRUE(run_until(io_, [&] { return closed.has_value(); }));
}

TEST_F(ServerTest, CleanLeaveRestartsSurvivorsAtOnce) {
  auto nodes = start_nodes(3);
  join_all(nodes, 2, 3);
  ASSERT_TRUE(all_assigned(nodes));
  std::optional<bool> closed;
  nodes[2]->client->close([&] { closed = true; });
  ASSERT_TRUE(run_until(io_, [&] {
    return closed && nodes[0]->count<RestartRequested>() && nodes[1]->count<RestartRequested>();
  }));
  EXPECT_EQ(nodes[0]->last<RestartRequested>()->reason, RestartReason::kMemberLost);
  EXPECT_EQ(nodes[2]->count<RestartRequested>(), 0u);
  nodes.pop_back();
  join_all(nodes, 2, 3);
  ASSERT_TRUE(all_assigned(nodes));
  EXPECT_EQ(nodes[0]->assignment->value().group_world_size, 2u);
  EXPECT_EQ(nodes[0]->assignment->value().round, 1u);
  EXPECT_EQ(nodes[0]->assignment->value().restart_count, 0u);  // membership change: free
}

// pytorch#111646: in torchrun a dead node does not make the survivors re-rendezvous.
TEST_F(ServerTest, Pytorch111646_NodeThatVanishesIsDroppedAndSurvivorsRestart) {
  auto nodes = start_nodes(3);
  join_all(nodes, 2, 3);
  ASSERT_TRUE(all_assigned(nodes));
  const auto t0 = std::chrono::steady_clock::now();
  nodes[0].reset();  // no Leave: like a SIGKILLed agent
  std::vector<std::unique_ptr<TestNode>> survivors;
  survivors.push_back(std::move(nodes[1]));
  survivors.push_back(std::move(nodes[2]));
  ASSERT_TRUE(all_got<RestartRequested>(survivors));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);  // heartbeat_timeout is 400 ms
  EXPECT_NE(survivors[0]->last<RestartRequested>()->message.find("node-0"), std::string::npos);
  start_join(*survivors[0], join_request("node-1", 2, 3));
  start_join(*survivors[1], join_request("node-2", 2, 3));
  ASSERT_TRUE(all_assigned(survivors));
  EXPECT_EQ(survivors[0]->assignment->value().group_rank, 1u);  // kept its rank
  EXPECT_EQ(survivors[1]->assignment->value().group_rank, 0u);
}

TEST_F(ServerTest, ScaleUpPushesRestartAndTheNextRoundIsBigger) {
  auto nodes = start_nodes(3);
  start_join(*nodes[0], join_request("node-0", 1, 3));
  start_join(*nodes[1], join_request("node-1", 1, 3));
  std::vector<std::unique_ptr<TestNode>> first;
  ASSERT_TRUE(run_until(io_, [&] { return nodes[0]->assignment && nodes[1]->assignment; }));
  EXPECT_EQ(nodes[0]->assignment->value().group_world_size, 2u);
  start_join(*nodes[2], join_request("node-2", 1, 3));
  ASSERT_TRUE(run_until(io_, [&] {
    return nodes[0]->count<RestartRequested>() && nodes[1]->count<RestartRequested>();
  }));
  EXPECT_EQ(nodes[0]->last<RestartRequested>()->reason, RestartReason::kScaleUp);
  start_join(*nodes[0], join_request("node-0", 1, 3));
  start_join(*nodes[1], join_request("node-1", 1, 3));
  ASSERT_TRUE(all_assigned(nodes));
  for (auto& n : nodes) {
    EXPECT_EQ(n->assignment->value().group_world_size, 3u);
    EXPECT_EQ(n->assignment->value().restart_count, 0u);
  }
}

TEST_F(ServerTest, TooFewNodesFailTheJoinWithAClearMessage) {
  auto nodes = start_nodes(1);
  JoinRequest r = join_request("node-0", 2, 2);
  r.job.join_timeout = 200ms;
  start_join(*nodes[0], r);
  ASSERT_TRUE(run_until(io_, [&] { return nodes[0]->assignment && nodes[0]->count<JobFailed>(); }));
  ASSERT_FALSE(nodes[0]->assignment->ok());
  EXPECT_NE(nodes[0]->assignment->error_message().find("1 of at least 2 nodes"), std::string::npos)
      << nodes[0]->assignment->error_message();
  EXPECT_EQ(nodes[0]->last<JobFailed>()->exit_code, kRendezvousFailureExitCode);
}

TEST_F(ServerTest, TwoJobsOnOneServerAreIsolated) {
  auto a = start_nodes(2, "job-a");
  auto b = start_nodes(3, "job-b");
  join_all(a, 2, 2);  // the same node ids in both jobs
  join_all(b, 3, 3);
  ASSERT_TRUE(all_assigned(a));
  ASSERT_TRUE(all_assigned(b));
  EXPECT_EQ(a[0]->assignment->value().group_world_size, 2u);
  EXPECT_EQ(b[0]->assignment->value().group_world_size, 3u);
  a[1]->client->report_worker_failure("boom", 1);
  ASSERT_TRUE(all_got<JobFailed>(a));
  EXPECT_EQ(b[0]->events.size(), 0u);
}

// A shutdown whose peers hang up when told: every session ends on its peer's hang-up, none on a
// deadline. (The race that made the hosting agent wait a second at the end of multi-node jobs
// needs real agents to reproduce: tests/multinode/exit_test.cc.)
TEST(ServerShutdownTest, PeersThatHangUpDuringShutdownAreNotWaitedFor) {
  ServerOptions options = ServerThread::test_options();
  options.shutdown_grace = 5s;  // longer than the linger: only a deadline could end a session
  ServerThread server(options);
  boost::asio::io_context io;
  std::vector<std::unique_ptr<TestNode>> nodes;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(start_node(io, node_options(server.port(), "job", i)));
    start_join(*nodes.back(), join_request("node-" + std::to_string(i), 3, 3));
  }
  ASSERT_TRUE(run_until(io, [&] {
    for (auto& n : nodes)
      if (!n->assignment) return false;
    return true;
  }));
  std::atomic<bool> shut_down{false};
  server.shutdown_async([&] { shut_down = true; });
  // Each client reads the server's goodbye and end of file, then drops its socket.
  ASSERT_TRUE(run_until(
      io, [&] { return shut_down.load(); }, 10s));
  const ServerStats stats = server.stats();
  EXPECT_EQ(stats.totals.deadline_drops, 0u);
  EXPECT_EQ(stats.connections, 0u);
}

TEST_F(ServerTest, ConnectToNothingReportsEveryAttempt) {
  ClientOptions o = node_options(1, "job", 0);  // port 1: nothing listens there
  o.connect_timeout = 300ms;
  auto node = start_node(io_, o);
  ASSERT_TRUE(run_until(io_, [&] { return node->connected.has_value(); }));
  ASSERT_FALSE(node->connected->ok());
  EXPECT_NE(node->connected->message().find("attempts"), std::string::npos)
      << node->connected->message();
  EXPECT_NE(node->connected->message().find("refused"), std::string::npos);
}

TEST_F(ServerTest, DuplicateNodeIdAndMismatchedOptionsAreRefused) {
  auto nodes = start_nodes(3);
  start_join(*nodes[0], join_request("same", 3, 3));
  start_join(*nodes[1], join_request("same", 3, 3));
  start_join(*nodes[2], join_request("other", 2, 3));
  ASSERT_TRUE(run_until(io_, [&] { return nodes[1]->assignment && nodes[2]->assignment; }));
  EXPECT_NE(nodes[1]->assignment->error_message().find("unique"), std::string::npos);
  EXPECT_NE(nodes[2]->assignment->error_message().find("--nnodes"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::rdzv::testing
