// Signals to ddprun: SIGTERM and SIGINT reach every worker and ddprun exits 128+signal;
// SIGKILL of ddprun leaves no worker alive (parent-death signal).
#include <unistd.h>

#include <csignal>

#include "tests/integration/ddprun_fixture.h"
#include "tests/integration/proc_watch.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kWorkers = 3;

class SignalTest : public DdprunTest {
 protected:
  // Starts kWorkers await_signal.py workers and waits until all have their handlers in place.
  std::unique_ptr<ChildProcess> start_ready_workers(const std::string& worker_flag = "") {
    std::vector<std::string> args = {"--nproc_per_node", std::to_string(kWorkers),
                                     "--shutdown_timeout", "60", worker("await_signal.py")};
    if (!worker_flag.empty()) args.push_back(worker_flag);
    auto ddprun = start_ddprun(args);
    if (!ddprun) return nullptr;
    std::vector<std::string> ready;
    for (int rank = 0; rank < kWorkers; ++rank)
      ready.push_back(out("ready_" + std::to_string(rank)));
    if (!wait_for_files(ready, deadline_after(30s))) {
      ADD_FAILURE() << "workers never became ready\n"
                    << finish(*ddprun, deadline_after(0ms)).describe();
      return nullptr;
    }
    return ddprun;
  }

  std::vector<pid_t> worker_pids() {
    std::vector<pid_t> pids;
    for (int rank = 0; rank < kWorkers; ++rank) {
      pids.push_back(std::stoi(read_text_file(out("ready_" + std::to_string(rank)))));
    }
    return pids;
  }

  void expect_forwarded(int signo) {
    auto ddprun = start_ready_workers();
    ASSERT_NE(ddprun, nullptr);
    const auto sent = TestClock::now();
    ddprun->send_signal(signo);
    const RunResult run = finish(*ddprun, deadline_after(30s));
    ASSERT_TRUE(ExitedWith(run, 128 + signo));
    // Forwarded at once, not after --shutdown_timeout.
    EXPECT_LT(TestClock::now() - sent, 20s);
    for (int rank = 0; rank < kWorkers; ++rank) {
      EXPECT_EQ(read_text_file(out("signal_" + std::to_string(rank))), std::to_string(signo))
          << "local rank " << rank;
    }
    EXPECT_EQ(run.err.find(" FAILED\n"), std::string::npos) << "a stop is not a failure\n"
                                                            << run.err;
  }
};

TEST_F(SignalTest, SigtermReachesEveryWorkerAndExits143) { expect_forwarded(SIGTERM); }

TEST_F(SignalTest, SigintReachesEveryWorkerAndExits130) { expect_forwarded(SIGINT); }

TEST_F(SignalTest, SighupReachesEveryWorkerAndExits129) { expect_forwarded(SIGHUP); }

TEST_F(SignalTest, SecondSignalSkipsTheGracePeriod) {
  // The workers survive SIGTERM; a second SIGTERM must not wait the 60 s grace period.
  auto ddprun = start_ready_workers("--keep-running");
  ASSERT_NE(ddprun, nullptr);
  const std::vector<pid_t> pids = worker_pids();
  ddprun->send_signal(SIGTERM);
  std::vector<std::string> got;
  for (int rank = 0; rank < kWorkers; ++rank) got.push_back(out("signal_" + std::to_string(rank)));
  ASSERT_TRUE(wait_for_files(got, deadline_after(20s))) << "first SIGTERM not forwarded";
  const auto second = TestClock::now();
  ddprun->send_signal(SIGTERM);
  const RunResult run = finish(*ddprun, deadline_after(20s));
  ASSERT_TRUE(ExitedWith(run, 143));
  EXPECT_LT(TestClock::now() - second, 10s);
  for (pid_t pid : pids) EXPECT_FALSE(is_process_alive(pid)) << pid;
}

TEST_F(SignalTest, SigkillOfDdprunLeavesNoWorkerAlive) {
  auto ddprun = start_ready_workers();
  ASSERT_NE(ddprun, nullptr);
  const std::vector<pid_t> pids = worker_pids();
  for (pid_t pid : pids) ASSERT_TRUE(is_process_alive(pid)) << pid;
  ddprun->send_signal(SIGKILL);
  const RunResult run = finish(*ddprun, deadline_after(10s));
  ASSERT_TRUE(run.exit.has_value());
  EXPECT_EQ(run.exit->signal, SIGKILL);
  // The bound only keeps the test from waiting forever on a survivor: the workers die at once
  // (parent-death signal, sentinel), but a machine busy with other tests may take a while to
  // show it (this bound was 1 s and failed once in a full run beside torch workers).
  const Deadline bound = deadline_after(10s);
  for (pid_t pid : pids) {
    EXPECT_TRUE(wait_for_process_exit(pid, bound))
        << "worker " << pid << " outlived ddprun (state " << process_state(pid) << ")";
  }
  // ddprun's sentinel (agent/process/group_sentinel.h) ends by itself too, once it has read end of
  // file and killed what was left; re-parented to this test (a subreaper), it may still be at work
  // when the workers are gone. Without this wait the teardown could look in between and count
  // it as a process that outlived ddprun (seen once, in a fresh-clone CI rehearsal).
  for (pid_t pid : children_of(::getpid())) {
    EXPECT_TRUE(wait_for_process_exit(pid, bound))
        << "pid " << pid << ", started by ddprun, did not end after ddprun was killed";
  }
}

TEST_F(SignalTest, SignalBeforeWorkersStartIsHonoured) {
  // A signal that arrives while ddprun starts up ends it with 128+signal all the same.
  auto ddprun = start_ddprun({"--nproc_per_node", "2", worker("await_signal.py")});
  ASSERT_NE(ddprun, nullptr);
  ddprun->send_signal(SIGTERM);
  const RunResult run = finish(*ddprun, deadline_after(30s));
  ASSERT_TRUE(run.exit.has_value()) << run.describe();
  // Either ddprun's handler ran (143) or the signal came before it was installed (killed by
  // SIGTERM): both are a stop by SIGTERM. Never a hang, never a success.
  EXPECT_TRUE(run.exit->code == 143 || run.exit->signal == SIGTERM) << run.describe();
}

}  // namespace
}  // namespace ddprun::testing
