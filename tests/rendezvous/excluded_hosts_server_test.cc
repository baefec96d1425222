// Issue 36 on an in-process server (port 0) with real clients, each node on its own 127.0.0.N:
// a member that leaves unfit (close_excluded) has its host refused by the same job and by a
// new one, the job goes on with a waiting spare in its place, status queries list the host and
// a release (the status query naming it) lets it join again. The refusal's Reply.integer and
// the cool-down on a fake clock are tested on the registry (excluded_hosts_test.cc).
#include <string>
#include <vector>

#include <fmt/format.h>

#include "rendezvous/daemon/status_client.h"
#include "tests/rendezvous/rdzv_test_util.h"

namespace ddprun::rdzv::testing {
namespace {

// An agent's node id: "<host>:<pid>:<random>" (launcher/run_job.cc), its host the node's
// --local_addr.
std::string agent_id(int index, int pid = 100) {
  return fmt::format("127.0.0.{}:{}:{}", index + 1, pid, 7 * pid + index);
}

class ExcludedHostsServerTest : public ::testing::Test {
 protected:
  std::unique_ptr<TestNode> connect(const std::string& job, int index) {
    auto node = start_node(io_, node_options(server_.port(), job, index));
    TestNode* raw = node.get();
    EXPECT_TRUE(run_until(io_, [&] { return raw->connected.has_value(); }));
    return node;
  }
  Result<StatusAnswer> status(const std::string& release_host = {}) {
    StatusQueryOptions query;
    query.port = server_.port();
    query.release_host = release_host;
    return query_status(query);
  }

