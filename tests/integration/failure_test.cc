// Worker failures: the failing rank stops its siblings at once (SIGTERM, not after the grace
// period), the torchrun failure report is printed with the error file's message, and ddprun's
// exit code is the root cause's; restarts and their exhaustion.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/integration/ddprun_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The part of ddprun's stderr from the report's "Root Cause" section on.
std::string root_cause_section(const std::string& err) {
  const auto at = err.find("Root Cause (first observed failure):");
  return at == std::string::npos ? "" : err.substr(at);
}

class FailureTest : public DdprunTest {};

TEST_F(FailureTest, FailingRankStopsSiblingsAndItsExitCodeAndMessageAreReported) {
  for (int sibling : {0, 2}) make_fifo(out("ready_" + std::to_string(sibling) + ".fifo"));
  const auto started = TestClock::now();
  // A long grace period: the siblings' markers prove they got SIGTERM, not the later SIGKILL.
  const RunResult run = run_ddprun({"--nproc_per_node", "3", "--shutdown_timeout", "60",
                                    worker("fail_with_siblings.py"), "1", "3"});
  ASSERT_TRUE(ExitedWith(run, 3));
  EXPECT_LT(TestClock::now() - started, 30s) << "siblings were not stopped at once";
  EXPECT_EQ(read_text_file(out("sigterm_0")), "15");
  EXPECT_EQ(read_text_file(out("sigterm_2")), "15");

  const auto failed = nlohmann::json::parse(read_text_file(out("failed_1")));
  const std::string pid = std::to_string(failed.at("pid").get<int>());
  const std::string error_file = failed.at("error_file").get<std::string>();
  EXPECT_NE(run.err.find(worker("fail_with_siblings.py") + " FAILED"), std::string::npos)
      << run.err;
  const std::string root = root_cause_section(run.err);
  ASSERT_FALSE(root.empty()) << run.err;
  EXPECT_NE(root.find("rank      : 1 (local_rank: 1)"), std::string::npos) << root;
  EXPECT_NE(root.find("exitcode  : 3 (pid: " + pid + ")"), std::string::npos) << root;
  EXPECT_NE(root.find("error_file: " + error_file), std::string::npos) << root;
  EXPECT_NE(root.find("traceback : Traceback (most recent call last):"), std::string::npos) << root;
  EXPECT_NE(root.find("RuntimeError: boom"), std::string::npos) << root;
  // The siblings stopped by the agent are not failures of their own.
  EXPECT_NE(run.err.find("<NO_OTHER_FAILURES>"), std::string::npos) << run.err;
}

TEST_F(FailureTest, SiblingIgnoringSigtermIsKilledAfterShutdownTimeout) {
  make_fifo(out("ready_0.fifo"));
  const auto started = TestClock::now();
  const RunResult run = run_ddprun({"--nproc_per_node", "2", "--shutdown_timeout", "1",
                                    worker("fail_with_siblings.py"), "1", "3", "--keep-running"});
  const auto elapsed = TestClock::now() - started;
  // The sibling got SIGTERM, ignored it, and was SIGKILLed one second later; its death is not
  // a failure of its own, the root cause's exit code stands.
  ASSERT_TRUE(ExitedWith(run, 3));
  EXPECT_EQ(read_text_file(out("sigterm_0")), "15");
  EXPECT_GE(elapsed, 1s);
  EXPECT_LT(elapsed, 20s);
  EXPECT_NE(run.err.find("<NO_OTHER_FAILURES>"), std::string::npos) << run.err;
}

TEST_F(FailureTest, ReportShowsStderrTailWhenStderrIsRedirected) {
  const RunResult run =
      run_ddprun({"--redirects", "2", "--no_python", "/bin/sh", "-c",
                  "echo out-line; echo first-err >&2; echo last-err >&2; exit 6"});
  ASSERT_TRUE(ExitedWith(run, 6));
  const std::string root = root_cause_section(run.err);
  EXPECT_NE(root.find("stderr    : (last 2 lines)\n    first-err\n    last-err"), std::string::npos)
      << run.err;
  EXPECT_NE(run.out.find("out-line"), std::string::npos) << "stdout is not redirected";
}

