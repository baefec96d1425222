// The heartbeat channel: parsing a file's content (pure), the watcher driven by writes from the
// test's own thread (no processes), then real processes using the documented one-liners
// (shell, Python, touch). The loop runs on the test's thread; every wait is bounded.
#include "agent/progress/heartbeat_watcher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "tests/agent/loop_child.h"
#include "tests/integration/test_python.h"

namespace ddprun::agent {
namespace {

using std::chrono::seconds;
using testing::LoopChild;
using testing::run_until;
using testing::TempDir;

std::optional<std::int64_t> step_of(std::string_view content) {
  return parse_heartbeat(content).step;
}

TEST(HeartbeatStep, WholeDecimalFirstLineIsTheStep) {
  EXPECT_EQ(step_of("5\n"), 5);
  EXPECT_EQ(step_of("0\n"), 0);
  EXPECT_EQ(step_of("1234\n"), 1234);
  EXPECT_EQ(step_of(" \t42 \r\n"), 42);
  EXPECT_EQ(step_of("7\nanything after the first line\n"), 7);
  EXPECT_EQ(step_of("9223372036854775807\n"), INT64_MAX);
  EXPECT_EQ(step_of("1234\n\n"), 1234);  // rewritten at offset 0 over "99999\n"
}

TEST(HeartbeatStep, AnythingElseHasNoStep) {
  for (const char* content :
       {"", "\n", "5", "12 34", "-3\n", "+3\n", "0x10\n", "5.0\n", "abc\n", "5abc\n",
        "9223372036854775808\n", "99999999999999999999999\n", " \n", " 0.5 3\n"}) {
    EXPECT_EQ(parse_heartbeat(content), HeartbeatContent{}) << '"' << content << '"';
  }
  EXPECT_EQ(parse_heartbeat(std::string("\0\0\n", 3)), HeartbeatContent{});
}

TEST(HeartbeatStep, TheBusySecondsAfterTheStep) {
  using std::chrono::microseconds;
  EXPECT_EQ(parse_heartbeat("12 0.153\n"), (HeartbeatContent{12, microseconds(153'000)}));
  EXPECT_EQ(parse_heartbeat("12\t2\r\n"), (HeartbeatContent{12, microseconds(2'000'000)}));
  EXPECT_EQ(parse_heartbeat(" 3   0.0000015 \n"), (HeartbeatContent{3, microseconds(2)}));
  EXPECT_EQ(parse_heartbeat("12 34\n"), (HeartbeatContent{12, microseconds(34'000'000)}));
  EXPECT_EQ(parse_heartbeat("4 0\n"), (HeartbeatContent{4, microseconds(0)}));
}

TEST(HeartbeatStep, ABusyTimeThatIsNotOneLeavesTheStepKnown) {
  for (const char* content : {"8 -0.1\n", "8 1e-3\n", "8 .5\n", "8 5.\n", "8 0.1 0.2\n", "8 abc\n",
                              "8 nan\n", "8 inf\n", "8 1000000\n", "8 0x1\n"}) {
    EXPECT_EQ(parse_heartbeat(content), (HeartbeatContent{8, std::nullopt}))
        << '"' << content << '"';
  }
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

class HeartbeatWatcherTest : public ::testing::Test {
 protected:
  void start(int ranks, HeartbeatWatcherOptions options = {}) {
    auto created =
        HeartbeatWatcher::create(io, dir.path() + "/attempt_0", ranks, options,
                                 [this](const Heartbeat& beat) { beats.push_back(beat); });
    ASSERT_TRUE(created.ok()) << created.error_message();
    watcher = std::move(created.value());
  }
  // Heartbeats of `rank` so far.
  std::vector<Heartbeat> of(int rank) const {
    std::vector<Heartbeat> out;
    for (const auto& b : beats) {
      if (b.local_rank == rank) out.push_back(b);
    }
    return out;
  }
  bool saw_step(int rank, std::int64_t step) const {
    for (const auto& b : of(rank)) {
      if (b.step == step) return true;
    }
    return false;
  }

  boost::asio::io_context io;
  TempDir dir;
  std::unique_ptr<HeartbeatWatcher> watcher;
  std::vector<Heartbeat> beats;
};

TEST_F(HeartbeatWatcherTest, CreatesAnEmptyPrivateFilePerRankAndNamesItForWorkers) {
  start(3);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string path = dir.path() + "/attempt_0/rank_" + std::to_string(rank);
    EXPECT_EQ(watcher->file_for(rank), path);
    EXPECT_EQ(watcher->worker_env(rank),
              (std::vector<std::pair<std::string, std::string>>{{"DDPRUN_HEARTBEAT_FILE", path}}));
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_size, 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/attempt_0/rank_3"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/attempt_0/auto_0"));
  io.poll();  // creating the files is not a heartbeat
  EXPECT_TRUE(beats.empty());
}

// Python workers' automatic progress has a file of its own per rank, and its heartbeats say
// where they came from (the agent lets an explicit heartbeat win: hang_watch.h).
TEST_F(HeartbeatWatcherTest, AutomaticFilesAreOfferedBesideAndTheirHeartbeatsSaySo) {
  HeartbeatWatcherOptions options;
  options.automatic_files = true;
  start(2, options);
  const std::string auto1 = dir.path() + "/attempt_0/auto_1";
  EXPECT_EQ(watcher->file_for(1, true), auto1);
  EXPECT_EQ(watcher->worker_env(1), (std::vector<std::pair<std::string, std::string>>{
                                        {"DDPRUN_HEARTBEAT_FILE", dir.path() + "/attempt_0/rank_1"},
                                        {"DDPRUN_AUTO_PROGRESS_FILE", auto1}}));
  write_file(auto1, "9 0.250000\n");
  ASSERT_TRUE(run_until(
      io, [&] { return !beats.empty(); }, seconds(10)));
  EXPECT_EQ(beats[0].local_rank, 1);
  EXPECT_TRUE(beats[0].automatic);
  EXPECT_EQ(beats[0].step, 9);
  EXPECT_EQ(beats[0].busy, std::chrono::microseconds(250'000));
  write_file(watcher->file_for(1), "3\n");
  ASSERT_TRUE(run_until(
      io, [&] { return beats.size() == 2; }, seconds(10)));
  EXPECT_FALSE(beats[1].automatic);
  EXPECT_EQ(beats[1].step, 3);
}

// With a minimum interval between wake-ups, a worker that writes on and on costs the agent one
// wake-up per interval, and the read then holds the latest step.
TEST_F(HeartbeatWatcherTest, AMinimumIntervalBetweenWakeupsMergesWhatCameMeanwhile) {
  HeartbeatWatcherOptions options;
  options.automatic_files = true;
  options.min_wakeup_interval = Millis(500);
  start(1, options);
  write_file(watcher->file_for(0, true), "1\n");
  ASSERT_TRUE(run_until(
      io, [&] { return beats.size() == 1; }, seconds(10)));
  // The watcher rests now: these all land before its next wake-up.
  for (int step = 2; step <= 50; ++step) {
    write_file(watcher->file_for(0, true), std::to_string(step) + "\n");
  }
  ASSERT_TRUE(run_until(
      io, [&] { return saw_step(0, 50); }, seconds(10)));
  // Normally 2; a loaded machine may split the writes over another interval or two, never
  // wake up once per write.
  EXPECT_LT(watcher->stats().wakeups, 10u);
  EXPECT_EQ(beats.size(), watcher->stats().wakeups);
}

// Inotify instances this process holds (the links in /proc/self/fd).
int inotify_instances() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    n += !ec && target.string() == "anon_inode:inotify";
  }
  return n;
}

// Hang detection off: the files are there for scripts that write them, and nothing watches
// (no inotify instance, whose closing would cost milliseconds at the end of every attempt).
TEST_F(HeartbeatWatcherTest, WithoutWatchingOnlyTheFilesExist) {
  const int before = inotify_instances();
  HeartbeatWatcherOptions options;
  options.watch = false;
  auto created = HeartbeatWatcher::create(io, dir.path() + "/attempt_0", 2, options,
                                          [this](const Heartbeat& beat) { beats.push_back(beat); });
  ASSERT_TRUE(created.ok()) << created.error_message();
  watcher = std::move(created.value());
  EXPECT_EQ(inotify_instances(), before);
  EXPECT_TRUE(std::filesystem::exists(watcher->file_for(1)));
  write_file(watcher->file_for(1), "7\n");
  io.poll();
  EXPECT_TRUE(beats.empty());
  EXPECT_EQ(watcher->stats().wakeups, 0u);
  watcher.reset();  // destroying one that never watched is fine
}

TEST_F(HeartbeatWatcherTest, BurstOfWritesIsOneHeartbeatWithTheLatestStep) {
  start(2);
  for (int step = 0; step <= 300; ++step) {
    write_file(watcher->file_for(1), std::to_string(step) + "\n");  // all queued before a wake
  }
  ASSERT_TRUE(run_until(
      io, [&] { return !beats.empty(); }, seconds(10)));
  io.poll();  // anything else already due
  ASSERT_EQ(beats.size(), 1u);
  EXPECT_EQ(beats[0].local_rank, 1);
  EXPECT_EQ(beats[0].step, 300);
  EXPECT_EQ(watcher->stats().file_reads, 1u);
  EXPECT_EQ(watcher->stats().wakeups, 1u);
}

TEST_F(HeartbeatWatcherTest, GarbageOrHalfWrittenContentIsAHeartbeatWithoutStep) {
  start(1);
  write_file(watcher->file_for(0), "12");  // no newline yet
  ASSERT_TRUE(run_until(
      io, [&] { return !beats.empty(); }, seconds(10)));
  EXPECT_EQ(beats.back().step, std::nullopt);
  beats.clear();
  write_file(watcher->file_for(0), std::string(4096, '7') + "\n");  // longer than a step line
  ASSERT_TRUE(run_until(
      io, [&] { return !beats.empty(); }, seconds(10)));
  EXPECT_EQ(beats.back().step, std::nullopt);
}

TEST_F(HeartbeatWatcherTest, OtherFilesAndRanksOutOfRangeAreIgnored) {
  start(2);
  write_file(dir.path() + "/attempt_0/rank_1.tmp", "5\n");
  write_file(dir.path() + "/attempt_0/rank_01", "5\n");
  write_file(dir.path() + "/attempt_0/rank_2", "5\n");
  write_file(watcher->file_for(0), "8\n");  // a marker that the rest was seen first
  ASSERT_TRUE(run_until(
      io, [&] { return saw_step(0, 8); }, seconds(10)));
  io.poll();
  for (const auto& b : beats) EXPECT_EQ(b.local_rank, 0);
}

TEST_F(HeartbeatWatcherTest, TimestampOnlyTouchIsAHeartbeatWithoutReadingTheFile) {
  start(1);
  write_file(watcher->file_for(0), "5\n");
  ASSERT_TRUE(run_until(
      io, [&] { return saw_step(0, 5); }, seconds(10)));
  beats.clear();
  const auto reads = watcher->stats().file_reads;
  ASSERT_EQ(::utimensat(AT_FDCWD, watcher->file_for(0).c_str(), nullptr, 0), 0);  // IN_ATTRIB
  ASSERT_TRUE(run_until(
      io, [&] { return !beats.empty(); }, seconds(10)));
  EXPECT_EQ(beats[0].step, std::nullopt);
  EXPECT_EQ(watcher->stats().file_reads, reads);
}

TEST_F(HeartbeatWatcherTest, RenamedIntoPlaceCountsToo) {
  start(1);
  const std::string tmp = dir.path() + "/attempt_0/.rank_0.tmp";
  write_file(tmp, "77\n");
  ASSERT_EQ(std::rename(tmp.c_str(), watcher->file_for(0).c_str()), 0);
  ASSERT_TRUE(run_until(
      io, [&] { return saw_step(0, 77); }, seconds(10)));
}

TEST_F(HeartbeatWatcherTest, DestroyedWatcherLeavesTheLoopUsableAndTheFilesInPlace) {
  start(1);
  write_file(watcher->file_for(0), "1\n");
  const std::string file = watcher->file_for(0);
  watcher.reset();  // a wait is pending, an event queued
  io.restart();
  io.poll();
  EXPECT_TRUE(beats.empty());
  EXPECT_TRUE(std::filesystem::exists(file));
}

TEST(HeartbeatWatcherCreate, RefusesBadArguments) {
  boost::asio::io_context io;
  TempDir dir;
  EXPECT_TRUE(
      HeartbeatWatcher::create(io, dir.path(), 0, {}, nullptr).status().is_invalid_argument());
  EXPECT_FALSE(HeartbeatWatcher::create(io, dir.path() + "/no/such/parent", 1, {}, nullptr).ok());
}

// The one-liners of the contract, run by real processes.
class HeartbeatWatcherIntegration : public HeartbeatWatcherTest {
 protected:
  // Runs argv as local rank `rank` and waits for it to exit and for `seen` to hold.
  void run_worker(int rank, const std::vector<std::string>& argv,
                  const std::function<bool()>& seen) {
    auto [key, value] = watcher->worker_env(rank).front();
    auto child = LoopChild::start(io, argv, {{key, value}});
    ASSERT_TRUE(child);
    EXPECT_TRUE(run_until(
        io, [&] { return child->exit().has_value() && seen(); }, seconds(30)));
    ASSERT_TRUE(child->exit().has_value()) << "the worker did not exit";
    EXPECT_TRUE(child->exit()->success()) << argv.back();
    for (const auto& b : beats) EXPECT_EQ(b.local_rank, rank);
  }
};

TEST_F(HeartbeatWatcherIntegration, ShellEchoSendsItsStep) {
  start(2);
  run_worker(1, {"/bin/sh", "-c", "echo 5 > \"$DDPRUN_HEARTBEAT_FILE\""},
             [&] { return saw_step(1, 5); });
}

TEST_F(HeartbeatWatcherIntegration, PythonOneLinerSendsItsStep) {
  start(3);
  run_worker(2,
             {ddprun::testing::test_python(), "-c",
              "import os, pathlib; "
              "pathlib.Path(os.environ['DDPRUN_HEARTBEAT_FILE']).write_text(f'{1234}\\n')"},
             [&] { return saw_step(2, 1234); });
}

TEST_F(HeartbeatWatcherIntegration, TouchSendsAHeartbeatWithoutStep) {
  start(1);
  run_worker(0, {"/bin/sh", "-c", "touch \"$DDPRUN_HEARTBEAT_FILE\""},
             [&] { return !of(0).empty(); });
  for (const auto& b : of(0)) EXPECT_EQ(b.step, std::nullopt);
}

TEST_F(HeartbeatWatcherIntegration, ShellLoopStepsArriveInOrderEndingWithTheLast) {
  start(1);
  run_worker(0,
             {"/bin/sh", "-c",
              "i=1; while [ $i -le 50 ]; do echo $i > \"$DDPRUN_HEARTBEAT_FILE\"; "
              "i=$((i+1)); done"},
             [&] { return saw_step(0, 50); });
  std::int64_t last = -1;
  for (const auto& b : of(0)) {
    if (!b.step) continue;  // a read that raced a rewrite
    EXPECT_GE(*b.step, last);
    last = *b.step;
  }
  EXPECT_EQ(last, 50);
}

}  // namespace
}  // namespace ddprun::agent
