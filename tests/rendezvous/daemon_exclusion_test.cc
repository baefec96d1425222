// Issue 36 with the real ddp-rendezvous: a node that leaves unfit has its host kept out, which
// `ddp-rendezvous status` shows (table and --json) and `ddp-rendezvous release` ends; with its
// state in SQLite (--state-dir) or etcd (--state etcd://, a real etcd cluster) the host is
// still kept out by the daemon started after it. Only processes the test started are
// signalled, by their PIDs.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rendezvous/daemon/status_client.h"
#include "tests/rendezvous/daemon_process.h"
#include "tests/rendezvous/rdzv_test_util.h"
#include "tests/rendezvous/state/state_test_util.h"
#include "tests/support/temp_dir.h"

namespace ddprun::rdzv::testing {
namespace {

constexpr const char* kReason = "its workers caused 3 of the job's failures";
constexpr const char* kHost = "127.0.0.4";  // node_options(..., 3)

class DaemonExclusionTest : public ::testing::Test {
 protected:
  // A node on 127.0.0.4 joins `job` alone: its join's outcome.
  Result<RoundAssignment> join(uint16_t port, const std::string& job, int pid) {
    auto node = start_node(io_, node_options(port, job, 3));
    EXPECT_TRUE(run_until(io_, [&] { return node->connected.has_value(); }));
    start_join(*node, join_request(fmt::format("{}:{}:1", kHost, pid), 1, 1));
    EXPECT_TRUE(run_until(io_, [&] { return node->assignment.has_value(); }));
    if (!node->assignment) return Status::timed_out("no answer to the join");
    last_ = std::move(node);
    return *last_->assignment;
  }
  // The node of the last join leaves unfit.
  void leave_unfit() {
    std::optional<bool> closed;
    last_->client->close_excluded(kReason, [&] { closed = true; });
    ASSERT_TRUE(run_until(io_, [&] { return closed.has_value(); }));
  }
  static std::string endpoint(uint16_t port) { return fmt::format("127.0.0.1:{}", port); }
  // Status of the daemon at `port` shows the host kept out, in the table and in --json.
  static void expect_status_shows_the_host(uint16_t port) {
    const auto [code, table] = run_status({"--endpoint", endpoint(port)});
    ASSERT_EQ(code, 0) << table;
    EXPECT_NE(table.find("EXCLUDED HOST"), std::string::npos) << table;
    EXPECT_NE(table.find(kHost), std::string::npos) << table;
    EXPECT_NE(table.find(kReason), std::string::npos) << table;
    const auto [json_code, text] = run_status({"--endpoint", endpoint(port), "--json"});
    ASSERT_EQ(json_code, 0) << text;
    const auto json = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(json.is_discarded()) << text;
    ASSERT_EQ(json["excluded_hosts"].size(), 1u) << text;
    EXPECT_EQ(json["excluded_hosts"][0]["host"], kHost);
    EXPECT_EQ(json["excluded_hosts"][0]["reason"], kReason);
    EXPECT_EQ(json["excluded_hosts"][0]["job_id"], "job-a");
  }
  void expect_refused(uint16_t port, const std::string& job, int pid) {
    auto refused = join(port, job, pid);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error_message().find(std::string("node host ") + kHost + " is kept out"),
              std::string::npos)
        << refused.error_message();
  }
  // Release: exit 0, then the host joins again; a second release says it is not kept out.
  void expect_release_lets_it_in(uint16_t port) {
    const auto [code, out] = run_subcommand("release", {kHost, "--endpoint", endpoint(port)});
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find(std::string("released host ") + kHost), std::string::npos) << out;
    const auto [again, why] = run_subcommand("release", {kHost, "--endpoint", endpoint(port)});
    EXPECT_EQ(again, 1) << why;
    EXPECT_NE(why.find("is not kept out"), std::string::npos) << why;
    auto joined = join(port, "job-c", 400);
    EXPECT_TRUE(joined.ok()) << joined.error_message();
  }

  boost::asio::io_context io_;
  std::unique_ptr<TestNode> last_;
};

TEST_F(DaemonExclusionTest, KeptOutAcrossARestartOnSqliteUntilReleased) {
  ::ddprun::testing::TempDir state;
  auto daemon = std::make_unique<Daemon>(std::vector<std::string>{"--state-dir", state.path()});
  uint16_t port = daemon->port();
  ASSERT_TRUE(join(port, "job-a", 100).ok());
  leave_unfit();
  expect_refused(port, "job-b", 200);
  expect_status_shows_the_host(port);
  EXPECT_EQ(daemon->terminate(10s), 0);

  daemon = std::make_unique<Daemon>(std::vector<std::string>{"--state-dir", state.path()});
  port = daemon->port();
  expect_status_shows_the_host(port);
  expect_refused(port, "job-b", 300);
  expect_release_lets_it_in(port);
  last_.reset();
  EXPECT_EQ(daemon->terminate(10s), 0);
}

// The status query of a replica answers once it leads (before, "no replica leads right now").
// Nothing outside the replica process signals its election, so this asks again, bounded.
bool wait_until_leading(uint16_t port) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    StatusQueryOptions query;
    query.port = port;
    query.timeout = 2s;
    if (query_status(query).ok()) return true;
    std::this_thread::sleep_for(100ms);  // an election takes seconds; don't spin
  }
  return false;
}

TEST_F(DaemonExclusionTest, KeptOutAcrossARestartOnEtcd) {
  if (!std::filesystem::exists(state::testing::etcd_binary())) {
    GTEST_SKIP() << "no etcd binary at " << state::testing::etcd_binary()
                 << " (install Debian's etcd-server, or set DDPRUN_ETCD)";
  }
  state::testing::EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.start()) << etcd.logs();
  const std::vector<std::string> flags = {"--state", "etcd://" + etcd.endpoints()[0] + "/excl",
                                          "--lease-ttl", "2"};
  auto daemon = std::make_unique<Daemon>(flags);
  uint16_t port = daemon->port();
  ASSERT_TRUE(wait_until_leading(port));
  ASSERT_TRUE(join(port, "job-a", 100).ok());
  leave_unfit();
  expect_status_shows_the_host(port);
  EXPECT_EQ(daemon->terminate(10s), 0);  // resigns: the next replica takes over at once

  daemon = std::make_unique<Daemon>(flags);
  port = daemon->port();
  ASSERT_TRUE(wait_until_leading(port));
  expect_status_shows_the_host(port);
  expect_refused(port, "job-b", 300);
  expect_release_lets_it_in(port);
  last_.reset();
  EXPECT_EQ(daemon->terminate(10s), 0);
}

}  // namespace
}  // namespace ddprun::rdzv::testing