// Found by fuzz/failure_report_fuzzer: with a rendezvous (--standalone, c10d) the agent sends
// its failure report to the server as JSON, and a worker's stderr line that was not UTF-8 (a
// Latin-1 "café") made nlohmann's dump() throw: ddprun aborted (exit 134) instead of reporting
// the failure. Bytes that are not UTF-8 now travel as U+FFFD.
TEST_F(FailureTest, FuzzNonUtf8StderrOfAFailedWorkerIsReportedNotACrash) {
  const RunResult run = run_ddprun({"--standalone", "--redirects", "2", "--no_python", "/bin/sh",
                                    "-c", "printf 'caf\\351 au lait\\n' >&2; exit 6"});
  ASSERT_TRUE(ExitedWith(run, 6));
  const std::string root = root_cause_section(run.err);
  EXPECT_NE(root.find("stderr    : (last 1 lines)\n    caf\xef\xbf\xbd au lait"), std::string::npos)
      << run.err;
}

TEST_F(FailureTest, FailureMessageWithoutCallstackIsShownAsMessage) {
  // An error file with only a message: it becomes the traceback line, as in torchrun.
  const std::string script = temp() / "fail_with_message.py";
  write_text_file(script,
                  "import json, os, sys\n"
                  "with open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w') as f:\n"
                  "    json.dump({'message': {'message': 'ValueError: bad shard', "
                  "'extraInfo': {'py_callstack': '', 'timestamp': '0'}}}, f)\n"
                  "sys.exit(9)\n");
  const RunResult run = run_ddprun({script});
  ASSERT_TRUE(ExitedWith(run, 9));
  EXPECT_NE(root_cause_section(run.err).find("ValueError: bad shard"), std::string::npos)
      << run.err;
}

TEST_F(FailureTest, WorkerKilledBySignalGives128PlusSignalAndNamesIt) {
  const RunResult run = run_ddprun({"--nproc_per_node", "2", worker("kill_self.py")});
  ASSERT_TRUE(ExitedWith(run, 128 + 9));
  const std::string pid = read_text_file(out("victim_0"));
  ASSERT_FALSE(pid.empty());
  const std::string root = root_cause_section(run.err);
  EXPECT_NE(root.find("rank      : 0 (local_rank: 0)"), std::string::npos) << run.err;
  EXPECT_NE(root.find("exitcode  : -9 (pid: " + pid + ")"), std::string::npos) << run.err;
  EXPECT_NE(root.find("Signal 9 (SIGKILL) received by PID " + pid), std::string::npos) << run.err;
}

TEST_F(FailureTest, RestartThenSucceed) {
  const RunResult run = run_ddprun(
      {"--nproc_per_node", "2", "--max_restarts", "2", worker("restart_until.py"), "1", "5"});
  ASSERT_TRUE(ExitedWith(run, 0));
  // Rank 0 ran (and failed) on restart 0; both ranks ran on restart 1; there was no third.
  EXPECT_FALSE(read_text_file(out("attempt_0_0")).empty());
  EXPECT_FALSE(read_text_file(out("attempt_1_0")).empty());
  EXPECT_FALSE(read_text_file(out("attempt_1_1")).empty());
  EXPECT_TRUE(read_text_file(out("attempt_2_0")).empty());
  EXPECT_NE(read_text_file(out("attempt_0_0")), read_text_file(out("attempt_1_0")))
      << "the restarted worker must be a new process";
  EXPECT_EQ(run.err.find("FAILED"), std::string::npos) << "no report on success:\n" << run.err;
}

