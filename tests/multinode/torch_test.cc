// Real torch.distributed jobs across nodes: every worker runs init_process_group("gloo",
// init_method="env://") and an all_reduce of RANK + 1. Every rank must see the sum over the
// whole world and the same WORLD_SIZE; RANKs must be distinct, and contiguous per node
// (RANK = GROUP_RANK × nproc_per_node + LOCAL_RANK). Over c10d (the server hosted by node 1)
// with 2 and 4 nodes, and over the static backend (--node_rank, a shared --master_port).
#include <set>

#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kNproc = 2;

class TorchTest : public MultinodeTest {
 protected:
  // Checks the allreduce_ markers of a job of `nodes` nodes × kNproc workers.
  void expect_all_reduced(int nodes) {
    const int world = nodes * kNproc;
    const auto results = markers("allreduce_");
    ASSERT_EQ(results.size(), static_cast<std::size_t>(world));
    std::set<int> ranks, group_ranks;
    for (const auto& [name, m] : results) {
      const int rank = std::stoi(m["RANK"].get<std::string>());
      const int local = std::stoi(m["LOCAL_RANK"].get<std::string>());
      const int group = std::stoi(m["GROUP_RANK"].get<std::string>());
      EXPECT_EQ(m["sum"].get<double>(), world * (world + 1) / 2.0) << name;
      EXPECT_EQ(m["WORLD_SIZE"], std::to_string(world)) << name;
      EXPECT_EQ(m["dist_world_size"].get<int>(), world) << name;
      EXPECT_EQ(m["dist_rank"].get<int>(), rank) << name;
      EXPECT_EQ(m["GROUP_WORLD_SIZE"], std::to_string(nodes)) << name;
      EXPECT_EQ(rank, group * kNproc + local) << name << ": ranks not contiguous per node";
      ranks.insert(rank);
      if (local == 0) group_ranks.insert(group);
    }
    EXPECT_EQ(ranks.size(), static_cast<std::size_t>(world)) << "duplicate RANKs";
    EXPECT_EQ(group_ranks.size(), static_cast<std::size_t>(nodes)) << "duplicate GROUP_RANKs";
    if (!ranks.empty()) {
      EXPECT_EQ(*ranks.begin(), 0);
      EXPECT_EQ(*ranks.rbegin(), world - 1);
    }
  }

  void run_c10d(int nodes) {
    const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
    std::vector<std::unique_ptr<ChildProcess>> children;
    for (int n = 1; n <= nodes; ++n) {
      NodeSpec spec;
      spec.node = n;
      spec.nnodes = std::to_string(nodes);
      spec.nproc_per_node = kNproc;
      spec.endpoint = endpoint;
      spec.entry = {mn_worker("allreduce.py")};
      children.push_back(start_node(spec));
      ASSERT_NE(children.back(), nullptr);
    }
    const auto runs = finish_all(children, deadline_after(120s));
    for (int n = 0; n < nodes; ++n) ASSERT_TRUE(ExitedWith(runs[n], 0)) << "node " << n + 1;
    expect_all_reduced(nodes);
  }
};

TEST_F(TorchTest, GlooAllReduceOnTwoNodesOverC10d) { run_c10d(2); }

TEST_F(TorchTest, GlooAllReduceOnFourNodesOverC10d) { run_c10d(4); }

TEST_F(TorchTest, GlooAllReduceOnTwoNodesOverStaticRendezvous) {
  const std::string master_port = std::to_string(free_port());
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int rank = 0; rank < 2; ++rank) {
    children.push_back(start_node_args(
        rank + 1, {"--nnodes", "2", "--node_rank", std::to_string(rank), "--nproc_per_node",
                   std::to_string(kNproc), "--master_addr", "127.0.0.1", "--master_port",
                   master_port, mn_worker("allreduce.py")}));
    ASSERT_NE(children.back(), nullptr);
  }
  const auto runs = finish_all(children, deadline_after(120s));
  ASSERT_TRUE(ExitedWith(runs[0], 0));
  ASSERT_TRUE(ExitedWith(runs[1], 0));
  expect_all_reduced(2);
}

}  // namespace
}  // namespace ddprun::testing
