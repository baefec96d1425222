// Status queries and the server's counters: a real server on port 0 with real clients, queried
// through the protocol (query_status), the report built within the frame limit, the status
// command's table and JSON, and the counters the daemon's metrics read.
#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>

#include "metrics/registry.h"
#include "rendezvous/daemon/status_client.h"
#include "rendezvous/daemon/status_command.h"
#include "rendezvous/server/server_metrics.h"
#include "rendezvous/server/status_report.h"
#include "tests/rendezvous/rdzv_test_util.h"

namespace ddprun::rdzv::testing {
namespace {

class StatusTest : public ::testing::Test {
 protected:
  // `n` nodes of job `job` joined into one running round of n:n.
  std::vector<std::unique_ptr<TestNode>> run_job(const std::string& job, int n,
                                                 uint32_t max_restarts = 2) {
    std::vector<std::unique_ptr<TestNode>> nodes;
    for (int i = 0; i < n; ++i) {
      nodes.push_back(start_node(io_, node_options(server_.port(), job, i)));
    }
    EXPECT_TRUE(run_until(io_, [&] {
      for (auto& node : nodes)
        if (!node->connected) return false;
      return true;
    }));
    for (int i = 0; i < n; ++i) {
      start_join(*nodes[i], join_request(job + "-node-" + std::to_string(i), n, n, max_restarts));
    }
    EXPECT_TRUE(run_until(io_, [&] {
      for (auto& node : nodes)
        if (!node->assignment) return false;
      return true;
    }));
    for (auto& node : nodes) {
      EXPECT_TRUE(node->assignment && node->assignment->ok())
          << (node->assignment ? node->assignment->error_message() : "no assignment");
    }
    return nodes;
  }
  Result<StatusReport> query() {
    StatusQueryOptions o;
    o.port = server_.port();
    auto answer = query_status(o);
    if (!answer) return answer.status();
    EXPECT_EQ(answer->answered_by, "127.0.0.1:" + std::to_string(server_.port()));
    return std::move(answer->report);
  }

