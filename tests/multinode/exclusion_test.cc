// Bad nodes kept out (issue 36), with real agents: three nodes for a job of two, so that one
// waits as a spare. Node 2 is bad: its workers fail every attempt (--node_failure_limit), or a
// rank of it asks to exclude it (ddprun.exclude_node). Node 2 leaves the job (exit 69), the
// waiting spare takes its place, and the job finishes on nodes 1 and 3 (exit 0).
#include <csignal>
#include <filesystem>

#include "tests/integration/test_files.h"
#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class ExclusionTest : public MultinodeTest {
 protected:
  void SetUp() override {
    MultinodeTest::SetUp();
    endpoint_ = "127.0.0.1:" + std::to_string(free_port());
    env_["PYTHONPATH"] =
        (std::filesystem::path(mn_worker("bad_node.py")).parent_path() / "../../../python")
            .lexically_normal()
            .string();
    make_fifo(out("release.fifo"));
  }

  // Node `n` of a job of exactly two nodes, node 2 bad in `mode`. A round closes only when full.
  NodeSpec node(int n, const std::string& mode) const {
    NodeSpec spec;
    spec.node = n;
    spec.nnodes = "2";
    spec.endpoint = endpoint_;
    spec.timeouts.last_call_timeout = "20";
    spec.extra = {"--max_restarts", "5", "--node_failure_limit", "2", "--node_failure_window", "3"};
    spec.entry = {mn_worker("bad_node.py"), "--bad", "2", "--mode", mode};
    return spec;
  }

  // Starts node 3 and waits until the rendezvous lists it as waiting (a spare).
  ::testing::AssertionResult start_spare(std::vector<std::unique_ptr<ChildProcess>>& nodes,
                                         const std::string& mode) {
    nodes.push_back(start_node(node(3, mode)));
    if (!nodes.back()) return ::testing::AssertionFailure() << "node 3 did not start";
    return wait_for_standby_node(endpoint_, deadline_after(30s));
  }

  // Nodes 1 and 3 finished the job together; node 2 left with exit 69.
  void expect_spare_finished(const std::vector<RunResult>& runs) {
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_TRUE(ExitedWith(runs[0], 0)) << runs[0].describe();
    EXPECT_TRUE(ExitedWith(runs[1], 69)) << runs[1].describe();
    EXPECT_TRUE(ExitedWith(runs[2], 0)) << runs[2].describe();
    EXPECT_EQ(markers("run_n3_w4_").size(), 2u) << "the spare never ran in a world of 4";
  }

  std::string endpoint_;
};

TEST_F(ExclusionTest, ANodeWhoseWorkersFailEveryAttemptIsReplacedByTheWaitingSpare) {
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    nodes.push_back(start_node(node(n, "fail")));
    ASSERT_NE(nodes.back(), nullptr);
  }
  // Node 2 failed the first attempt; its second attempt waits for the release.
  ASSERT_TRUE(wait_for_markers("run_n2_w4_r1_", 2, deadline_after(60s)))
      << finish(*nodes[1], deadline_after(1s)).describe();
  ASSERT_TRUE(start_spare(nodes, "fail"));
  release("release.fifo", 2);
  const auto runs = finish_all(nodes, deadline_after(60s));
  expect_spare_finished(runs);
  EXPECT_NE(runs[1].err.find("this node's workers were the root cause of 2 of the job's last 2 "
                             "failures: leaving the job so that a spare can take its place"),
            std::string::npos)
      << runs[1].err;
  EXPECT_TRUE(markers("run_n2_w4_r2_").empty()) << "node 2 ran a third attempt";
}

TEST_F(ExclusionTest, ARanksExcludeRequestBringsTheSpareIn) {
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    nodes.push_back(start_node(node(n, "exclude")));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n2_w4_r0_", 2, deadline_after(60s)))
      << finish(*nodes[1], deadline_after(1s)).describe();
  ASSERT_TRUE(start_spare(nodes, "exclude"));
  release("release.fifo", 1);
  const auto runs = finish_all(nodes, deadline_after(60s));
  expect_spare_finished(runs);
  EXPECT_NE(runs[1].err.find("asked to exclude this node: ECC errors on GPU 1"), std::string::npos)
      << runs[1].err;
  for (const auto& [name, m] : markers("run_n3_w4_")) {
    EXPECT_EQ(m["TORCHELASTIC_RESTART_COUNT"], "0") << name << ": a node that leaves is no restart";
  }
}

// With ddp-rendezvous as the endpoint, the host of a node that left unfit stays out of the
// daemon's next jobs (its cool-down, 1 h by default): its agent's join is refused, naming the
// reason and until when, and it exits 69 without starting a worker; `status` lists the host;
// once an operator releases it, the host runs a job again.
TEST_F(ExclusionTest, TheDaemonKeepsTheHostOutOfItsNextJobUntilReleased) {
  std::string daemon_endpoint;
  auto daemon = start_daemon(&daemon_endpoint);
  ASSERT_NE(daemon, nullptr);
  auto job_on_node_2 = [&](const std::string& job, const std::string& bad) {
    NodeSpec spec = node(2, "exclude");
    spec.nnodes = "1";
    spec.endpoint = daemon_endpoint;
    spec.job = job;
    spec.entry = {mn_worker("bad_node.py"), "--bad", bad, "--mode", "exclude"};
    return start_node(spec);
  };
  auto daemon_command = [&](std::vector<std::string> args) {
    ChildOptions options;
    options.executable = daemon_binary();
    options.args = std::move(args);
    options.args.insert(options.args.end(), {"--endpoint", daemon_endpoint});
    options.env = env_;
    auto child = ChildProcess::start(options);
    EXPECT_TRUE(child) << child.error_message();
    return child ? finish(**child, deadline_after(20s)) : RunResult{};
  };

  auto first = job_on_node_2("first", "2");
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(wait_for_markers("run_n2_w2_r0_", 2, deadline_after(60s)))
      << finish(*first, deadline_after(1s)).describe();
  release("release.fifo", 1);
  const RunResult excluded = finish(*first, deadline_after(60s));
  ASSERT_TRUE(ExitedWith(excluded, 69)) << excluded.describe();

  auto refused_run = job_on_node_2("second", "9");
  ASSERT_NE(refused_run, nullptr);
  const RunResult refused = finish(*refused_run, deadline_after(60s));
  EXPECT_TRUE(ExitedWith(refused, 69)) << refused.describe();
  EXPECT_NE(refused.err.find("node host 127.0.0.2 is kept out of this server's jobs until "),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("asked to exclude this node: ECC errors on GPU 1"), std::string::npos)
      << refused.err;
  EXPECT_TRUE(markers("run_n2_w2_r0_").size() == 2u) << "a refused node started workers";

  const RunResult table = daemon_command({"status"});
  EXPECT_TRUE(ExitedWith(table, 0)) << table.describe();
  EXPECT_NE(table.out.find("127.0.0.2"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("ECC errors on GPU 1"), std::string::npos) << table.out;
  const RunResult released = daemon_command({"release", "127.0.0.2"});
  EXPECT_TRUE(ExitedWith(released, 0)) << released.describe();

  auto third = job_on_node_2("third", "9");
  ASSERT_NE(third, nullptr);
  const RunResult ran = finish(*third, deadline_after(60s));
  EXPECT_TRUE(ExitedWith(ran, 0)) << ran.describe();

  daemon->send_signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(finish(*daemon, deadline_after(10s)), 0));
}

}  // namespace
}  // namespace ddprun::testing
