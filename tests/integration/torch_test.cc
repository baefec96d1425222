// A real torch.distributed job: two gloo workers rendezvous through init_method="env://" on
// the MASTER_ADDR/MASTER_PORT ddprun gives them (the agent's store) and all_reduce a tensor.
// Imports torch in each worker (about a second each).
#include "tests/integration/ddprun_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class TorchAllReduceTest : public DdprunTest {
 protected:
  void expect_all_reduce(std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--nproc_per_node", "2", worker("allreduce.py")});
    const RunResult run = run_ddprun(flags, 80s);
    ASSERT_TRUE(ExitedWith(run, 0));
    // (0 + 1) + (1 + 1) on both ranks, in a world of 2.
    EXPECT_EQ(read_text_file(out("allreduce_0")), "3.0 2");
    EXPECT_EQ(read_text_file(out("allreduce_1")), "3.0 2");
  }
};

TEST_F(TorchAllReduceTest, GlooAllReduceStandalone) { expect_all_reduce({"--standalone"}); }

TEST_F(TorchAllReduceTest, GlooAllReducePlain) { expect_all_reduce({}); }

// pytorch#125743, #128096: a store hosted by rank 0's worker dies with it. The agent's does not.
TEST_F(TorchAllReduceTest, TheStoreOutlivesRankZero) {
  const RunResult run =
      run_ddprun({"--nproc_per_node", "2", worker("store_after_rank0.py")}, 80s);
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(read_text_file(out("store_after_rank0")), "ok still here 5");
}

}  // namespace
}  // namespace ddprun::testing
