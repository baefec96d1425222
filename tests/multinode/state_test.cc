// ddp-rendezvous --state-dir with real processes: the daemon is killed (SIGKILL) while a
// 2-node job runs and started again on the same port and state directory. Within the window
// (heartbeat_timeout) the agents resume with their tokens: the workers run on untouched (same
// PIDs) and the job succeeds with restart count 0. A node that does not come back within the
// window is lost, as node loss is without a restart of the daemon. A damaged state database is
// refused with a message naming it, and left as it was.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class StateDaemonTest : public MultinodeTest {
 protected:
  void SetUp() override {
    MultinodeTest::SetUp();
    state_dir_ = temp().path() + "/state";
    port_ = free_port_outside_ephemeral_range();  // the daemon restarts on it
    endpoint_ = "127.0.0.1:" + std::to_string(port_);
  }

  // A daemon that is still running must shut down cleanly; it goes before the base teardown,
  // which would count it as a leftover process.
  void TearDown() override {
    if (daemon_) {
      daemon_->send_signal(SIGTERM);
      const RunResult end = finish(*daemon_, deadline_after(10s));
      EXPECT_TRUE(ExitedWith(end, 0)) << "ddp-rendezvous did not shut down cleanly";
      daemon_.reset();
    }
    MultinodeTest::TearDown();
  }

  std::unique_ptr<ChildProcess> launch_daemon() {
    ChildOptions options;
    options.executable = daemon_binary();
    options.args = {"--host",      "127.0.0.1", "--port",      std::to_string(port_),
                    "--state-dir", state_dir_,  "--log-level", "debug"};
    options.env = env_;
    options.cwd = temp().path();
    auto child = ChildProcess::start(options);
    if (!child) {
      ADD_FAILURE() << "starting ddp-rendezvous: " << child.error_message();
      return nullptr;
    }
    return std::move(child.value());
  }

  // Starts the daemon on port_ with state_dir_ and waits for its "listening" line.
  bool start_daemon() {
    daemon_ = launch_daemon();
    if (!daemon_) return false;
    if (!daemon_->wait_for_stdout("listening on 127.0.0.1:" + std::to_string(port_),
                                  deadline_after(10s))) {
      ADD_FAILURE() << "ddp-rendezvous did not come up; stderr: " << daemon_->stderr_text();
      return false;
    }
    return true;
  }

  void kill_daemon() {
    daemon_->send_signal(SIGKILL);
    const RunResult killed = finish(*daemon_, deadline_after(10s));
    ASSERT_TRUE(killed.exit.has_value());
    EXPECT_EQ(killed.exit->signal, SIGKILL);
    daemon_.reset();
  }

  NodeSpec node(int n, const std::string& nnodes, int nproc, const std::string& window,
                std::vector<std::string> hold_args) const {
    NodeSpec spec;
    spec.node = n;
    spec.nnodes = nnodes;
    spec.nproc_per_node = nproc;
    spec.endpoint = endpoint_;
    spec.job = "durable";
    spec.timeouts.heartbeat_timeout = window;
    spec.entry = {mn_worker("hold.py")};
    spec.entry.insert(spec.entry.end(), hold_args.begin(), hold_args.end());
    return spec;
  }

  std::map<std::string, std::string> worker_pids() const {
    std::map<std::string, std::string> pids;
    for (const auto& [name, m] : markers("run_n")) pids[name] = m["pid"].dump();
    return pids;
  }

  std::string state_dir_;
  uint16_t port_ = 0;
  std::string endpoint_;
  std::unique_ptr<ChildProcess> daemon_;
};

TEST_F(StateDaemonTest, DaemonKilledAndRestartedWithinTheWindowLeavesWorkersUntouched) {
  ASSERT_TRUE(start_daemon());
  make_fifo(out("release.fifo"));
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    nodes.push_back(start_node(node(n, "2", 2, "10", {"--release", out("release.fifo")})));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(40s)));
  const auto before = worker_pids();

  kill_daemon();
  ASSERT_TRUE(start_daemon());
  ASSERT_TRUE(daemon_->wait_for_stderr("restored job 'durable'", deadline_after(10s)))
      << daemon_->stderr_text();

  release("release.fifo", 4);  // the workers finish; their agents report to the new daemon
  const auto runs = finish_all(nodes, deadline_after(40s));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(ExitedWith(runs[i], 0)) << "node " << i + 1;
  // No worker was started again: the same four markers, written by the same processes.
  EXPECT_EQ(worker_pids(), before);
  for (const auto& [name, m] : markers("run_n")) {
    EXPECT_EQ(m["TORCHELASTIC_RESTART_COUNT"], "0") << name;
    EXPECT_EQ(m["WORLD_SIZE"], "4") << name;
  }
}

