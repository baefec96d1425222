// Failures that explain themselves: a worker that throws, one that segfaults and one whose
// exception nobody catches, run under the real ddprun; ddprun's failure report (which reads
// the worker's TORCHELASTIC_ERROR_FILE) shows the message and the native backtrace.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <ddp/process_group.h>

#include "tests/worker_sdk/multiproc.h"
#include "tests/worker_sdk/single_process_group.h"

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

void (*sigpipe_disposition())(int) {
  struct sigaction current {};
  EXPECT_EQ(::sigaction(SIGPIPE, nullptr, &current), 0);
  return current.sa_handler;
}

// A rank that writes to a peer which has just failed gets EPIPE (a kPeerLost ddp::Error that
// waits for the launcher to name the peer), not a SIGPIPE that kills it first: CI saw rank 0
// of the "throw" scenario die of SIGPIPE in its barrier and be reported as the root cause.
TEST(FailureReportTest, InitIgnoresSigpipeSoThatALostPeerIsAnErrorNotADeath) {
  ::signal(SIGPIPE, SIG_DFL);  // as a C++ program starts (gtest's own runner may differ)
  ASSERT_EQ(sigpipe_disposition(), SIG_DFL);
  auto group = single_process_group();
  EXPECT_EQ(sigpipe_disposition(), SIG_IGN);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  ::close(pair[1]);
  errno = 0;
  EXPECT_EQ(::write(pair[0], "x", 1), -1);  // still alive: the write fails instead
  EXPECT_EQ(errno, EPIPE);
  ::close(pair[0]);
  ddp::destroy_process_group();
}

void programs_own_handler(int) {}

TEST(FailureReportTest, AProgramsOwnSigpipeHandlerIsKept) {
  ::signal(SIGPIPE, programs_own_handler);
  auto group = single_process_group();
  EXPECT_EQ(sigpipe_disposition(), &programs_own_handler);
  ddp::destroy_process_group();
  ::signal(SIGPIPE, SIG_DFL);
}

}  // namespace
}  // namespace ddp_test
