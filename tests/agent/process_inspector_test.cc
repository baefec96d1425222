// What the agent says of a worker that outlived SIGKILL (issue 36): /proc's files parsed as
// strings, and one real look at this test's own process.
#include "agent/process/process_inspector.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace ddprun::agent {
namespace {

TEST(ProcessInspector, TheStateIsReadAfterTheLastParenthesisWithTheKernelsName) {
  EXPECT_EQ(state_from_stat("1234 (python) D 1 1234 1234 0 -1"), "D (disk sleep)");
  EXPECT_EQ(state_from_stat("77 (a) b (c)) S 1 2 3"), "S (sleeping)");
  EXPECT_EQ(state_from_stat("9 (x) Q 1"), "Q") << "a letter the kernel may add is kept";
  EXPECT_EQ(state_from_stat(""), "");
  EXPECT_EQ(state_from_stat("9 (x)"), "");
}

TEST(ProcessInspector, TheCommandLineIsItsArgumentsJoinedBySpaces) {
  EXPECT_EQ(command_from_cmdline(std::string("python\0-u\0train.py\0", 20)), "python -u train.py");
  EXPECT_EQ(command_from_cmdline(""), "");
}

TEST(ProcessInspector, AWaitChannelOfZeroIsNotKnown) {
  EXPECT_EQ(wchan_name("nfs_wait_on_request"), "nfs_wait_on_request");
  EXPECT_EQ(wchan_name("0"), "");
  EXPECT_EQ(wchan_name(""), "");
}

TEST(ProcessInspector, TheLineNamesPidRankStateWaitAndCommand) {
  EXPECT_EQ(describe_unkillable(1234, 1, 30,
                                {"D (disk sleep)", "nfs_wait_on_request", "python -u train.py"}),
            "worker pid 1234 (local_rank 1) did not exit 30 s after SIGKILL: state D (disk "
            "sleep), waiting in nfs_wait_on_request, command python -u train.py");
  EXPECT_EQ(ProcessSnapshot{}.describe(), "state unknown, wait channel unknown, command unknown");
}

TEST(ProcessInspector, ReadsAProcessFromProc) {
  const ProcessSnapshot self = ProcInspector().inspect(::getpid());
  EXPECT_EQ(self.state, "R (running)") << "it reads its own stat while running";
  EXPECT_NE(self.command.find("agent_unit_tests"), std::string::npos) << self.command;
  const ProcessSnapshot gone = ProcInspector().inspect(0);  // /proc/0 does not exist
  EXPECT_TRUE(gone.state.empty());
  EXPECT_TRUE(gone.command.empty());
}

}  // namespace
}  // namespace ddprun::agent