  ServerThread server_;
  boost::asio::io_context io_;
};

TEST_F(StatusTest, ReportsEveryJobItsRoundNodesAndRestarts) {
  auto a = run_job("job-a", 2);
  auto b = run_job("job-b", 1, 0);
  auto report = query();
  ASSERT_TRUE(report.ok()) << report.error_message();
  ASSERT_EQ(report->jobs.size(), 2u);
  EXPECT_FALSE(report->truncated);
  const JobStatus& ja = report->jobs[0];
  EXPECT_EQ(ja.job_id, "job-a");
  EXPECT_EQ(ja.phase, JobPhase::kRunning);
  EXPECT_EQ(ja.max_restarts, 2u);
  EXPECT_EQ(ja.restart_count, 0u);
  EXPECT_EQ(ja.min_nodes, 2u);
  EXPECT_EQ(ja.connections, 2u);
  ASSERT_EQ(ja.nodes.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const NodeStatus& n = ja.nodes[rank];
    EXPECT_EQ(n.group_rank, rank);
    EXPECT_EQ(n.phase, NodePhase::kMember);
    EXPECT_EQ(n.local_world_size, 2u);
    EXPECT_GE(n.last_heard_ms, 0);
    EXPECT_EQ(n.address.rfind("127.0.0.", 0), 0u) << n.address;  // its own 127.0.0.N
  }
  EXPECT_EQ(report->jobs[1].job_id, "job-b");
  EXPECT_EQ(report->jobs[1].nodes.size(), 1u);
}

// Stragglers across nodes: each node shares its ranks' busy times and gets back the job's
// stragglers by the threshold it asks for; the status report shows them too.
TEST_F(StatusTest, EachProgressIsAnsweredWithTheJobsStragglersAndTheStatusShowsThem) {
  auto nodes = run_job("job-s", 2);
  auto ranks = [](uint32_t first, uint64_t busy0, uint64_t busy1) {
    std::vector<RankProgressEntry> r(2);
    r[0].rank = first, r[0].local_rank = 0, r[0].step = 9, r[0].busy_us = busy0;
    r[1].rank = first + 1, r[1].local_rank = 1, r[1].step = 9, r[1].busy_us = busy1;
    return r;
  };
  auto share = [&](TestNode& node, std::vector<RankProgressEntry> r, uint32_t threshold) {
    std::optional<Result<StragglerFinding>> got;
    node.client->share_progress(std::move(r), threshold,
                                [&](Result<StragglerFinding> f) { got = std::move(f); });
    EXPECT_TRUE(run_until(io_, [&] { return got.has_value(); }));
    return got.value_or(Status::error("no answer"));
  };
  // The first node alone: two ranks measured, nobody over 1.5x.
  auto first = share(*nodes[0], ranks(0, 50'000, 52'000), 1500);
  ASSERT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(first->ranks_measured, 2u);
  EXPECT_TRUE(first->stragglers.empty());
  // The second node's rank 3 is four times slower: named, with the node as every line names it
  // (rendezvous/wire/node_name.h; these test ids are their own names).
  auto second = share(*nodes[1], ranks(2, 49'000, 210'000), 1500);
  ASSERT_TRUE(second.ok()) << second.error_message();
  EXPECT_EQ(second->ranks_measured, 4u);
  EXPECT_EQ(second->median_us, 50'000u);
  ASSERT_EQ(second->stragglers.size(), 1u);
  EXPECT_EQ(second->stragglers[0].rank, 3u);
  EXPECT_EQ(second->stragglers[0].local_rank, 1u);
  EXPECT_EQ(second->stragglers[0].node, "job-s-node-1");
  // Any node asking sees the job's finding.
  auto again = share(*nodes[0], ranks(0, 50'000, 52'000), 1500);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *second);
  // Without a threshold nothing is judged.
  auto unjudged = share(*nodes[0], ranks(0, 50'000, 52'000), 0);
  ASSERT_TRUE(unjudged.ok());
  EXPECT_EQ(*unjudged, StragglerFinding{});
  // The status report judges by the threshold last asked for (none now), then by 1.5x again.
  auto report = query();
  ASSERT_TRUE(report.ok()) << report.error_message();
  EXPECT_EQ(report->jobs[0].stragglers, StragglerFinding{});
  ASSERT_TRUE(share(*nodes[0], ranks(0, 50'000, 52'000), 1500).ok());
  report = query();
  ASSERT_TRUE(report.ok()) << report.error_message();
  EXPECT_EQ(report->jobs[0].stragglers, *second);
  const std::string table = render_status_table(*report);
  EXPECT_NE(table.find("stragglers (busy over 1.5x the median of 4 ranks, 50 ms): 1"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("rank 3 (node job-s-node-1"), std::string::npos) << table;
  const auto json = status_to_json(*report);
  EXPECT_EQ(json["jobs"][0]["stragglers"]["ranks"][0]["rank"], 3);
  EXPECT_DOUBLE_EQ(json["jobs"][0]["stragglers"]["median_busy_seconds"].get<double>(), 0.05);
}

TEST_F(StatusTest, AStatusQueryIsReadOnlyAndBelongsToNoJob) {
  auto a = run_job("job-a", 1);
  ASSERT_TRUE(query().ok());
  ASSERT_TRUE(query().ok());
  auto report = query();
  ASSERT_TRUE(report.ok()) << report.error_message();
  ASSERT_EQ(report->jobs.size(), 1u);  // no job was created by the queries
  EXPECT_EQ(report->jobs[0].connections, 1u);
  EXPECT_EQ(report->jobs[0].phase, JobPhase::kRunning);
}

TEST_F(StatusTest, UnreachableServerIsAClearError) {
  StatusQueryOptions o;
  o.port = server_.port();
  server_.stop();
  auto report = query_status(o);
  ASSERT_FALSE(report.ok());
  EXPECT_TRUE(report.status().is_unavailable()) << report.error_message();
  EXPECT_NE(report.error_message().find("127.0.0.1:" + std::to_string(o.port)), std::string::npos)
      << report.error_message();
}

// A replica that does not lead answers a status query with where the leader is: the query
// follows it and shows the leader's jobs, saying who answered. While no replica leads (an
// election), the error says so; replicas that only send each other round are given up on.
TEST_F(StatusTest, AReplicaThatDoesNotLeadSendsTheQueryToTheLeader) {
  auto a = run_job("job-a", 1);  // on server_, the leader
  ServerThread follower;
  follower.redirect_clients(Redirect{"127.0.0.1", server_.port()});
  StatusQueryOptions o;
  o.port = follower.port();
  auto answer = query_status(o);
  ASSERT_TRUE(answer.ok()) << answer.error_message();
  EXPECT_EQ(answer->answered_by, "127.0.0.1:" + std::to_string(server_.port()));
  ASSERT_EQ(answer->report.jobs.size(), 1u);
  EXPECT_EQ(answer->report.jobs[0].job_id, "job-a");

  follower.redirect_clients(Redirect{});  // an election is under way
  auto electing = query_status(o);
  ASSERT_FALSE(electing.ok());
  EXPECT_TRUE(electing.status().is_unavailable()) << electing.error_message();
  EXPECT_NE(electing.error_message().find("no replica leads"), std::string::npos)
      << electing.error_message();

  ServerThread other;  // two replicas naming each other
  follower.redirect_clients(Redirect{"127.0.0.1", other.port()});
  other.redirect_clients(Redirect{"127.0.0.1", follower.port()});
  auto loop = query_status(o);
  ASSERT_FALSE(loop.ok());
  EXPECT_NE(loop.error_message().find("gave up after 3 redirects"), std::string::npos)
      << loop.error_message();
}

// Writes `frames` as the first frames of a raw connection and returns what the server sends
// back until it closes.
std::string raw_session(uint16_t port, const std::vector<std::string>& frames) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  for (const auto& f : frames) boost::asio::write(s, boost::asio::buffer(f));
  timeval tv{10, 0};  // bounded: a server that never closes fails the test
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = ::recv(s.native_handle(), buf, sizeof buf, 0)) > 0;) all.append(buf, n);
  return all;
}

