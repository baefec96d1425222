// Child hygiene: no grandchild outlives the job (whether it stayed in its worker's process
// group or left it with setsid), no descriptor of ddprun leaks into workers, and exited
// workers are reaped (no zombies) while the job still runs and after it.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <set>
#include <sstream>

#include "common/posix_fd.h"
#include "tests/integration/ddprun_fixture.h"
#include "tests/integration/proc_watch.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class HygieneTest : public DdprunTest {
 protected:
  pid_t grandchild_of(int local_rank) {
    const std::string text = read_text_file(out("grandchild_" + std::to_string(local_rank)));
    return text.empty() ? -1 : std::stoi(text);
  }

  // The descriptor numbers in an `ls -l /proc/self/fd` listing, without the one ls opened
  // to read that directory (its target is /proc/<pid>/fd).
  static std::set<int> listed_fds(const std::string& listing) {
    std::set<int> fds;
    std::istringstream lines(listing);
    std::string line;
    while (std::getline(lines, line)) {
      const auto arrow = line.find(" -> ");
      if (arrow == std::string::npos) continue;
      const std::string target = line.substr(arrow + 4);
      if (target.rfind("/proc/", 0) == 0 && target.size() > 3 &&
          target.compare(target.size() - 3, 3, "/fd") == 0) {
        continue;
      }
      const auto name_start = line.rfind(' ', arrow - 1) + 1;
      fds.insert(std::stoi(line.substr(name_start, arrow - name_start)));
    }
    return fds;
  }

  void expect_grandchildren_gone(const std::vector<std::string>& worker_args) {
    std::vector<std::string> args = {"--nproc_per_node", "2", worker("spawn_grandchild.py")};
    args.insert(args.end(), worker_args.begin(), worker_args.end());
    const RunResult run = run_ddprun(args, 30s);
    ASSERT_TRUE(ExitedWith(run, 0));
    for (int rank = 0; rank < 2; ++rank) {
      const pid_t grandchild = grandchild_of(rank);
      ASSERT_GT(grandchild, 0) << "local rank " << rank << " recorded no grandchild";
      EXPECT_TRUE(wait_for_process_exit(grandchild, deadline_after(1s)))
          << "grandchild " << grandchild << " of local rank " << rank << " outlived the job";
    }
  }
};

TEST_F(HygieneTest, GrandchildInTheWorkersGroupDiesWithTheJob) { expect_grandchildren_gone({}); }

TEST_F(HygieneTest, GrandchildThatCalledSetsidDiesWithTheJob) {
  expect_grandchildren_gone({"--setsid"});
}

TEST_F(HygieneTest, GrandchildrenOfStoppedWorkersDieWhenDdprunIsSignalled) {
  auto ddprun =
      start_ddprun({"--nproc_per_node", "2", worker("spawn_grandchild.py"), "--setsid", "--wait"});
  ASSERT_NE(ddprun, nullptr);
  ASSERT_TRUE(wait_for_files({out("grandchild_0"), out("grandchild_1")}, deadline_after(30s)));
  ddprun->send_signal(SIGTERM);
  const RunResult run = finish(*ddprun, deadline_after(30s));
  ASSERT_TRUE(ExitedWith(run, 143));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(wait_for_process_exit(grandchild_of(rank), deadline_after(1s)))
        << "grandchild of local rank " << rank << " outlived the job";
  }
}

TEST_F(HygieneTest, GrandchildInTheWorkersGroupDiesWhenDdprunIsKilled) {
  // SIGKILL leaves ddprun no chance to act: its sentinel ends the workers' groups.
  auto ddprun = start_ddprun({"--nproc_per_node", "2", worker("spawn_grandchild.py"), "--wait"});
  ASSERT_NE(ddprun, nullptr);
  ASSERT_TRUE(wait_for_files({out("grandchild_0"), out("grandchild_1")}, deadline_after(30s)));
  ddprun->send_signal(SIGKILL);
  const RunResult run = finish(*ddprun, deadline_after(10s));
  ASSERT_TRUE(run.exit.has_value());
  EXPECT_EQ(run.exit->signal, SIGKILL);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(wait_for_process_exit(grandchild_of(rank), deadline_after(1s)))
        << "grandchild of local rank " << rank << " outlived a killed ddprun";
  }
  // The workers (parent-death signal) and the sentinel (end of file on its pipe) end on their
  // own, moments after ddprun; the teardown then checks that none outlived it. Without this
  // wait, the teardown could look while the sentinel was still killing the groups.
  for (pid_t pid : children_of(::getpid())) {
    EXPECT_TRUE(wait_for_process_exit(pid, deadline_after(5s)))
        << "pid " << pid << ", started by ddprun, did not end after ddprun was killed";
  }
}

