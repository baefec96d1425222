// Issue 38: the built-in node checks and the restart's GPU memory wait, with ddprun run as a
// real process: the checks in their own child (ddprun __node_check), pointed at a fake NVML
// (tests/agent/fake_nvml.cc, loaded by path) and fake /sys trees through ddprun's environment.
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/integration/ddprun_fixture.h"
#include "tests/integration/proc_watch.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class NodeCheckTest : public DdprunTest {
 protected:
  std::vector<std::string> job(const std::string& check, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--standalone", "--nproc_per_node", "1", "--health_check",
                                     check};
    args.insert(args.end(), more.begin(), more.end());
    args.insert(args.end(),
                {"--no_python", "/bin/sh", "-c", "touch \"$DDPRUN_TEST_OUT/ran_$LOCAL_RANK\""});
    return args;
  }
  void fake_nvml(const std::string& config) {
    env_["DDPRUN_NVML_LIBRARY"] = DDPRUN_FAKE_NVML;
    env_["DDPRUN_FAKE_NVML_CONFIG"] = temp() / "nvml.conf";
    std::ofstream(temp() / "nvml.conf") << config;
  }
  void write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
  }
};

// --health_check mixing a built-in check and a command: both run, the workers start.
TEST_F(NodeCheckTest, ABuiltinCheckAndACommandBothPassAndTheNodeJoins) {
  const std::string data = temp() / "data";
  std::filesystem::create_directories(data);
  const RunResult run = run_ddprun(
      job("builtin:path=" + data + ":min_free=1K touch \"$DDPRUN_TEST_OUT/command_ran\""));
  ASSERT_TRUE(ExitedWith(run, 0)) << run.err;
  EXPECT_TRUE(std::filesystem::exists(out("command_ran")));
  EXPECT_TRUE(std::filesystem::exists(out("ran_0")));
  EXPECT_TRUE(std::filesystem::is_empty(data)) << "the probe file was removed";
}

TEST_F(NodeCheckTest, AFailingBuiltinCheckNamesThePathAndTheCommandNeverRuns) {
  const std::string missing = temp() / "no-such-mount";
  const RunResult run =
      run_ddprun(job("builtin:path=" + missing + " touch \"$DDPRUN_TEST_OUT/command_ran\""));
  ASSERT_TRUE(ExitedWith(run, 69)) << run.err;
  EXPECT_THAT(run.err,
              HasSubstr("its built-in checks (builtin:path=" + missing + ") found a problem"));
  EXPECT_THAT(run.err,
              HasSubstr("path: path " + missing + ": cannot be opened: No such file or directory"));
  EXPECT_FALSE(std::filesystem::exists(out("command_ran")));
  EXPECT_FALSE(std::filesystem::exists(out("ran_0")));
}

TEST_F(NodeCheckTest, GpusOnTheFakeNvmlPassAndFailNamingTheGpuAndTheCount) {
  fake_nvml("devices 2\n");
  RunResult run = run_ddprun(job("builtin:gpu=2"));
  ASSERT_TRUE(ExitedWith(run, 0)) << run.err;
  fake_nvml("devices 2\necc 1 5\nlost 0\n");
  run = run_ddprun(job("builtin:gpu"));
  ASSERT_TRUE(ExitedWith(run, 69)) << run.err;
  EXPECT_THAT(run.err, HasSubstr("gpu: GPU 0: fallen off the bus (NVML: GPU is lost)"));
  EXPECT_THAT(run.err, HasSubstr("gpu: GPU 1: 5 uncorrectable ECC errors"));
}

