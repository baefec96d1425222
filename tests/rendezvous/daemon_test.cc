// The real ddp-rendezvous executable: serves two jobs at once, survives an agent's death, and
// shuts down on SIGTERM. Only the process this test started is signalled, by its PID.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "common/listener.h"
#include "tests/metrics/http_client.h"
#include "tests/rendezvous/daemon_process.h"
#include "tests/rendezvous/rdzv_test_util.h"
#include "tests/rendezvous/test_pki.h"
#include "tests/support/descriptor_exhaustion.h"
#include "tests/support/free_port.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_seed.h"

extern char** environ;

namespace ddprun::rdzv::testing {
namespace {

TEST(DaemonTest, ServesTwoJobsAtOnceAndStopsOnSigterm) {
  Daemon daemon;
  const uint16_t port = daemon.port();
  boost::asio::io_context io;
  std::vector<std::unique_ptr<TestNode>> a, b;
  for (int i = 0; i < 2; ++i) a.push_back(start_node(io, node_options(port, "job-a", i)));
  for (int i = 0; i < 3; ++i) b.push_back(start_node(io, node_options(port, "job-b", 10 + i)));
  auto all = [&](auto pred) {
    for (auto* group : {&a, &b}) {
      for (auto& n : *group)
        if (!pred(*n)) return false;
    }
    return true;
  };
  ASSERT_TRUE(
      run_until(io, [&] { return all([](TestNode& n) { return n.connected.has_value(); }); }));
  for (size_t i = 0; i < a.size(); ++i)
    start_join(*a[i], join_request("n" + std::to_string(i), 2, 2));
  for (size_t i = 0; i < b.size(); ++i)
    start_join(*b[i], join_request("n" + std::to_string(i), 3, 3));
  ASSERT_TRUE(
      run_until(io, [&] { return all([](TestNode& n) { return n.assignment.has_value(); }); }));
  EXPECT_EQ(a[0]->assignment->value().world_size, 4u);
  EXPECT_EQ(b[0]->assignment->value().world_size, 6u);

  // An agent of job b dies; its survivors re-rendezvous on the daemon; job a notices nothing.
  b[2].reset();
  b.pop_back();
  ASSERT_TRUE(run_until(
      io, [&] { return b[0]->count<RestartRequested>() && b[1]->count<RestartRequested>(); }));
  EXPECT_EQ(a[0]->events.size() + a[1]->events.size(), 0u);

  EXPECT_EQ(daemon.terminate(5s), 0);
  ASSERT_TRUE(run_until(
      io, [&] { return all([](TestNode& n) { return n.count<ConnectionLost>() > 0; }); }));
}

// Issue 25: the daemon, with its state in SQLite, is SIGKILLed twice at random moments of a
// 1,000-node round and started again on the same port and state directory each time. Every
// node must get exactly one assignment, all of the same round, with group ranks 0..999 each
// once. The seed is printed so that a failure can be replayed (DDPRUN_TEST_SEED).
//
// It found a bug (about 2 runs in 10 failed): a node whose join was recorded but whose answer
// the kill lost sent the join again, and the restored daemon took it for a restarted node and
// opened round 1, which the others never joined. The join's request id is now kept with the
// token (job_snapshot.h; JobRegistryRestoreTest is the deterministic case).
TEST(DaemonDurabilityTest, KilledAtRandomMomentsOfAThousandNodeRoundEachNodeIsAssignedOnce) {
  constexpr int kNodes = 1000;
  const unsigned seed = ::ddprun::testing::test_seed();
  SCOPED_TRACE("DDPRUN_TEST_SEED=" + std::to_string(seed));
  std::mt19937 random(seed);
  ddprun::testing::TempDir state;
  auto daemon = std::make_unique<Daemon>(std::vector<std::string>{"--state-dir", state.path()});
  const uint16_t port = daemon->port();
  boost::asio::io_context io;
  std::vector<std::unique_ptr<TestNode>> nodes;
  std::vector<int> assignments(kNodes, 0);
  for (int i = 0; i < kNodes; ++i) {
    ClientOptions o = node_options(port, "big", i);
    o.heartbeat_timeout = 60s;  // places are kept across the restarts
    // The helper's 50 ms keep-alive and 1 s attempt are for small rounds. A thousand clients
    // at 20 heartbeats a second, and handshakes given up after 1 s, overloaded a daemon under
    // ASan on a busy machine: abandoned handshakes were retried faster than it answered them,
    // and the round never closed within the test's time (seen twice in the sanitizer pass).
    o.keep_alive_interval = 1s;
    o.attempt_timeout = 10s;
    nodes.push_back(start_node(io, o));
  }
  ASSERT_TRUE(run_until(io, [&] {
    for (auto& n : nodes)
      if (!n->connected) return false;
    return true;
  }));
  for (int i = 0; i < kNodes; ++i) {
    JoinRequest r = join_request("node-" + std::to_string(i), kNodes, kNodes);
    r.job.heartbeat_timeout = 60s;
    // The helper's 2 s is for small rounds: after two restarts, 1,000 clients come back with
    // their reconnect backoff (up to 3 s each).
    r.job.join_timeout = 60s;
    nodes[i]->client->join(r, [&, i](Result<RoundAssignment> a) {
      ++assignments[i];
      nodes[i]->assignment = std::move(a);
    });
  }
  for (int kill = 0; kill < 2; ++kill) {
    // Somewhere in the round: a random number of the client loop's handlers after the joins.
    std::uniform_int_distribution<int> handlers(0, 3 * kNodes);
    for (int h = handlers(random); h > 0 && io.run_one_for(50ms) > 0; --h) {
    }
    int assigned_before = 0;
    for (auto& n : nodes) assigned_before += n->assignment.has_value();
    RecordProperty("assigned_at_kill_" + std::to_string(kill), assigned_before);
    daemon.reset();  // SIGKILL, by PID, and reaped
    daemon = std::make_unique<Daemon>(std::vector<std::string>{"--state-dir", state.path()}, false,
                                      0, port);
    ASSERT_EQ(daemon->port(), port) << daemon->text();
  }
  ASSERT_TRUE(run_until(
      io,
      [&] {
        for (auto& n : nodes)
          if (!n->assignment) return false;
        return true;
      },
      90s));
  std::set<uint32_t> ranks;
  std::set<uint64_t> rounds;
  for (int i = 0; i < kNodes; ++i) {
    EXPECT_EQ(assignments[i], 1) << "node " << i;
    ASSERT_TRUE(nodes[i]->assignment->ok()) << nodes[i]->assignment->error_message();
    const RoundAssignment& a = nodes[i]->assignment->value();
    ranks.insert(a.group_rank);
    rounds.insert(a.round);
    EXPECT_EQ(a.group_world_size, static_cast<uint32_t>(kNodes));
  }
  EXPECT_EQ(ranks.size(), static_cast<size_t>(kNodes)) << "a group rank was given twice";
  EXPECT_EQ(*ranks.rbegin(), static_cast<uint32_t>(kNodes - 1));
  EXPECT_EQ(rounds.size(), 1u) << "the nodes were assigned to different rounds";
}

// The value of an unlabelled counter in a Prometheus text body; nullopt when absent.
std::optional<double> counter_value(const std::string& body, const std::string& name) {
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return std::nullopt;
}

// Out of file descriptors, the daemon refuses newcomers one by one with an Error (a spare
// descriptor lets it accept and close each), does not spin on accept, and serves again as
// soon as connections close. Not spinning is counted, not timed: the accepts it tried while
// out of descriptors (its metric) are at most one per rest of the listener's pause.
TEST(DaemonTest, OutOfDescriptorsItRefusesNewcomersWithoutSpinningAndRecovers) {
  const uint16_t metrics_port = ddprun::testing::free_port_outside_ephemeral_range();
  const auto started = std::chrono::steady_clock::now();
  Daemon daemon({"--metrics-addr", "127.0.0.1", "--metrics-port", std::to_string(metrics_port)},
                false, /*max_fds=*/40);
  const uint16_t port = daemon.port();
  boost::asio::io_context raw_io;
  std::vector<std::unique_ptr<boost::asio::ip::tcp::socket>> raw;
  for (int i = 0; i < 80; ++i) {
    auto socket = std::make_unique<boost::asio::ip::tcp::socket>(raw_io);
    boost::system::error_code ec;
    socket->connect({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
    if (!ec) raw.push_back(std::move(socket));
  }
  // Every connection is either held (a session) or refused and closed; collect the refusals.
  std::string refusals;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  size_t closed = 0;
  std::vector<bool> done(raw.size(), false);
  while (std::chrono::steady_clock::now() < deadline && closed < raw.size() / 4) {
    for (size_t i = 0; i < raw.size(); ++i) {
      if (done[i]) continue;
      pollfd p{raw[i]->native_handle(), POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) continue;
      char buf[512];
      const ssize_t n = ::recv(raw[i]->native_handle(), buf, sizeof buf, 0);
      if (n > 0) refusals.append(buf, static_cast<size_t>(n));
      if (n <= 0) done[i] = true, ++closed;
    }
    pollfd any{raw.back()->native_handle(), POLLIN, 0};
    ::poll(&any, 1, 20);  // bounded wait for the next refusal
  }
  EXPECT_GE(closed, raw.size() / 4) << "the daemon accepted or refused too few connections";
  EXPECT_NE(refusals.find("out of file descriptors"), std::string::npos) << refusals;

  raw.clear();  // its sessions end and give their descriptors back
  boost::asio::io_context io;
  std::unique_ptr<TestNode> node;
  ASSERT_TRUE(run_until(
      io,
      [&] {
        if (node && node->connected && node->connected->ok()) return true;
        if (!node || node->connected) node = start_node(io, node_options(port, "after", 0));
        return false;
      },
      15s));

  // The count since the daemon started, against the most a resting loop could have tried in
  // that time on its one accepting socket (a spinning one: thousands).
  auto scrape = ddprun::testing::http_get("127.0.0.1", metrics_port, "/metrics");
  const auto wall = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(scrape.ok()) << scrape.status().message();
  const std::optional<double> tried =
      counter_value(scrape->body, "ddprun_rendezvous_accepts_out_of_descriptors_total");
  ASSERT_TRUE(tried.has_value()) << scrape->body;
  RecordProperty("accepts_while_out_of_descriptors", std::to_string(*tried));
  EXPECT_GE(*tried, 1.0) << "no accept found the daemon out of descriptors";
  EXPECT_LE(*tried, static_cast<double>(ddprun::testing::most_resting_accepts(
                        wall, ddprun::Listener::kDescriptorPause, 1)))
      << "accepts tried in " << std::chrono::duration_cast<Millis>(wall).count() << " ms";
  EXPECT_EQ(daemon.terminate(5s), 0);
}

TEST(DaemonTest, RejectsABusyPort) {
  Daemon first;
  const uint16_t port = first.port();
  const std::string cmd = std::string(DDP_RENDEZVOUS_BIN) + " --host 127.0.0.1 --port " +
                          std::to_string(port) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_NE(::pclose(p), 0);
  EXPECT_NE(out.find("bind"), std::string::npos) << out;
}

// The example file, with the command line's loopback address and port over the file's.
TEST(DaemonConfigTest, TheExampleConfigLoadsAndTheCommandLineWins) {
  Daemon daemon(
      {"--config", DDPRUN_SOURCE_DIR "/configs/daemon.yaml", "--host", "127.0.0.1", "--port", "0"});
  EXPECT_GT(daemon.port(), 0);
  EXPECT_EQ(daemon.terminate(5s), 0);
}

TEST(DaemonConfigTest, ABadFileIsRefusedNamingThePlaceAndKey) {
  const ddprun::testing::TempDir dir;
  const std::string path = dir / "daemon.yaml";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("port: 29400\nidle_timeout: soon\n", f);
    std::fclose(f);
  }
  Daemon daemon({"--config", path}, /*merge_stderr=*/true);
  EXPECT_EQ(daemon.wait_exit(10s), 2);
  EXPECT_NE(daemon.text().find(path + ":2:15: key 'idle_timeout'"), std::string::npos)
      << daemon.text();
}

// A state directory it cannot create is the machine's state, not a bad flag: exit 1 (it was 2,
// the usage code, which tells a supervisor to stop retrying a command line that is fine).
TEST(DaemonStateTest, AStateDirItCannotCreateIsNotAUsageError) {
  const ddprun::testing::TempDir dir;
  const std::string file = dir / "not-a-directory";
  {
    FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  Daemon daemon({"--state-dir", file + "/state"}, /*merge_stderr=*/true);
  EXPECT_EQ(daemon.wait_exit(10s), 1) << daemon.text();
  EXPECT_NE(daemon.text().find("cannot create the state directory " + file + "/state"),
            std::string::npos)
      << daemon.text();
}

TEST(DaemonFlagsTest, AnAbbreviatedFlagIsAcceptedAndABadOneIsNamed) {
  Daemon ok({"--idle-time", "5"});
  EXPECT_GT(ok.port(), 0);
  EXPECT_EQ(ok.terminate(5s), 0);
  Daemon bad({"--idle-timeout", "5", "--idle-timout", "5"}, /*merge_stderr=*/true);
  EXPECT_EQ(bad.wait_exit(10s), 2) << bad.text();
  EXPECT_NE(
      bad.text().find("unrecognized argument: --idle-timout (did you mean '--idle-timeout'?)"),
      std::string::npos)
      << bad.text();
}

TEST(DaemonStatusTest, ABadEndpointIsAUsageErrorThatSaysWhy) {
  const auto [code, out] = run_status({"--endpoint", "127.0.0.1:70000"});
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--endpoint: '127.0.0.1:70000': port 70000 is out of range (1-65535)"),
            std::string::npos)
      << out;
  const auto [help_code, help] = run_status({"--hel"});
  EXPECT_EQ(help_code, 0) << help;
  EXPECT_NE(help.find("--tls-server-name"), std::string::npos) << help;
}

TEST(DaemonStatusTest, ADaemonWithATokenAnswersOnlyAStatusQueryThatHasIt) {
  TestPki pki;
  const std::string token = pki.token("daemon", "0123456789abcdef0123456789abcdef");
  Daemon daemon({"--token-file", token});
  const std::string endpoint = "127.0.0.1:" + std::to_string(daemon.port());

  const auto [refused_code, refused] = run_status({"--endpoint", endpoint});
  EXPECT_EQ(refused_code, 1) << refused;
  EXPECT_NE(refused.find("authentication failed for the status query"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("--token-file"), std::string::npos) << refused;
  EXPECT_NE(refused.find(endpoint), std::string::npos) << refused;

  const auto [code, table] = run_status({"--endpoint", endpoint, "--token-file", token});
  EXPECT_EQ(code, 0) << table;
  EXPECT_EQ(table, "no jobs\n");

  const auto [bad_code, bad] = run_status({"--endpoint", endpoint, "--token-file", "/nonexistent"});
  EXPECT_EQ(bad_code, 2) << bad;
  EXPECT_NE(bad.find("--token-file"), std::string::npos) << bad;
  EXPECT_EQ(daemon.terminate(5s), 0);
}

TEST(DaemonStatusTest, StatusOverMutualTlsWithTheDaemonsToken) {
  TestPki pki;
  const std::string token = pki.token("daemon", "0123456789abcdef0123456789abcdef");
  Daemon daemon({"--token-file", token, "--tls-cert", pki.cert("server"), "--tls-key",
                 pki.key("server"), "--tls-client-ca", pki.cert("ca")});
  const std::string endpoint = "127.0.0.1:" + std::to_string(daemon.port());
  const auto [code, table] =
      run_status({"--endpoint", endpoint, "--token-file", token, "--tls-ca", pki.cert("ca"),
                  "--tls-cert", pki.cert("client"), "--tls-key", pki.key("client"),
                  "--tls-server-name", "localhost", "--json"});
  EXPECT_EQ(code, 0) << table;
  EXPECT_NE(table.find("\"jobs\": []"), std::string::npos) << table;

  const auto [plain_code, plain] = run_status({"--endpoint", endpoint, "--token-file", token});
  EXPECT_EQ(plain_code, 1) << plain;
  EXPECT_NE(plain.find("requires TLS"), std::string::npos) << plain;
  EXPECT_EQ(daemon.terminate(5s), 0);
}

}  // namespace
}  // namespace ddprun::rdzv::testing
