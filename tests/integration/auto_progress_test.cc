// Progress from unmodified Python scripts (issue 34): a DistributedDataParallel loop that knows
// nothing of ddprun (workers/ddp_train.py) gets hang and straggler reports, its steps counted
// where it steps, an exception known when it is raised, and a quick exit. Runs once per torch
// (test_python.h), each case with fresh workers and with --preload.
#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/integration/ddprun_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

class AutoProgressTest : public DdprunTest, public ::testing::WithParamInterface<bool> {
 protected:
  // ddprun's flags for a 2-rank job, with --preload torch when the parameter says so.
  std::vector<std::string> job(std::vector<std::string> flags) const {
    std::vector<std::string> args = {"--standalone", "--nproc_per_node", "2"};
    if (GetParam()) args.insert(args.end(), {"--preload", "torch"});
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }
  std::vector<std::string> train(std::vector<std::string> flags,
                                 const std::vector<std::string>& script_args) const {
    std::vector<std::string> args = job(std::move(flags));
    args.push_back(worker("ddp_train.py"));
    args.insert(args.end(), script_args.begin(), script_args.end());
    return args;
  }
  // The first line of local rank `rank`'s automatic progress file, kept under --log_dir.
  std::string auto_progress_line(const std::string& log_dir, int rank) const {
    for (const auto& run : std::filesystem::directory_iterator(log_dir)) {
      const auto file = run.path() / "attempt_0" / "progress" / ("auto_" + std::to_string(rank));
      std::ifstream in(file);
      std::string line;
      if (std::getline(in, line)) return line;
    }
    return "<none>";
  }
};