TEST_F(FailureTest, RestartsExhaustedReportOnceWithTheExitCode) {
  const RunResult run = run_ddprun(
      {"--nproc_per_node", "2", "--max_restarts", "2", worker("restart_until.py"), "99", "4"});
  ASSERT_TRUE(ExitedWith(run, 4));
  for (int restart = 0; restart < 3; ++restart) {
    EXPECT_FALSE(read_text_file(out("attempt_" + std::to_string(restart) + "_0")).empty())
        << "restart " << restart;
  }
  EXPECT_TRUE(read_text_file(out("attempt_3_0")).empty());
  EXPECT_EQ(count_of(run.err, " FAILED\n"), 1u) << run.err;
  EXPECT_EQ(count_of(run.err, "Root Cause (first observed failure):"), 1u) << run.err;
  // The report is the last attempt's: its pid is the one in the report.
  EXPECT_NE(run.err.find("exitcode  : 4 (pid: " + read_text_file(out("attempt_2_0")) + ")"),
            std::string::npos)
      << run.err;
}

// Issue 23: --health_check runs before the node joins a round. A node that fails it never starts
// a worker, says why with the check's last lines, and exits 69 for its node manager.
class HealthCheckTest : public DdprunTest {
 protected:
  std::vector<std::string> job(const std::string& check, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--standalone", "--nproc_per_node", "2", "--health_check",
                                     check};
    args.insert(args.end(), more.begin(), more.end());
    args.insert(args.end(),
                {"--no_python", "/bin/sh", "-c", "touch \"$DDPRUN_TEST_OUT/ran_$LOCAL_RANK\""});
    return args;
  }
};

TEST_F(HealthCheckTest, APassingCheckLetsTheNodeJoinAndSeesTheNodesEnvironment) {
  const RunResult run = run_ddprun(
      job(R"(echo checked; test "$LOCAL_WORLD_SIZE" = 2 && test -n "$TORCHELASTIC_RUN_ID")"));
  ASSERT_TRUE(ExitedWith(run, 0)) << run.err;
  EXPECT_TRUE(std::filesystem::exists(out("ran_0")));
  EXPECT_TRUE(std::filesystem::exists(out("ran_1")));
}

TEST_F(HealthCheckTest, AFailingCheckKeepsTheNodeOutWithItsOutputAndExitCode69) {
  const RunResult run = run_ddprun(
      job("echo 'GPU 3: 12 uncorrectable ECC errors' >&2; exit 3", {"--max_restarts", "3"}));
  ASSERT_TRUE(ExitedWith(run, 69)) << run.err;
  EXPECT_NE(run.err.find("this node failed its health check: it exited with status 3"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("GPU 3: 12 uncorrectable ECC errors"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(out("ran_0"))) << "a worker started";
}

TEST_F(HealthCheckTest, ACheckThatDoesNotAnswerInTimeIsAFailure) {
  const RunResult run = run_ddprun(job("sleep 30", {"--health_check_timeout", "0.5"}));
  ASSERT_TRUE(ExitedWith(run, 69)) << run.err;
  EXPECT_NE(run.err.find("it did not finish within 0.5 s (--health_check_timeout)"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(std::filesystem::exists(out("ran_0")));
}

// The example check in configs/ (no GPU here: its file-system part).
TEST_F(HealthCheckTest, TheExampleCheckPassesAndFailsOnFreeSpace) {
  const std::string example = worker("../../../configs/health-check.sh");
  env_["DDPRUN_CHECK_DIRS"] = temp().path();
  RunResult run = run_ddprun(job(example));
  ASSERT_TRUE(ExitedWith(run, 0)) << run.err;
  env_["DDPRUN_CHECK_MIN_FREE_MB"] = "999999999";  // a petabyte
  run = run_ddprun(job(example));
  ASSERT_TRUE(ExitedWith(run, 69)) << run.err;
  EXPECT_NE(run.err.find(temp().path() + ": "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("MB free, below 999999999 MB"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace ddprun::testing