TEST_F(StatusTest, StatusQueryAfterHelloOrWithAWrongVersionIsRefused) {
  const std::string after_hello = raw_session(
      server_.port(), {encode_frame(ClientMessage(Hello{kProtocolMagic, kProtocolVersion, "j"})),
                       encode_frame(ClientMessage(StatusQuery{}))});
  EXPECT_NE(after_hello.find("a status query must be a connection's first frame"),
            std::string::npos);
  const std::string wrong_version =
      raw_session(server_.port(), {encode_frame(ClientMessage(StatusQuery{kProtocolMagic, 99}))});
  EXPECT_NE(wrong_version.find("protocol version 99 is not supported"), std::string::npos);
  const ServerStats stats = server_.stats();
  EXPECT_EQ(stats.totals.rejected_handshake, 1u);
  EXPECT_EQ(stats.jobs, 0u) << "a refused status query creates no job";
}

TEST_F(StatusTest, ServerCountsMessagesBytesRoundsAndRejections) {
  auto a = run_job("job-a", 2);
  raw_session(server_.port(), {encode_frame(ClientMessage(HeartbeatMsg{}))});  // not a Hello
  ASSERT_TRUE(query().ok());
  const ServerStats s = server_.stats();
  const ServerCounters& c = s.totals;
  EXPECT_EQ(c.accepted, 4u);  // 2 nodes, the raw connection, the query
  EXPECT_EQ(c.rejected_handshake, 1u);
  EXPECT_EQ(c.total_limit_refusals(), 0u);
  EXPECT_EQ(c.rejected_auth, 0u);
  auto in = [&](auto m) { return c.messages_in[ClientMessage(m).index()]; };
  auto out = [&](auto m) { return c.messages_out[ServerMessage(m).index()]; };
  EXPECT_EQ(in(Hello{}), 2u);
  EXPECT_EQ(in(JoinMsg{}), 2u);
  EXPECT_EQ(in(StatusQuery{}), 1u);
  EXPECT_EQ(out(HelloAck{}), 2u);
  EXPECT_EQ(out(RoundAssigned{}), 2u);
  EXPECT_EQ(out(StatusReport{}), 1u);
  EXPECT_EQ(out(ErrorMsg{}), 1u);  // the refused connection's
  EXPECT_GT(c.bytes_in, 0u);
  EXPECT_GT(c.bytes_out, 0u);
  EXPECT_EQ(c.round_durations.count, 1u) << "one round closed, counted once for both members";
}

TEST(StatusReportTest, KeepsTheFrameWithinTheLimitAndSaysSo) {
  JobRegistry::JobView job;
  job.id = "job";
  RoundState::Snapshot round;
  round.phase = RoundState::Phase::kRunning;
  for (int i = 0; i < 100; ++i) {
    round.nodes.push_back(
        {"node-" + std::to_string(i), NodePhase::kMember, static_cast<uint32_t>(i), 8, false});
  }
  job.round = round;
  const SteadyTime now{};
  const StatusReport whole = build_status_report({job}, now, 1u << 20);
  EXPECT_FALSE(whole.truncated);
  EXPECT_EQ(whole.jobs[0].nodes.size(), 100u);
  const uint32_t limit = 1000;
  const StatusReport cut = build_status_report({job, job}, now, limit);
  EXPECT_TRUE(cut.truncated);
  ASSERT_EQ(cut.jobs.size(), 1u);
  EXPECT_LT(cut.jobs[0].nodes.size(), 100u);
  EXPECT_GT(cut.jobs[0].nodes.size(), 10u);
  EXPECT_LE(encode_frame(ServerMessage(cut)).size(), limit);
  CodecLimits limits;
  limits.max_frame_bytes = limit;
  EXPECT_TRUE(decode_server_frame(encode_frame(ServerMessage(cut)), limits).ok());
}

