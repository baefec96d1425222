// Failures that explain themselves: a worker that throws, one that segfaults and one whose
// exception nobody catches, run under the real ddprun; ddprun's failure report (which reads
// the worker's TORCHELASTIC_ERROR_FILE) shows the message and the native backtrace.
#include <gtest/gtest.h>

#include "tests/worker_sdk/multiproc.h"

namespace ddp_test {
namespace {

#ifdef DDPRUN_BINARY
ProcessResult run_failing(const std::string& scenario) {
  TempDir dir;
  ProcessSpec spec;
  spec.argv = {DDPRUN_BINARY,   "--standalone", "--nproc_per_node", "2", "--no_python",
               SDK_TEST_WORKER, scenario};
  spec.env["OMP_NUM_THREADS"] = "1";
  spec.env["TMPDIR"] = dir.path().string();  // the failed run's directory is kept: in here
  spec.output_file = dir.path() / "ddprun.log";
  RunOptions options;
  options.deadline = std::chrono::seconds(90);
  return run_processes({spec}, options)[0];
}

// The root-cause section of ddprun's report (the failure summary's last part).
std::string root_cause(const std::string& output) {
  const auto at = output.find("Root Cause (first observed failure):");
  return at == std::string::npos ? std::string() : output.substr(at);
}

TEST(FailureReportTest, AnExceptionsMessageAndWhereItWasRaisedReachTheReport) {
  const auto r = run_failing("throw");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string cause = root_cause(r.output);
  EXPECT_NE(cause.find("rank      : 1"), std::string::npos) << r.output;
  EXPECT_NE(cause.find("ddp::Error: ddp rank 1: test_failure: deliberate failure"),
            std::string::npos)
      << r.output;
  EXPECT_NE(cause.find("Native backtrace where the ddp::Error was raised"), std::string::npos)
      << r.output;
  EXPECT_NE(cause.find("throw_from_here_for_test"), std::string::npos) << r.output;
  EXPECT_EQ(cause.find("error_file: <N/A>"), std::string::npos) << r.output;
}

TEST(FailureReportTest, ASegfaultsSignalAndBacktraceReachTheReport) {
  const auto r = run_failing("segfault");
  EXPECT_EQ(r.exit_code, 128 + 11) << r.output;  // ddprun exits with the root cause's status
  const std::string cause = root_cause(r.output);
  EXPECT_NE(cause.find("Signal 11 (SIGSEGV)"), std::string::npos) << r.output;
  EXPECT_NE(cause.find("SIGSEGV: Segmentation fault (fatal signal 11, address 0x0"),
            std::string::npos)
      << r.output;
  EXPECT_NE(cause.find("segfault_here_for_test"), std::string::npos) << r.output;
}

TEST(FailureReportTest, AnUncaughtExceptionIsReportedWhereItWasThrown) {
  const auto r = run_failing("uncaught");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string cause = root_cause(r.output);
  EXPECT_NE(cause.find("std::runtime_error: deliberate uncaught exception"), std::string::npos)
      << r.output;
  EXPECT_NE(cause.find("thrown (uncaught)"), std::string::npos) << r.output;
  EXPECT_NE(cause.find("uncaught_throw_for_test"), std::string::npos) << r.output;
}
#endif

}  // namespace
}  // namespace ddp_test
