// The ddp-rendezvous daemon as the endpoint: the rendezvous outlives every agent, so killing any
// node's agent (the first one, group rank 0, included: pytorch#67742) leaves the job to the
// survivors; and one daemon serves several jobs at once, isolated by --rdzv_id.
#include <csignal>
#include <set>

#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class DaemonTest : public MultinodeTest {
 protected:
  void SetUp() override {
    MultinodeTest::SetUp();
    daemon_ = start_daemon(&endpoint_);
    ASSERT_NE(daemon_, nullptr);
  }

  // The daemon must have survived everything the test did: SIGTERM starts its graceful
  // shutdown, which ends with exit 0. It goes before the base teardown, which would count it
  // as a leftover process.
  void TearDown() override {
    if (daemon_) {
      daemon_->send_signal(SIGTERM);
      const RunResult end = finish(*daemon_, deadline_after(std::chrono::seconds(10)));
      EXPECT_TRUE(ExitedWith(end, 0)) << "ddp-rendezvous did not survive the test";
      daemon_.reset();
    }
    MultinodeTest::TearDown();
  }

  NodeSpec node(int n, const std::string& nnodes, const std::string& job,
                std::vector<std::string> hold_args) const {
    NodeSpec spec;
    spec.node = n;
    spec.nnodes = nnodes;
    spec.endpoint = endpoint_;
    spec.job = job;
    spec.entry = {mn_worker("hold.py")};
    spec.entry.insert(spec.entry.end(), hold_args.begin(), hold_args.end());
    return spec;
  }

  std::unique_ptr<ChildProcess> daemon_;
  std::string endpoint_;
};

// The parameter: the group rank of the node whose agent is killed (0: the first to join, whose
// address workers use as MASTER_ADDR).
class DaemonKillTest : public DaemonTest, public ::testing::WithParamInterface<int> {};

TEST_P(DaemonKillTest, KilledAgentLeavesTheJobToTheSurvivors) {
  // Three nodes in the first round (it closes at MAX at once); workers finish only in a world
  // of 4, i.e. once two nodes are left.
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2, 3}) {
    NodeSpec spec = node(n, "1:3", "killjob", {"--exit-when-world", "4"});
    spec.timeouts.last_call_timeout = "20";
    nodes.push_back(start_node(spec));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 6, deadline_after(40s)));
  int victim = -1;  // index into nodes
  for (const auto& [name, m] : markers("run_n")) {
    ASSERT_EQ(m["WORLD_SIZE"], "6") << name;
    if (m["GROUP_RANK"] == std::to_string(GetParam()))
      victim = std::stoi(m["node"].get<std::string>()) - 1;
  }
  ASSERT_GE(victim, 0);

  nodes[victim]->send_signal(SIGKILL);
  const RunResult killed = finish(*nodes[victim], deadline_after(10s));
  ASSERT_TRUE(killed.exit.has_value());
  EXPECT_EQ(killed.exit->signal, SIGKILL);
  nodes[victim].reset();

  const auto runs = finish_all(nodes, deadline_after(40s));
  std::set<std::string> ranks;
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    ASSERT_TRUE(ExitedWith(runs[i], 0)) << "node " << i + 1;
    const auto after = markers("run_n" + std::to_string(i + 1) + "_w4_");
    ASSERT_EQ(after.size(), 2u) << runs[i].describe();
    for (const auto& [name, m] : after) {
      EXPECT_EQ(m["GROUP_WORLD_SIZE"], "2") << name;
      EXPECT_EQ(m["TORCHELASTIC_RESTART_COUNT"], "0") << name;
      ranks.insert(m["RANK"].get<std::string>());
    }
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
}

INSTANTIATE_TEST_SUITE_P(GroupRank, DaemonKillTest, ::testing::Values(0, 2),
                         [](const auto& info) { return "GroupRank" + std::to_string(info.param); });

TEST_F(DaemonTest, ServesTwoJobsAtOnceIsolated) {
  // Job "alpha": nodes 1 and 2, one worker each (world 2). Job "beta": nodes 3 and 4, two
  // workers each (world 4). Every worker holds until all six run, so the jobs overlap.
  make_fifo(out("release.fifo"));
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2, 3, 4}) {
    NodeSpec spec = node(n, "2", n <= 2 ? "alpha" : "beta", {"--release", out("release.fifo")});
    spec.nproc_per_node = n <= 2 ? 1 : 2;
    nodes.push_back(start_node(spec));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 6, deadline_after(40s)));
  release("release.fifo", 6);
  const auto runs = finish_all(nodes, deadline_after(30s));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ExitedWith(runs[i], 0)) << "node " << i + 1;

  std::map<std::string, std::set<std::string>> ranks_by_job;
  for (const auto& [name, m] : markers("run_n")) {
    const int n = std::stoi(m["node"].get<std::string>());
    const std::string job = n <= 2 ? "alpha" : "beta";
    EXPECT_EQ(m["TORCHELASTIC_RUN_ID"], job) << name;
    EXPECT_EQ(m["WORLD_SIZE"], n <= 2 ? "2" : "4") << name;
    EXPECT_EQ(m["GROUP_WORLD_SIZE"], "2") << name;
    ranks_by_job[job].insert(m["RANK"].get<std::string>());
  }
  EXPECT_EQ(ranks_by_job["alpha"], (std::set<std::string>{"0", "1"}));
  EXPECT_EQ(ranks_by_job["beta"], (std::set<std::string>{"0", "1", "2", "3"}));
}

}  // namespace
}  // namespace ddprun::testing
