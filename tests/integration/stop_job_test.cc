// Failures that must not be restarted (issue 36), with real ddprun and Python workers: a rank's
// ddprun.stop_job(), and --max_no_progress_restarts over the steps the workers report. Both end
// the job at once with exit 79 ("do not requeue") and the reason in the failure report.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/integration/ddprun_fixture.h"
#include "tests/integration/test_files.h"

namespace ddprun::testing {
namespace {

constexpr int kDoNotRequeue = 79;

class StopJobTest : public DdprunTest {
 protected:
  void SetUp() override {
    DdprunTest::SetUp();
    // The ddprun module from the source tree (python/ddprun), as the wheel installs it.
    env_["PYTHONPATH"] =
        (std::filesystem::path(worker("stop_job.py")).parent_path() / "../../../python")
            .lexically_normal()
            .string();
  }
  bool ran(int restart, int rank = 0) const {
    return std::filesystem::exists(
        out("attempt_" + std::to_string(restart) + "_" + std::to_string(rank)));
  }
};

TEST_F(StopJobTest, ARankCallingStopJobEndsTheJobWithoutARestartExit79) {
  const RunResult run = run_ddprun({"--nproc_per_node", "2", "--max_restarts", "3",
                                    worker("stop_job.py"), "stop", "NaN loss at step 1200"});
  ASSERT_TRUE(ExitedWith(run, kDoNotRequeue));
  EXPECT_TRUE(ran(0, 0));
  EXPECT_FALSE(ran(1, 0)) << "restarted:\n" << run.err;
  EXPECT_NE(run.err.find("not restarted: rank 0 asked to stop the job: NaN loss at step 1200"),
            std::string::npos)
      << run.err;
}

TEST_F(StopJobTest, ThreeFailuresAtTheSameStepStopAfterTheThirdExit79) {
  const RunResult run = run_ddprun({"--nproc_per_node", "1", "--max_no_progress_restarts", "3",
                                    "--max_restarts", "10", worker("stop_job.py"), "same"});
  ASSERT_TRUE(ExitedWith(run, kDoNotRequeue));
  EXPECT_TRUE(ran(2));
  EXPECT_FALSE(ran(3)) << "a fourth attempt:\n" << run.err;
  EXPECT_NE(run.err.find("3 attempts in a row failed at step 1234: not restarting"),
            std::string::npos)
      << run.err;
}

TEST_F(StopJobTest, AJobThatProgressesBetweenFailuresKeepsRestarting) {
  const RunResult run = run_ddprun({"--nproc_per_node", "1", "--max_no_progress_restarts", "2",
                                    "--max_restarts", "4", worker("stop_job.py"), "progress"});
  ASSERT_TRUE(ExitedWith(run, 1));  // its own exit code once the restarts are used up
  EXPECT_TRUE(ran(4)) << run.err;
  EXPECT_EQ(run.err.find("not restarting"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace ddprun::testing
