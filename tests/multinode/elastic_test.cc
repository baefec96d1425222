// Elastic membership over the c10d backend, the rendezvous server hosted in-process by the node
// whose --local_addr is the endpoint's host (node 1, 127.0.0.1): a round that closes at
// last_call_timeout with fewer than MAX nodes, scale-up while running, a node killed with
// SIGKILL mid-run, a node gone silent (SIGSTOP: a partition that leaves its TCP connection
// open), and too few nodes at join_timeout.
#include <csignal>
#include <set>

#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class ElasticTest : public MultinodeTest {
 protected:
  void SetUp() override {
    MultinodeTest::SetUp();
    endpoint_ = "127.0.0.1:" + std::to_string(free_port());
  }

  // A node of this job running hold.py with `hold_args`.
  NodeSpec node(int n, const std::string& nnodes, std::vector<std::string> hold_args) const {
    NodeSpec spec;
    spec.node = n;
    spec.nnodes = nnodes;
    spec.endpoint = endpoint_;
    spec.entry = {mn_worker("hold.py")};
    spec.entry.insert(spec.entry.end(), hold_args.begin(), hold_args.end());
    return spec;
  }

  // Starts nodes 1 and 2, whose workers finish only in a world of 2 (once a node runs alone),
  // and waits until both run the first round, a world of 4. The round closes at MAX at once;
  // the long last call only guards against node 2 starting late on a busy machine. Node 1
  // hosts the server, so node 2 is the one a test takes away.
  ::testing::AssertionResult start_pair(std::unique_ptr<ChildProcess>& node1,
                                        std::unique_ptr<ChildProcess>& node2) {
    NodeSpec spec1 = node(1, "1:2", {"--exit-when-world", "2"});
    NodeSpec spec2 = node(2, "1:2", {"--exit-when-world", "2"});
    spec1.timeouts.last_call_timeout = spec2.timeouts.last_call_timeout = "20";
    node1 = start_node(spec1);
    node2 = start_node(spec2);
    if (!node1 || !node2) return ::testing::AssertionFailure() << "a node did not start";
    if (!wait_for_markers("run_n", 4, deadline_after(30s))) {
      return ::testing::AssertionFailure() << finish(*node1, deadline_after(1s)).describe();
    }
    if (markers("run_n1_w4_r0_").size() != 2 || markers("run_n2_w4_r0_").size() != 2) {
      return ::testing::AssertionFailure() << "the first round was not a world of 4 on 2 nodes";
    }
    return ::testing::AssertionSuccess();
  }

  // Node 1 ended well after running again alone (a world of 2), without counting a restart.
  void expect_survivor_ran_alone(const RunResult& survivor) {
    ASSERT_TRUE(ExitedWith(survivor, 0));
    const auto after = markers("run_n1_w2_");
    ASSERT_EQ(after.size(), 2u) << survivor.describe();
    for (const auto& [name, m] : after) {
      EXPECT_EQ(m["GROUP_WORLD_SIZE"], "1") << name;
      EXPECT_EQ(m["RANK"], m["LOCAL_RANK"]) << name;
      EXPECT_EQ(m["TORCHELASTIC_RESTART_COUNT"], "0") << name << ": a lost node is not a restart";
    }
    EXPECT_TRUE(markers("run_n2_w2_").empty());
  }

  std::string endpoint_;
};

TEST_F(ElasticTest, OneNodeOfOneToTwoProceedsAfterLastCall) {
  NodeSpec spec = node(1, "1:2", {"--exit-when-world", "2"});
  spec.timeouts.last_call_timeout = "250ms";
  auto node1 = start_node(spec);
  ASSERT_NE(node1, nullptr);
  const RunResult run = finish(*node1, deadline_after(30s));
  ASSERT_TRUE(ExitedWith(run, 0));
  const auto runs = markers("run_");
  ASSERT_EQ(runs.size(), 2u) << run.describe();
  for (int local = 0; local < 2; ++local) {
    const auto& m = runs.at("run_n1_w2_r0_l" + std::to_string(local));
    EXPECT_EQ(m["RANK"], std::to_string(local));
    EXPECT_EQ(m["GROUP_RANK"], "0");
    EXPECT_EQ(m["GROUP_WORLD_SIZE"], "1");
  }
}