TEST_F(HygieneTest, WorkersInheritOnlyStandardDescriptors) {
  // Also with --tee, where ddprun holds pipes and log files of its own.
  for (const char* tee : {"0", "3"}) {
    SCOPED_TRACE(std::string("--tee ") + tee);
    const std::string log_dir = temp() / (std::string("logs_tee") + tee);
    const RunResult run = run_ddprun({"--nproc_per_node", "2", "--tee", tee, "--log_dir", log_dir,
                                      "--no_python", "/bin/sh", worker("list_fds.sh")});
    ASSERT_TRUE(ExitedWith(run, 0));
    for (int rank = 0; rank < 2; ++rank) {
      const std::string listing = read_text_file(out("fds_" + std::to_string(rank)));
      ASSERT_FALSE(listing.empty());
      EXPECT_EQ(listed_fds(listing), (std::set<int>{0, 1, 2})) << listing;
      ::unlink(out("fds_" + std::to_string(rank)).c_str());
    }
  }
}

// The agent hosts the job's store (a connection per rank): it raises its own soft descriptor
// limit to the hard one, and its workers get the limit it was started with, as under torchrun.
TEST_F(HygieneTest, AgentRaisesItsDescriptorLimitAndWorkersKeepTheOneTheyWereGiven) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max <= 256) {
    GTEST_SKIP() << "hard descriptor limit " << saved.rlim_max << " leaves nothing to raise";
  }
  rlimit low = saved;
  low.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  const RunResult run =
      run_ddprun({"--nproc_per_node", "1", "--no_python", "/bin/sh", worker("fd_limits.sh")});
  ::setrlimit(RLIMIT_NOFILE, &saved);
  ASSERT_TRUE(ExitedWith(run, 0));
  std::istringstream limits(read_text_file(out("fd_limits_0")));
  std::string worker_soft, agent_soft, agent_hard;
  limits >> worker_soft >> agent_soft >> agent_hard;
  EXPECT_EQ(worker_soft, "256");
  EXPECT_EQ(agent_soft, agent_hard) << "the agent kept a soft limit below its hard one";
  EXPECT_NE(agent_soft, "256");
}

TEST_F(HygieneTest, ExitedWorkerIsReapedWhileTheJobRuns) {
  // Rank 0 exits 0 at once; rank 1 waits on a FIFO. Rank 0 must not stay a zombie meanwhile.
  make_fifo(out("go.fifo"));
  auto ddprun = start_ddprun(
      {"--nproc_per_node", "2", "--no_python", "/bin/sh", "-c",
       "echo $$ > \"$DDPRUN_TEST_OUT/pid_$LOCAL_RANK.tmp\";"
       "mv \"$DDPRUN_TEST_OUT/pid_$LOCAL_RANK.tmp\" \"$DDPRUN_TEST_OUT/pid_$LOCAL_RANK\";"
       "if [ \"$LOCAL_RANK\" = 1 ]; then read x < \"$DDPRUN_TEST_OUT/go.fifo\"; fi"});
  ASSERT_NE(ddprun, nullptr);
  ASSERT_TRUE(wait_for_files({out("pid_0"), out("pid_1")}, deadline_after(30s)));
  const pid_t rank0 = std::stoi(read_text_file(out("pid_0")));
  EXPECT_TRUE(wait_until_reaped(rank0, deadline_after(5s)))
      << "exited worker " << rank0 << " is still a zombie (state " << process_state(rank0) << ")";
  // Besides rank 1, ddprun's only child is its sentinel (see agent/process/group_sentinel.h).
  std::vector<pid_t> workers_left;
  for (pid_t child : children_of(ddprun->pid())) {
    if (read_text_file("/proc/" + std::to_string(child) + "/comm") != "ddprun-sentinel\n") {
      workers_left.push_back(child);
    }
  }
  EXPECT_EQ(workers_left.size(), 1u) << "only rank 1 should be left";
  // Release rank 1. Opened read-write, the FIFO neither blocks here nor loses the line before
  // rank 1 opens it; it stays open until the job is over.
  UniqueFd go(::open(out("go.fifo").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(go.valid());
  ASSERT_EQ(::write(go.get(), "go\n", 3), 3);
  const RunResult run = finish(*ddprun, deadline_after(30s));
  ASSERT_TRUE(ExitedWith(run, 0));
  // Nothing of the job is left for the test to adopt: no zombie, no process.
  const AdoptedChildren left = kill_adopted_children();
  EXPECT_TRUE(left.alive.empty());
  EXPECT_TRUE(left.zombies.empty()) << left.zombies.size() << " zombie(s) left";
}

}  // namespace
}  // namespace ddprun::testing