// The daemon dies while a round is open (one node of two has joined, its join committed): the
// restarted daemon keeps that node's place, the second node joins, and the round closes with
// both, the first keeping group rank 0.
TEST_F(StateDaemonTest, DaemonKilledDuringAnOpenRoundCarriesTheRoundOn) {
  ASSERT_TRUE(start_daemon());
  make_fifo(out("release.fifo"));
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  nodes.push_back(start_node(node(1, "2", 2, "10", {"--release", out("release.fifo")})));
  ASSERT_NE(nodes.back(), nullptr);
  // Joined, and the join recorded (its reply goes out only after that).
  ASSERT_TRUE(daemon_->wait_for_stderr("recorded job 'durable'", deadline_after(20s)))
      << daemon_->stderr_text();

  kill_daemon();
  ASSERT_TRUE(start_daemon());
  ASSERT_TRUE(daemon_->wait_for_stderr("restored job 'durable'", deadline_after(10s)))
      << daemon_->stderr_text();
  nodes.push_back(start_node(node(2, "2", 2, "10", {"--release", out("release.fifo")})));
  ASSERT_NE(nodes.back(), nullptr);
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(40s)));
  for (const auto& [name, m] : markers("run_n")) {
    EXPECT_EQ(m["WORLD_SIZE"], "4") << name;
    EXPECT_EQ(m["TORCHELASTIC_RESTART_COUNT"], "0") << name;
    if (m["node"] == "1") {
      EXPECT_EQ(m["GROUP_RANK"], "0") << name;
    }
  }
  release("release.fifo", 4);
  const auto runs = finish_all(nodes, deadline_after(40s));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(ExitedWith(runs[i], 0)) << "node " << i + 1;
}

// The daemon dies during a restart: a worker failed, the failure is recorded and the nodes are
// being told (one node has heard it; the other may not have, and joins of the next round may be
// in flight or recorded). The restarted daemon carries the restart on: each node learns the
// round ended (the push it missed, or the catch-up a restored node gets first), its join is
// sent again after its resume, and the next round runs every rank once with the one failure
// counted once.
TEST_F(StateDaemonTest, DaemonKilledDuringARestartCarriesTheRestartOn) {
  ASSERT_TRUE(start_daemon());
  for (int rank = 0; rank < 4; ++rank) make_fifo(out("ready_" + std::to_string(rank) + ".fifo"));
  make_fifo(out("release.fifo"));
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    NodeSpec spec = node(n, "2", 2, "10", {});
    spec.entry = {mn_worker("chaos.py"), "3", "3", out("release.fifo")};  // rank 3 exits 3 once
    spec.extra = {"--max_restarts", "2"};
    nodes.push_back(start_node(spec));
    ASSERT_NE(nodes.back(), nullptr);
  }
  // Either node hearing of the restart: the failure is recorded, the restart under way.
  const Deadline heard = deadline_after(40s);
  auto restart_heard = [&](ChildProcess& n) {  // reads what the node wrote, for 20 ms at most
    return n.wait_for_stderr("restarting (restart 1 of 2; 1 left)", deadline_after(20ms)) ||
           n.stderr_text().find("rendezvous: worker_failure") != std::string::npos;
  };
  while (!restart_heard(*nodes[0]) && !restart_heard(*nodes[1])) {
    ASSERT_LT(TestClock::now(), heard) << nodes[0]->stderr_text() << nodes[1]->stderr_text();
  }
  kill_daemon();
  ASSERT_TRUE(start_daemon());
  ASSERT_TRUE(daemon_->wait_for_stderr("restored job 'durable'", deadline_after(10s)))
      << daemon_->stderr_text();

  ASSERT_TRUE(wait_for_markers("run_n", 8, deadline_after(40s)));  // both rounds, 4 ranks each
  release("release.fifo", 4);
  const auto runs = finish_all(nodes, deadline_after(40s));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(ExitedWith(runs[i], 0)) << "node " << i + 1;
  size_t restarted = 0;
  for (const auto& [name, m] : markers("run_n")) {
    EXPECT_EQ(m["WORLD_SIZE"], "4") << name;
    const std::string count = m["TORCHELASTIC_RESTART_COUNT"];
    EXPECT_TRUE(count == "0" || count == "1") << name << ": restart count " << count;
    restarted += count == "1";
  }
  EXPECT_EQ(restarted, 4u);  // the next round ran every rank once
}

TEST_F(StateDaemonTest, NodeAbsentThroughTheWindowAfterARestartIsLost) {
  ASSERT_TRUE(start_daemon());
  // World 2 (one worker per node) waits; once node 2 is lost, node 1's world of 1 finishes.
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    nodes.push_back(start_node(node(n, "1:2", 1, "3", {"--exit-when-world", "1"})));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 2, deadline_after(40s)));

  kill_daemon();
  nodes[1]->send_signal(SIGKILL);  // node 2 will not come back
  finish(*nodes[1], deadline_after(10s));
  nodes.pop_back();
  ASSERT_TRUE(start_daemon());

  const auto runs = finish_all(nodes, deadline_after(40s));
  EXPECT_TRUE(ExitedWith(runs[0], 0)) << runs[0].describe();
  const auto alone = markers("run_n1_w1_");
  ASSERT_EQ(alone.size(), 1u) << runs[0].describe();
  // A lost member is not a worker failure: no restart is counted.
  EXPECT_EQ(alone.begin()->second["TORCHELASTIC_RESTART_COUNT"], "0");
  EXPECT_NE(daemon_->stderr_text().find("restored job 'durable'"), std::string::npos);
}

TEST_F(StateDaemonTest, DamagedStateDatabaseIsRefusedAndLeftAlone) {
  std::filesystem::create_directories(state_dir_);
  const std::string db = state_dir_ + "/rendezvous.db";
  const std::string garbage(8192, 'x');
  std::ofstream(db) << garbage;
  auto daemon = launch_daemon();
  ASSERT_NE(daemon, nullptr);
  const RunResult end = finish(*daemon, deadline_after(10s));
  EXPECT_TRUE(ExitedWith(end, 2)) << end.describe();
  EXPECT_NE(end.err.find("refusing the rendezvous state database " + db), std::string::npos)
      << end.err;
  EXPECT_EQ(end.out.find("listening"), std::string::npos) << "it served with no state";
  std::ifstream in(db);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), garbage);
}

}  // namespace
}  // namespace ddprun::testing