// A rank that stops in its data loading (outside any collective) is named with its step and
// frame; the rank waiting for it in DDP's all-reduce is not.
TEST_P(AutoProgressTest, ARankStuckInItsDataLoadingIsNamedHungWithItsStepAndFrame) {
  const auto started = std::chrono::steady_clock::now();
  const RunResult run = run_ddprun(train({"--hang_timeout", "3"}, {"--steps", "1000", "--hang-rank",
                                                                   "1", "--hang-at-step", "5"}),
                                   90s);
  ASSERT_TRUE(ExitedWith(run, 128 + SIGABRT));
  EXPECT_NE(run.err.find("rank 1 (node "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("local_rank 1) hung: no progress for"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("after step 4, in collate"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("rank 0 (node "), std::string::npos) << "rank 0 only waited";
  // A correctness bound, not a timing: the hang ends the job, not SIGALRM (120 s) or gloo.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 60s);
}

// A rank slower per step in its data loading, its forward or its backward is named as the
// straggler, and no other rank is. The slow rank is 6x the others and the threshold 3x: a
// rank the machine's load slows by chance is not one the job made slow.
TEST_P(AutoProgressTest, ARankSlowerInDataForwardOrBackwardIsTheOnlyStraggler) {
  for (const char* phase : {"data", "forward", "backward"}) {
    SCOPED_TRACE(phase);
    const RunResult run = run_ddprun(
        train({"--straggler_threshold", "3"}, {"--steps", "40", "--work-s", "0.02", "--slow-rank",
                                               "1", "--slow-in", phase, "--slow-s", "0.1"}),
        90s);
    ASSERT_TRUE(ExitedWith(run, 0));
    EXPECT_TRUE(std::regex_search(
        run.err, std::regex(R"(straggler: rank 1 \(node [^,]+, local_rank 1\): busy \d+ ms)")))
        << run.err;
    EXPECT_EQ(run.err.find("straggler: rank 0 "), std::string::npos) << run.err;
  }
}

TEST_P(AutoProgressTest, EqualRanksWithBothOptionsOnNameNobody) {
  const RunResult run = run_ddprun(train({"--straggler_threshold", "3", "--hang_timeout", "20"},
                                         {"--steps", "40", "--work-s", "0.02"}),
                                   90s);
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_NE(run.err.find("stragglers: none over 3x the job's median busy time"), std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("straggler: rank"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("hung"), std::string::npos) << run.err;
}

// docs/progress.md: a step is an optimizer step of the leading optimizer; two optimizers
// stepped together count once, micro-batches under no_sync() do not count, and a validation
// loop between epochs adds none.
TEST_P(AutoProgressTest, StepsAreCountedWhereTheScriptSteps) {
  const std::string logs = temp().path() + "/logs";
  const RunResult run =
      run_ddprun(train({"--log_dir", logs}, {"--steps", "6", "--two-optimizers", "--accumulate",
                                             "2", "--validate-every", "3", "--out", "done"}),
                 90s);
  ASSERT_TRUE(ExitedWith(run, 0));
  for (int rank = 0; rank < 2; ++rank) {
    const std::string done = read_text_file(out("done_" + std::to_string(rank) + ".json"));
    EXPECT_NE(done.find("\"steps\": 6"), std::string::npos) << done;
    EXPECT_NE(done.find("\"validations\": 1"), std::string::npos) << done;
    const std::string line = auto_progress_line(logs, rank);
    EXPECT_EQ(line.substr(0, line.find(' ')), "6") << line;
  }
}

// A script that writes its own heartbeat (here numbered from 1001) is not counted twice: its
// own steps are the ones a hang report names.
TEST_P(AutoProgressTest, AScriptsOwnHeartbeatWins) {
  const RunResult run = run_ddprun(
      train({"--hang_timeout", "3"},
            {"--steps", "1000", "--explicit-heartbeat", "--hang-rank", "1", "--hang-at-step", "5"}),
      90s);
  ASSERT_TRUE(ExitedWith(run, 128 + SIGABRT));
  EXPECT_NE(run.err.find("after step 1004"), std::string::npos) << run.err;
}

// The agent hears of the exception while the failing interpreter still runs its atexit
// handlers: the sibling is stopped before the failing worker has exited.
TEST_P(AutoProgressTest, AnExceptionStopsTheSiblingBeforeTheFailingWorkerExits) {
  std::vector<std::string> args = job({});
  args.push_back(worker("raise_early.py"));
  const RunResult run = run_ddprun(args, 90s);
  ASSERT_TRUE(ExitedWith(run, 1));
  EXPECT_TRUE(std::filesystem::exists(out("sibling_stopped_first"))) << run.err;
  EXPECT_NE(run.err.find("raise_early: this script failed on purpose"), std::string::npos)
      << run.err;
}

INSTANTIATE_TEST_SUITE_P(FreshOrPreloaded, AutoProgressTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "preload" : "fresh"; });

// What quick exit keeps: atexit handlers, output not yet flushed, the exit code; with
// --no_quick_exit the interpreter tears down in full (a __del__ at exit runs).
class QuickExitTest : public DdprunTest {};

TEST_F(QuickExitTest, AtexitHandlersUnflushedOutputAndTheExitCodeStay) {
  const std::string script = temp().path() + "/ends.py";
  // Rank 1 fails only once rank 0 is done: its failure would stop rank 0 at once.
  std::ofstream(script) << "import atexit, os, sys, time\n"
                           "out = os.environ['DDPRUN_TEST_OUT']\n"
                           "rank = os.environ['RANK']\n"
                           "atexit.register(lambda: open(os.path.join(out, 'atexit_' + rank),"
                           " 'w').close())\n"
                           "sys.stdout.write('no newline at the end')\n"
                           "left_open = open(os.path.join(out, 'left_open_' + rank), 'w')\n"
                           "left_open.write('written though never closed')\n"
                           "if rank == '1':\n"
                           "    deadline = time.monotonic() + 30\n"
                           "    while not os.path.exists(os.path.join(out, 'atexit_0')) and"
                           " time.monotonic() < deadline:\n"
                           "        time.sleep(0.01)\n"
                           "    sys.exit(3)\n";
  const RunResult run = run_ddprun({"--nproc_per_node", "2", script}, 60s);
  ASSERT_TRUE(ExitedWith(run, 3));
  EXPECT_TRUE(std::filesystem::exists(out("atexit_0")));
  EXPECT_TRUE(std::filesystem::exists(out("atexit_1")));
  EXPECT_NE(run.out.find("no newline at the end"), std::string::npos) << run.out;
  for (const char* rank : {"0", "1"}) {
    EXPECT_EQ(read_text_file(out(std::string("left_open_") + rank)), "written though never closed");
  }
}

TEST_F(QuickExitTest, NoQuickExitRunsTheFullTeardown) {
  const std::string script = temp().path() + "/teardown.py";
  // What __del__ uses is bound at definition: module globals may be gone at finalization.
  std::ofstream(script) << "import os\n"
                           "PATH = os.path.join(os.environ['DDPRUN_TEST_OUT'], 'del_0')\n"
                           "class Marker:\n"
                           "    def __del__(self, open=open, path=PATH):\n"
                           "        open(path, 'w').close()\n"
                           "kept = Marker()\n";
  ASSERT_TRUE(ExitedWith(run_ddprun({"--nproc_per_node", "1", script}, 60s), 0));
  EXPECT_FALSE(std::filesystem::exists(out("del_0"))) << "quick exit skips module teardown";
  ASSERT_TRUE(ExitedWith(run_ddprun({"--nproc_per_node", "1", "--no_quick_exit", script}, 60s), 0));
  EXPECT_TRUE(std::filesystem::exists(out("del_0")));
}

// A program that never sends a heartbeat is told about, not killed for the silence alone.
TEST_F(QuickExitTest, ABinaryWithoutHeartbeatsIsWarnedAboutNotKilled) {
  const RunResult run = run_ddprun(
      {"--nproc_per_node", "1", "--hang_timeout", "0.5", "--no_python", "/bin/sh", "-c", "sleep 2"},
      60s);
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_NE(run.err.find("it is not a Python script, so a rank is watched only once it writes "
                         "DDPRUN_HEARTBEAT_FILE"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("hung"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace ddprun::testing
