// A rank's request to take its node out of the job (issue 36), with real ddprun and Python
// workers, once per torch's Python (test_python.h): ddprun.exclude_node() stops the other
// ranks, and ddprun exits 69 without a restart, the request as the failure report's cause.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/integration/ddprun_fixture.h"
#include "tests/integration/test_files.h"

namespace ddprun::testing {
namespace {

constexpr int kNodeExcluded = 69;

class ExcludeNodeTest : public DdprunTest {
 protected:
  void SetUp() override {
    DdprunTest::SetUp();
    // The ddprun module from the source tree (python/ddprun), as the wheel installs it.
    env_["PYTHONPATH"] =
        (std::filesystem::path(worker("exclude_node.py")).parent_path() / "../../../python")
            .lexically_normal()
            .string();
  }
  bool ran(int restart, int rank) const {
    return std::filesystem::exists(
        out("attempt_" + std::to_string(restart) + "_" + std::to_string(rank)));
  }
};

TEST_F(ExcludeNodeTest, ARankAskingToExcludeItsNodeEndsItWith69AndTheReportNamesTheRequest) {
  const RunResult run = run_ddprun({"--nproc_per_node", "2", "--max_restarts", "3",
                                    worker("exclude_node.py"), "ECC errors on GPU 1", "1"});
  ASSERT_TRUE(ExitedWith(run, kNodeExcluded));
  EXPECT_TRUE(ran(0, 1));  // the rank that asked (rank 0 may be stopped before its marker)
  EXPECT_FALSE(ran(1, 1)) << "restarted:\n" << run.err;
  EXPECT_NE(run.err.find("cause     : rank 1 asked to exclude this node: ECC errors on GPU 1"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace ddprun::testing
