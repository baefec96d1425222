// A worker failure on one node is the job's: with restarts left every node restarts its workers
// (TORCHELASTIC_RESTART_COUNT 1 everywhere); without, every node prints the same report (the
// root cause's rank and exit code) and exits with the failing worker's exit code.
#include <set>

#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kFailingRank = 3;  // node group rank 1, local rank 1
constexpr int kExitCode = 3;

class FailureTest : public MultinodeTest {
 protected:
  std::vector<RunResult> run_two_nodes(int max_restarts) {
    for (int rank = 0; rank < 4; ++rank) {
      if (rank != kFailingRank) make_fifo(out("ready_" + std::to_string(rank) + ".fifo"));
    }
    const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
    std::vector<std::unique_ptr<ChildProcess>> nodes;
    for (int n : {1, 2}) {
      NodeSpec spec;
      spec.node = n;
      spec.nnodes = "2";
      spec.endpoint = endpoint;
      spec.extra = {"--max_restarts", std::to_string(max_restarts)};
      spec.entry = {mn_worker("fail_once.py"), std::to_string(kFailingRank),
                    std::to_string(kExitCode)};
      nodes.push_back(start_node(spec));
      if (!nodes.back()) return {};
    }
    return finish_all(nodes, deadline_after(60s));
  }
};

TEST_F(FailureTest, WorkerFailureRestartsEveryNode) {
  const auto runs = run_two_nodes(1);
  ASSERT_EQ(runs.size(), 2u);
  ASSERT_TRUE(ExitedWith(runs[0], 0));
  ASSERT_TRUE(ExitedWith(runs[1], 0));
  // Every worker of both nodes ran again, with the job-wide restart count 1.
  const auto restarted = markers("run_");
  std::set<std::string> ranks;
  for (const auto& [name, m] : restarted) {
    if (m["TORCHELASTIC_RESTART_COUNT"] == "1") ranks.insert(m["RANK"].get<std::string>());
    EXPECT_NE(m["TORCHELASTIC_RESTART_COUNT"], "2") << name;
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"})) << runs[0].describe();
  EXPECT_EQ(markers("run_n1_w4_r1_").size(), 2u);
  EXPECT_EQ(markers("run_n2_w4_r1_").size(), 2u);
}

TEST_F(FailureTest, WithoutRestartsEveryNodeReportsTheSameRootCauseAndExitCode) {
  const auto runs = run_two_nodes(0);
  ASSERT_EQ(runs.size(), 2u);
  ASSERT_TRUE(ExitedWith(runs[0], kExitCode));
  ASSERT_TRUE(ExitedWith(runs[1], kExitCode));
  const std::string root0 = root_cause_section(runs[0].err);
  const std::string root1 = root_cause_section(runs[1].err);
  ASSERT_FALSE(root0.empty()) << runs[0].describe();
  EXPECT_EQ(root0, root1) << runs[1].describe();
  EXPECT_NE(root0.find("rank      : 3 (local_rank: 1)"), std::string::npos) << root0;
  EXPECT_NE(root0.find("exitcode  : 3 (pid: "), std::string::npos) << root0;
  EXPECT_NE(runs[0].err.find(mn_worker("fail_once.py") + " FAILED"), std::string::npos)
      << runs[0].err;
  EXPECT_NE(runs[1].err.find(mn_worker("fail_once.py") + " FAILED"), std::string::npos)
      << runs[1].err;
  EXPECT_TRUE(markers("run_n1_w4_r1_").empty()) << "restarted without restarts left";
}

}  // namespace
}  // namespace ddprun::testing
