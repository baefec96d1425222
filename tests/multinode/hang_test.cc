// Hang detection across nodes: two nodes of two ranks, global rank 3 (node 2, local rank 1)
// stops first while every other rank waits for it without heartbeats either. Each node's agent
// shares its ranks' progress through the rendezvous; the report names rank 3 on node 2 on
// every node, and the group restarts.
#include <csignal>

#include <regex>
#include <set>

#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class HangTest : public MultinodeTest {
 protected:
  std::vector<RunResult> run_pair(const std::string& max_restarts) {
    const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
    std::vector<std::unique_ptr<ChildProcess>> nodes;
    for (int n : {1, 2}) {
      NodeSpec spec;
      spec.node = n;
      spec.nnodes = "2";
      spec.endpoint = endpoint;
      spec.extra = {"--hang_timeout", "1", "--max_restarts", max_restarts};
      spec.entry = {mn_worker("hang.py"), "3", "5"};
      nodes.push_back(start_node(spec));
      if (!nodes.back()) return {};
    }
    return finish_all(nodes, deadline_after(60s));
  }
};

TEST_F(HangTest, EveryNodeNamesTheRankThatStoppedFirstAndItsNode) {
  const auto runs = run_pair("0");
  ASSERT_EQ(runs.size(), 2u);
  // Rank 3 is the second local rank of whichever node joined second: both nodes must name it
  // and the same node.
  const std::regex culprit(
      R"(rank 3 \(node (127\.0\.0\.[12]:\d+), local_rank 1\) hung: no progress for)");
  std::set<std::string> named;
  for (const RunResult& run : runs) {
    ASSERT_TRUE(ExitedWith(run, 128 + SIGABRT));
    const std::string cause = root_cause_section(run.err);
    std::smatch match;
    ASSERT_TRUE(std::regex_search(cause, match, culprit)) << run.err;
    named.insert(match[1]);
    EXPECT_NE(cause.find("after step 5"), std::string::npos) << cause;
  }
  EXPECT_EQ(named.size(), 1u) << "the nodes named different culprits";
}

TEST_F(HangTest, AHungRankRestartsTheJobOnEveryNode) {
  const auto runs = run_pair("1");
  ASSERT_EQ(runs.size(), 2u);
  for (const RunResult& run : runs) ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(markers("finished_").size(), 4u);
}

}  // namespace
}  // namespace ddprun::testing
