// The agent's last act on its children (issue 36), with real processes: every child is
// SIGKILLed and reaped within the bound, and a child the agent abandoned (it outlived SIGKILL
// once already) is killed but not waited for. A child that really outlives SIGKILL cannot be
// made here (it takes a process stuck in the kernel); the bound itself is tested on fakes
// (agent_unkillable_lifecycle_test.cc).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "agent/process/process_hygiene.h"

namespace ddprun::agent {
namespace {

// A child that waits for a signal; the test process has no other children.
pid_t start_child() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (;;) ::pause();
  }
  return pid;
}

TEST(ProcessHygieneIntegration, EveryChildIsKilledAndReapedWithinTheBound) {
  const pid_t a = start_child();
  const pid_t b = start_child();
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  EXPECT_EQ(kill_adopted_children(Millis(60'000), {}), 2);
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1) << "both were reaped";
  EXPECT_EQ(errno, ECHILD);
}

TEST(ProcessHygieneIntegration, AnAbandonedChildIsKilledButNotWaitedFor) {
  const pid_t abandoned = start_child();
  const pid_t other = start_child();
  ASSERT_GT(abandoned, 0);
  ASSERT_GT(other, 0);
  EXPECT_EQ(kill_adopted_children(Millis(60'000), {abandoned}), 2);
  int status = 0;
  EXPECT_EQ(::waitpid(other, &status, WNOHANG), -1) << "reaped";
  // Still ours to reap: it was not waited for. It was SIGKILLed, so this wait ends.
  ASSERT_EQ(::waitpid(abandoned, &status, 0), abandoned);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

}  // namespace
}  // namespace ddprun::agent
