// A real torch.distributed job: two gloo workers rendezvous through init_method="env://" on
// the MASTER_ADDR/MASTER_PORT ddprun gives them (the agent's store) and all_reduce a tensor;
// a restart; torch's own @record error files in the failure report. Runs once per torch
// (test_python.h). Imports torch in each worker (about a second each).
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
  const RunResult run = run_ddprun({"--nproc_per_node", "2", worker("store_after_rank0.py")}, 80s);
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_EQ(read_text_file(out("store_after_rank0")), "ok still here 5");
}

// A failed attempt restarts the whole group on a fresh store, and torch trains again.
TEST_F(TorchAllReduceTest, ARestartedGroupAllReducesAgain) {
  const RunResult run =
      run_ddprun({"--nproc_per_node", "2", "--max_restarts", "1", worker("torch_restart.py")}, 80s);
  ASSERT_TRUE(ExitedWith(run, 0));
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(
          read_text_file(out("allreduce_" + std::to_string(rank) + "_" + std::to_string(attempt))),
          "3.0 2")
          << "rank " << rank << ", attempt " << attempt;
    }
  }
}

// torch's errors.record writes the exception into TORCHELASTIC_ERROR_FILE; the report's root
// cause is that rank and its message, not the rank the agent had to stop.
TEST_F(TorchAllReduceTest, RecordsErrorFileIsTheRootCause) {
  const RunResult run = run_ddprun({"--nproc_per_node", "2", worker("torch_record.py")}, 80s);
  ASSERT_TRUE(ExitedWith(run, 1));
  const auto at = run.err.find("Root Cause (first observed failure):");
  ASSERT_NE(at, std::string::npos) << run.err;
  const std::string root = run.err.substr(at);
  EXPECT_NE(root.find("rank      : 1"), std::string::npos) << root;
  EXPECT_NE(root.find("rank 1 found a bad batch"), std::string::npos) << root;
  EXPECT_NE(root.find("ValueError"), std::string::npos) << root;
}

}  // namespace
}  // namespace ddprun::testing