TEST_F(NodeCheckTest, ANamedInterfaceOnAFakeSysfsTree) {
  env_["DDPRUN_SYSFS_ROOT"] = temp() / "sys";
  write(temp() / "sys/class/net/eth9/operstate", "up\n");
  write(temp() / "sys/class/net/eth9/carrier", "1\n");
  write(temp() / "sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  RunResult run = run_ddprun(job("builtin:nic=eth9+mlx5_0"));
  ASSERT_TRUE(ExitedWith(run, 0)) << run.err;
  write(temp() / "sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN\n");
  run = run_ddprun(job("builtin:nic=eth9+mlx5_0"));
  ASSERT_TRUE(ExitedWith(run, 69)) << run.err;
  EXPECT_THAT(run.err, HasSubstr("nic: InfiniBand mlx5_0 port 1: state 1: DOWN"));
}

// A path whose open blocks in the kernel, as a dead NFS mount's does. A FIFO with no writer
// stands for it: open(O_RDONLY) waits in the kernel until a writer comes, and none does. The
// check's child hangs; the agent's timeout kills it, and meanwhile the agent answers.
class BlockingPathTest : public NodeCheckTest {
 protected:
  void SetUp() override {
    NodeCheckTest::SetUp();
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
  }
  const std::string fifo_ = temp() / "dead-mount";
};

TEST_F(BlockingPathTest, TheCheckTimesOutNamingThePath) {
  const RunResult run = run_ddprun(job("builtin:path=" + fifo_, {"--health_check_timeout", "2"}));
  ASSERT_TRUE(ExitedWith(run, 69)) << run.err;
  EXPECT_THAT(run.err, HasSubstr("its built-in checks (builtin:path=" + fifo_ +
                                 ") did not finish within 2 s (--health_check_timeout)"));
  EXPECT_THAT(run.err, HasSubstr("checking path " + fifo_));
}

TEST_F(BlockingPathTest, TheAgentAnswersASignalWhileTheCheckIsBlocked) {
  auto ddprun = start_ddprun(job("builtin:path=" + fifo_, {"--health_check_timeout", "600"}));
  ASSERT_TRUE(ddprun);
  // The check's child, blocked: a child of ddprun running __node_check.
  pid_t check = 0;
  const Deadline deadline = deadline_after(std::chrono::seconds(20));
  while (check == 0 && TestClock::now() < deadline) {
    for (pid_t pid : children_of(ddprun->pid())) {
      std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
      const std::string text((std::istreambuf_iterator<char>(cmdline)),
                             std::istreambuf_iterator<char>());
      if (text.find("__node_check") != std::string::npos) check = pid;
    }
    // Nothing signals a grandchild's start; /proc is read again shortly.
    if (check == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(check, 0) << "the check never started";
  ddprun->send_signal(SIGTERM);
  const RunResult run = finish(*ddprun, deadline_after(std::chrono::seconds(20)));
  ASSERT_TRUE(ExitedWith(run, 128 + SIGTERM)) << run.err;
  EXPECT_TRUE(wait_until_reaped(check, deadline_after(std::chrono::seconds(10))))
      << "the blocked check was left behind";
}

// The restart's memory wait with the real agent on the fake NVML: the first attempt's worker
// "holds" 1 GiB (its pid in the fake's list) and fails; the agent restarts once the fake stops
// listing it.
class RestartMemoryWaitTest : public NodeCheckTest {
 protected:
  std::vector<std::string> restarting_job(const std::string& held_for, const std::string& wait) {
    fake_nvml("devices 1\n");
    env_["DDPRUN_FAKE_NVML_LOG"] = temp() / "nvml.log";
    // Attempt 0: listed as holding memory (for `held_for` answers; empty: for ever), then
    // fails. Attempt 1: notes how many answers NVML had given, and succeeds.
    const std::string script =
        "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then "
        "echo \"process 0 $$ 1073741824 " +
        held_for +
        "\" >> \"$DDPRUN_FAKE_NVML_CONFIG\"; "
        "echo $$ > \"$DDPRUN_TEST_OUT/held_by\"; exit 1; fi; "
        "wc -l < \"$DDPRUN_FAKE_NVML_LOG\" > \"$DDPRUN_TEST_OUT/answers_before_restart\"";
    return {"--standalone",
            "--nproc_per_node",
            "1",
            "--max_restarts",
            "1",
            "--gpu_memory_wait",
            wait,
            "--no_python",
            "/bin/sh",
            "-c",
            script};
  }
};

TEST_F(RestartMemoryWaitTest, TheRestartWaitsUntilTheMemoryIsReleased) {
  const RunResult run = run_ddprun(restarting_job("3", "30"));
  ASSERT_TRUE(ExitedWith(run, 0)) << run.err;
  // Listed in answers 1 to 3, gone in the 4th: the restart came after it.
  EXPECT_EQ(read_text_file(out("answers_before_restart")), "4\n");
  EXPECT_THAT(run.err, Not(HasSubstr("not released")));
}

TEST_F(RestartMemoryWaitTest, MemoryNeverReleasedIsReportedAtTheBoundAndTheRestartGoesOn) {
  const RunResult run = run_ddprun(restarting_job("", "1"));
  ASSERT_TRUE(ExitedWith(run, 0)) << run.err;
  const std::string pid = read_text_file(out("held_by"));
  EXPECT_THAT(run.err, HasSubstr("the last attempt's GPU memory was not released within 1 s "
                                 "(--gpu_memory_wait): pid " +
                                 pid.substr(0, pid.size() - 1) +
                                 " holds 1024.0 MiB on GPU 0; starting the next attempt anyway"));
}

}  // namespace
}  // namespace ddprun::testing