TEST_F(ElasticTest, ScaleUpRestartsRunningWorkersIntoTwoNodeRoundWithoutCountingARestart) {
  // Node 1 runs alone (world 2) until node 2 joins; its workers finish only in a world of 4.
  NodeSpec spec1 = node(1, "1:2", {"--exit-when-world", "4"});
  spec1.timeouts.last_call_timeout = "250ms";
  auto node1 = start_node(spec1);
  ASSERT_NE(node1, nullptr);
  ASSERT_TRUE(wait_for_markers("run_n1_w2_r0_", 2, deadline_after(30s)))
      << finish(*node1, deadline_after(1s)).describe();

  NodeSpec spec2 = node(2, "1:2", {"--exit-when-world", "4"});
  spec2.timeouts.last_call_timeout = "250ms";
  auto node2 = start_node(spec2);
  ASSERT_NE(node2, nullptr);
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  nodes.push_back(std::move(node1));
  nodes.push_back(std::move(node2));
  const auto runs = finish_all(nodes, deadline_after(40s));
  ASSERT_TRUE(ExitedWith(runs[0], 0));
  ASSERT_TRUE(ExitedWith(runs[1], 0));

  // Both nodes ran a world of 4, with the restart count still 0: scale-up is not a restart.
  const auto big = markers("run_");
  std::set<std::string> ranks;
  for (int n : {1, 2}) {
    for (int local = 0; local < 2; ++local) {
      const std::string name = "run_n" + std::to_string(n) + "_w4_r0_l" + std::to_string(local);
      ASSERT_EQ(big.count(name), 1u) << name << " missing\n" << runs[0].describe();
      EXPECT_EQ(big.at(name)["GROUP_WORLD_SIZE"], "2");
      ranks.insert(big.at(name)["RANK"].get<std::string>());
    }
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  for (const auto& [name, m] : big) {
    EXPECT_EQ(m["TORCHELASTIC_RESTART_COUNT"], "0") << name;
  }
}

TEST_F(ElasticTest, KilledNodeMakesSurvivorsReRendezvousAndFinish) {
  std::unique_ptr<ChildProcess> node1, node2;
  ASSERT_TRUE(start_pair(node1, node2));

  node2->send_signal(SIGKILL);
  const RunResult killed = finish(*node2, deadline_after(10s));
  ASSERT_TRUE(killed.exit.has_value());
  EXPECT_EQ(killed.exit->signal, SIGKILL);
  expect_survivor_ran_alone(finish(*node1, deadline_after(40s)));
}

TEST_F(ElasticTest, SilentNodeIsDroppedAtHeartbeatTimeoutAndEndsItsWorkersWhenItWakes) {
  // As above, but node 2's agent is stopped instead of killed: its connection stays open and
  // its workers keep running, so only the missing heartbeats tell the server. The survivor
  // must go on alone; the partitioned agent, once it runs again, must find the job gone, stop
  // its stale workers and exit non-zero rather than hang (the teardown checks for orphans).
  std::unique_ptr<ChildProcess> node1, node2;
  ASSERT_TRUE(start_pair(node1, node2));

  node2->send_signal(SIGSTOP);
  const RunResult survivor = finish(*node1, deadline_after(40s));
  node2->send_signal(SIGCONT);
  expect_survivor_ran_alone(survivor);

  const RunResult woken = finish(*node2, deadline_after(30s));
  ASSERT_TRUE(woken.exit.has_value()) << "the partitioned node hung after waking";
  EXPECT_EQ(woken.exit->code, 75) << woken.describe();  // it lost its rendezvous
  EXPECT_NE(woken.err.find("lost the rendezvous server"), std::string::npos) << woken.describe();
}

// Issue 23's spares, the bug first: nodes 1 and 2 fill a job of MIN = MAX = 2 nodes, node 3
// starts and waits; node 2 is killed. Node 3 used to wait forever beside node 2's empty place
// (and node 1 with it). Now it takes node 2's group rank (0 or 1: whichever node 2 joined
// with) and the job runs again at once.
TEST_F(ElasticTest, ASpareWaitingWhileTheJobIsFullTakesALostNodesGroupRank) {
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    NodeSpec spec = node(n, "2", {"--exit-when-world", "99"});  // run until stopped
    spec.timeouts.last_call_timeout = "20";                     // only a full round closes
    nodes.push_back(start_node(spec));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(60s)))
      << finish(*nodes[0], deadline_after(1s)).describe();
  NodeSpec spare = node(3, "2", {"--exit-when-world", "99"});
  spare.timeouts.last_call_timeout = "20";
  nodes.push_back(start_node(spare));
  ASSERT_NE(nodes.back(), nullptr);
  // The spare is known to the server before the loss: `ddp-rendezvous status` lists it.
  bool waiting = false;
  const Deadline deadline = deadline_after(30s);
  while (!waiting && TestClock::now() < deadline) {
    ChildOptions status;
    status.executable = daemon_binary();
    status.args = {"status", "--endpoint", endpoint_};
    status.env = env_;
    auto child = ChildProcess::start(status);
    ASSERT_TRUE(child) << child.error_message();
    const RunResult table = finish(**child, deadline_after(10s));
    waiting = table.out.find("standby") != std::string::npos;  // polled: nothing pushes this
  }
  ASSERT_TRUE(waiting) << "node 3 never showed as waiting";

  // Which group rank node 2 holds depends on which of nodes 1 and 2 joined first.
  const auto lost = markers("run_n2_w4_");
  ASSERT_FALSE(lost.empty());
  const auto lost_rank = lost.begin()->second["GROUP_RANK"];
  nodes[1]->send_signal(SIGKILL);
  (void)finish(*nodes[1], deadline_after(10s));
  // Node 3's workers run in a world of 4 in node 2's old place, with node 1.
  ASSERT_TRUE(wait_for_markers("run_n3_w4_", 2, deadline_after(60s)))
      << finish(*nodes[0], deadline_after(1s)).describe();
  for (const auto& [name, m] : markers("run_n3_w4_")) {
    EXPECT_EQ(m["GROUP_RANK"], lost_rank) << name << ": not the lost node's group rank";
    EXPECT_EQ(m["TORCHELASTIC_RESTART_COUNT"], "0") << name << ": a lost node is no restart";
  }
  for (int n : {0, 2}) nodes[n]->send_signal(SIGTERM);
  for (int n : {0, 2}) {
    const RunResult end = finish(*nodes[n], deadline_after(30s));
    EXPECT_TRUE(ExitedWith(end, 128 + SIGTERM)) << end.describe();
  }
}