  ServerThread server_;
  boost::asio::io_context io_;
};

TEST_F(ExcludedHostsServerTest, AMemberLeftUnfitIsKeptOutASpareTakesItsPlaceAndReleaseLetsItIn) {
  std::vector<std::unique_ptr<TestNode>> nodes;
  for (int i = 0; i < 3; ++i) nodes.push_back(connect("job", i));
  for (int i = 0; i < 3; ++i) start_join(*nodes[i], join_request(agent_id(i), 2, 2));
  // Two members; the third waits as a spare.
  ASSERT_TRUE(run_until(io_, [&] {
    int assigned = 0;
    for (auto& n : nodes) assigned += n->assignment.has_value();
    return assigned == 2;
  }));
  int leaver = -1;
  int spare = -1;
  for (int i = 0; i < 3; ++i) {
    if (!nodes[i]->assignment)
      spare = i;
    else if (leaver < 0)
      leaver = i;
  }
  ASSERT_GE(spare, 0);
  const int survivor = 3 - leaver - spare;
  const std::string leaver_host = fmt::format("127.0.0.{}", leaver + 1);

  std::optional<bool> closed;
  nodes[leaver]->client->close_excluded("its workers caused 3 of the job's failures",
                                        [&] { closed = true; });
  ASSERT_TRUE(
      run_until(io_, [&] { return closed && nodes[survivor]->count<RestartRequested>() > 0; }));
  EXPECT_EQ(nodes[survivor]->last<RestartRequested>()->reason, RestartReason::kMemberLost);
  start_join(*nodes[survivor], join_request(agent_id(survivor), 2, 2));
  ASSERT_TRUE(
      run_until(io_, [&] { return nodes[survivor]->assignment && nodes[spare]->assignment; }));
  ASSERT_TRUE(nodes[spare]->assignment->ok()) << nodes[spare]->assignment->error_message();
  EXPECT_EQ(nodes[spare]->assignment->value().round, 1u) << "the spare took the leaver's place";

  // The leaver's host, as a new agent, for this job and for another.
  for (const char* job : {"job", "job-2"}) {
    auto again = connect(job, leaver);
    start_join(*again, join_request(agent_id(leaver, 200), 1, 2));
    ASSERT_TRUE(run_until(io_, [&] { return again->assignment.has_value(); }));
    ASSERT_FALSE(again->assignment->ok()) << job;
    const std::string why = again->assignment->error_message();
    EXPECT_NE(why.find("node host " + leaver_host + " is kept out"), std::string::npos) << why;
    EXPECT_NE(why.find("its workers caused 3 of the job's failures"), std::string::npos) << why;
    EXPECT_NE(why.find("ddp-rendezvous release " + leaver_host), std::string::npos) << why;
  }
  auto other = connect("job-2", 7);
  start_join(*other, join_request(agent_id(7), 1, 2));
  ASSERT_TRUE(run_until(io_, [&] { return other->assignment.has_value(); }));
  EXPECT_TRUE(other->assignment->ok()) << "another host still joins";

  auto report = status();
  ASSERT_TRUE(report.ok()) << report.error_message();
  ASSERT_EQ(report->report.excluded_hosts.size(), 1u);
  const ExcludedHostStatus& kept = report->report.excluded_hosts[0];
  EXPECT_EQ(kept.host, leaver_host);
  EXPECT_EQ(kept.job_id, "job");
  EXPECT_EQ(kept.node, fmt::format("{}:100", leaver_host));
  EXPECT_NEAR(static_cast<double>(kept.until_ms - kept.since_ms), 3'600'000.0, 1.0);
  const ServerStats stats = server_.stats();
  EXPECT_EQ(stats.excluded_hosts, 1u);
  EXPECT_EQ(stats.totals.hosts_excluded, 1u);
  EXPECT_EQ(stats.totals.joins_refused_excluded, 2u);

  auto released = status(leaver_host);
  ASSERT_TRUE(released.ok()) << released.error_message();
  auto twice = status(leaver_host);
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(twice.status().is_not_found());
  EXPECT_NE(twice.error_message().find("is not kept out"), std::string::npos);
  EXPECT_TRUE(status()->report.excluded_hosts.empty());
  auto back = connect("job-2", leaver);
  start_join(*back, join_request(agent_id(leaver, 300), 1, 2));
  ASSERT_TRUE(run_until(io_, [&] { return back->assignment.has_value(); }));
  EXPECT_TRUE(back->assignment->ok()) << back->assignment->error_message();
}

// A tiny cool-down through the server's options: the host is refused, then, once the
// cool-down has passed, joins again (a bounded retry, no sleep: each attempt is a join).
TEST(ExcludedHostsCooldownTest, AfterTheCooldownTheHostJoinsAgain) {
  ServerOptions options = ServerThread::test_options();
  options.exclude_cooldown = 200ms;
  ServerThread server(options);
  boost::asio::io_context io;
  auto node = start_node(io, node_options(server.port(), "job", 4));
  ASSERT_TRUE(run_until(io, [&] { return node->connected.has_value(); }));
  start_join(*node, join_request(agent_id(4), 1, 1));
  ASSERT_TRUE(run_until(io, [&] { return node->assignment.has_value(); }));
  std::optional<bool> closed;
  node->client->close_excluded("it failed its health check", [&] { closed = true; });
  ASSERT_TRUE(run_until(io, [&] { return closed.has_value(); }));

  bool joined = false;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (int pid = 500; std::chrono::steady_clock::now() < deadline; ++pid) {
    auto again = start_node(io, node_options(server.port(), "job", 4));
    ASSERT_TRUE(run_until(io, [&] { return again->connected.has_value(); }));
    start_join(*again, join_request(agent_id(4, pid), 1, 1));
    ASSERT_TRUE(run_until(io, [&] { return again->assignment.has_value(); }));
    if (again->assignment->ok()) {
      joined = true;
      break;
    }
    EXPECT_NE(again->assignment->error_message().find("kept out"), std::string::npos)
        << again->assignment->error_message();
  }
  EXPECT_TRUE(joined) << "the host was still kept out 10 s after a 200 ms cool-down";
  EXPECT_EQ(server.stats().excluded_hosts, 0u);
}

}  // namespace
}  // namespace ddprun::rdzv::testing