// A job with many stragglers (every rank slow but the median) keeps within the limit too.
TEST(StatusReportTest, StragglersAreCutToTheFrameLimitToo) {
  JobRegistry::JobView job;
  job.id = "job";
  job.stragglers = {1500, 1000, 10'000, {}};
  for (uint32_t r = 0; r < 400; ++r) {
    job.stragglers.stragglers.push_back({r, 0, "node-" + std::to_string(r), 90'000});
  }
  const uint32_t limit = 2000;
  const StatusReport cut = build_status_report({job}, SteadyTime{}, limit);
  EXPECT_TRUE(cut.truncated);
  ASSERT_EQ(cut.jobs.size(), 1u);
  EXPECT_GT(cut.jobs[0].stragglers.stragglers.size(), 10u);
  EXPECT_LT(cut.jobs[0].stragglers.stragglers.size(), 400u);
  CodecLimits limits;
  limits.max_frame_bytes = limit;
  EXPECT_LE(encode_frame(ServerMessage(cut)).size(), limit);
  EXPECT_TRUE(decode_server_frame(encode_frame(ServerMessage(cut)), limits).ok());
}

StatusReport table_report() {
  StatusReport r;
  JobStatus j{"train-42", JobPhase::kRunning, 3, 1, 5, 1, 4, 2, {}, {}};
  j.nodes.push_back({"gpu01:77:1", "10.0.0.1:5000", NodePhase::kMember, 0, 8, 1500});
  j.nodes.push_back({"gpu02:88:2", "", NodePhase::kIdle, 1, 8, -1});
  r.jobs.push_back(j);
  return r;
}

TEST(StatusCommandTest, TableShowsJobsAndTheirNodes) {
  const std::string table = render_status_table(table_report());
  EXPECT_NE(table.find("train-42"), std::string::npos) << table;
  EXPECT_NE(table.find("running"), std::string::npos) << table;
  EXPECT_NE(table.find("1/5"), std::string::npos) << table;  // restarts used / max
  EXPECT_NE(table.find("1:4"), std::string::npos) << table;  // nodes min:max
  EXPECT_NE(table.find("10.0.0.1:5000"), std::string::npos) << table;
  EXPECT_NE(table.find("1.5s ago"), std::string::npos) << table;
  EXPECT_NE(table.find("disconnected"), std::string::npos) << table;
  EXPECT_EQ(render_status_table({}), "no jobs\n");
}

TEST(StatusCommandTest, JsonHasEveryField) {
  const auto json = status_to_json(table_report());
  const auto& job = json["jobs"][0];
  EXPECT_EQ(job["job_id"], "train-42");
  EXPECT_EQ(job["state"], "running");
  EXPECT_EQ(job["round"], 3);
  EXPECT_EQ(job["restarts"], 1);
  EXPECT_EQ(job["max_restarts"], 5);
  EXPECT_EQ(job["nodes"][0]["address"], "10.0.0.1:5000");
  EXPECT_EQ(job["nodes"][0]["group_rank"], 0);
  EXPECT_DOUBLE_EQ(job["nodes"][0]["last_heartbeat_age_seconds"].get<double>(), 1.5);
  EXPECT_TRUE(job["nodes"][1]["address"].is_null());
  EXPECT_TRUE(job["nodes"][1]["last_heartbeat_age_seconds"].is_null());
  EXPECT_EQ(json["truncated"], false);
}

TEST_F(StatusTest, DaemonMetricsRenderTheServersView) {
  auto a = run_job("job-a", 2, 3);
  metrics::Registry registry;
  // The server lives on its own thread; read it there (the collector's contract).
  const std::string text = server_.on_loop([&](const RendezvousServer& server) {
    add_server_metrics(registry, server);
    return registry.render();
  });
  for (const char* line :
       {"ddprun_rendezvous_connections 2\n", "ddprun_rendezvous_connections_accepted_total 2\n",
        "ddprun_rendezvous_messages_total{direction=\"in\",type=\"join\"} 2\n",
        "ddprun_rendezvous_jobs 1\n",
        "ddprun_rendezvous_job_state{job_id=\"job-a\",state=\"running\"} 1\n",
        "ddprun_rendezvous_job_nodes{job_id=\"job-a\",state=\"member\"} 2\n",
        "ddprun_rendezvous_job_max_restarts{job_id=\"job-a\"} 3\n",
        "ddprun_rendezvous_round_duration_seconds_count 1\n",
        "ddprun_rendezvous_round_duration_seconds_bucket{le=\"+Inf\"} 1\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "in:\n" << text;
  }
}

}  // namespace
}  // namespace ddprun::rdzv::testing