// Issue 23: a node that fails its health check stays out (exit 69); the others go on without it.
TEST_F(ElasticTest, ANodeFailingItsHealthCheckStaysOutAndTheOthersGoOn) {
  NodeSpec healthy = node(1, "1:2", {"--exit-when-world", "2"});
  healthy.extra = {"--health_check", "exit 0"};
  NodeSpec sick = node(2, "1:2", {"--exit-when-world", "2"});
  sick.extra = {"--health_check", "echo 'scratch file system full' >&2; exit 1"};
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  nodes.push_back(start_node(healthy));
  nodes.push_back(start_node(sick));
  ASSERT_NE(nodes[0], nullptr);
  ASSERT_NE(nodes[1], nullptr);
  const auto runs = finish_all(nodes, deadline_after(40s));
  ASSERT_TRUE(ExitedWith(runs[1], 69)) << runs[1].describe();
  EXPECT_NE(runs[1].err.find("scratch file system full"), std::string::npos) << runs[1].err;
  expect_survivor_ran_alone(runs[0]);
  EXPECT_TRUE(markers("run_n2_").empty()) << "the sick node started workers";
}

// With --health_check_interval the check also runs while the workers do: node 2 turns sick
// mid-run, stops its workers and leaves (exit 69); node 1 goes on alone, no restart used.
TEST_F(ElasticTest, ANodeThatTurnsSickWhileRunningLeavesAndTheOthersGoOn) {
  std::unique_ptr<ChildProcess> node1, node2;
  NodeSpec spec1 = node(1, "1:2", {"--exit-when-world", "2"});
  NodeSpec spec2 = node(2, "1:2", {"--exit-when-world", "2"});
  spec1.timeouts.last_call_timeout = spec2.timeouts.last_call_timeout = "20";
  spec2.extra = {"--health_check", R"(test ! -e "$DDPRUN_TEST_OUT/sick")",
                 "--health_check_interval", "0.2"};
  node1 = start_node(spec1);
  node2 = start_node(spec2);
  ASSERT_NE(node1, nullptr);
  ASSERT_NE(node2, nullptr);
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(30s)))
      << finish(*node1, deadline_after(1s)).describe();
  write_text_file(out("sick"), "ECC\n");
  const RunResult sick = finish(*node2, deadline_after(30s));
  ASSERT_TRUE(ExitedWith(sick, 69)) << sick.describe();
  EXPECT_NE(sick.err.find("this node failed its health check: it exited with status 1"),
            std::string::npos)
      << sick.err;
  // The report's root cause is the check, not a worker it stopped.
  EXPECT_NE(root_cause_section(sick.err).find("cause     : this node failed its health check"),
            std::string::npos)
      << sick.err;
  expect_survivor_ran_alone(finish(*node1, deadline_after(40s)));
}

TEST_F(ElasticTest, TooFewNodesFailAtJoinTimeoutWithAClearMessage) {
  NodeSpec spec = node(1, "2", {"--exit-when-world", "4"});
  spec.timeouts.join_timeout = "1";
  auto node1 = start_node(spec);
  ASSERT_NE(node1, nullptr);
  const RunResult run = finish(*node1, deadline_after(30s));
  ASSERT_TRUE(run.exit.has_value()) << "no end at join_timeout\n" << run.describe();
  EXPECT_EQ(run.exit->signal, 0) << run.describe();
  EXPECT_NE(run.exit->code, 0) << run.describe();
  EXPECT_NE(run.err.find("join_timeout"), std::string::npos) << run.describe();
  EXPECT_TRUE(markers("run_").empty()) << "workers started without a round";
}

}  // namespace
}  // namespace ddprun::testing
