#include "agent/logs/log_layout.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include "agent/logs/line_assembler.h"

namespace ddprun::agent {
namespace {

LogOptions logs(int redirects, int tee, std::vector<int> console = {}) {
  LogOptions o;
  o.redirects.all = redirects;
  o.tee.all = tee;
  o.console_ranks = std::move(console);
  return o;
}

TEST(PlanStream, DefaultIsConsoleOnly) {
  StreamRoute r = plan_stream(logs(0, 0), 0, kStdout);
  EXPECT_TRUE(r.to_console);
  EXPECT_FALSE(r.to_file);
  EXPECT_FALSE(r.via_agent());
}

TEST(PlanStream, RedirectIsFileOnlyForThatStream) {
  EXPECT_FALSE(plan_stream(logs(kStderr, 0), 0, kStderr).to_console);
  EXPECT_TRUE(plan_stream(logs(kStderr, 0), 0, kStderr).to_file);
  EXPECT_TRUE(plan_stream(logs(kStderr, 0), 0, kStdout).to_console);
  EXPECT_FALSE(plan_stream(logs(kStderr, 0), 0, kStdout).to_file);
}

TEST(PlanStream, TeeGoesBothWaysThroughTheAgent) {
  StreamRoute r = plan_stream(logs(0, kBothStreams), 1, kStdout);
  EXPECT_TRUE(r.to_console && r.to_file && r.via_agent());
  EXPECT_TRUE(plan_stream(logs(kBothStreams, kBothStreams), 1, kStdout).via_agent());
}

TEST(PlanStream, PerRankMapsLeaveUnlistedRanksAlone) {
  LogOptions o;
  o.redirects.per_rank = {{0, kStdout}, {1, kStderr}};
  EXPECT_TRUE(plan_stream(o, 0, kStdout).to_file);
  EXPECT_FALSE(plan_stream(o, 0, kStderr).to_file);
  EXPECT_TRUE(plan_stream(o, 1, kStderr).to_file);
  EXPECT_FALSE(plan_stream(o, 2, kStdout).to_file);
}

TEST(PlanStream, FilteredOutRanksKeepTheirOutputInFiles) {
  auto o = logs(0, 0, {0});
  EXPECT_TRUE(plan_stream(o, 0, kStdout).to_console);
  EXPECT_FALSE(plan_stream(o, 1, kStdout).to_console);
  EXPECT_TRUE(plan_stream(o, 1, kStdout).to_file);
}

TEST(RunLogDir, LaysOutAttemptsAsTorchrun) {
  auto base =
      std::filesystem::temp_directory_path() / ("ddprun_layout_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  auto dir = RunLogDir::create(base.string(), "job1");
  ASSERT_TRUE(dir) << dir.error_message();
  EXPECT_EQ(std::filesystem::path(dir->path()).parent_path(), base);
  EXPECT_EQ(std::filesystem::path(dir->path()).filename().string().rfind("job1_", 0), 0u);
  ASSERT_TRUE(dir->prepare_attempt(2, 2));
  EXPECT_TRUE(std::filesystem::is_directory(dir->path() + "/attempt_2/1"));
  EXPECT_EQ(dir->stdout_log(2, 1), dir->path() + "/attempt_2/1/stdout.log");
  EXPECT_EQ(dir->error_file(0, 0), dir->path() + "/attempt_0/0/error.json");
  std::ofstream(dir->error_file(2, 0)) << "stale";
  ASSERT_TRUE(dir->prepare_attempt(2, 2));
  EXPECT_FALSE(std::filesystem::exists(dir->error_file(2, 0)));
  dir->remove_if_temporary();  // chosen by the user: kept
  EXPECT_TRUE(std::filesystem::exists(dir->path()));
  std::filesystem::remove_all(base);
}

TEST(RunLogDir, ATemporaryOneGoesUnderItsParentAndIsRemoved) {
  auto parent = std::filesystem::temp_directory_path() /
                ("ddprun_layout_temp_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(parent);
  std::filesystem::create_directories(parent);
  auto dir = RunLogDir::create("", "job2", [&] { return parent.string(); });
  ASSERT_TRUE(dir) << dir.error_message();
  EXPECT_EQ(std::filesystem::path(dir->path()).parent_path(), parent);
  EXPECT_EQ(std::filesystem::path(dir->path()).filename().string().rfind("ddprun_job2_", 0), 0u);
  ASSERT_TRUE(dir->prepare_attempt(0, 3));
  EXPECT_TRUE(std::filesystem::is_directory(dir->path() + "/attempt_0/2"));
  dir->remove_if_temporary();
  EXPECT_TRUE(std::filesystem::is_empty(parent));
  std::filesystem::remove_all(parent);
}

// Issue 22: failed runs left ddprun_* directories in /dev/shm, most of them empty or holding
// only heartbeat files. At the end of a run, whatever its outcome, a temporary directory goes
// unless it holds a log or an error file; one that is kept leaves memory for the disk.
class RunLogDirFinish : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(memory_);
    std::filesystem::create_directories(disk_);
    const char* old = std::getenv("XDG_RUNTIME_DIR");
    if (old) saved_ = old;
    ::setenv("XDG_RUNTIME_DIR", memory_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_) {
      ::setenv("XDG_RUNTIME_DIR", saved_->c_str(), 1);
    } else {
      ::unsetenv("XDG_RUNTIME_DIR");
    }
    std::filesystem::remove_all(root_);
  }
  RunLogDir in_memory() {
    auto dir = RunLogDir::create("", "job", [&] { return memory_.string(); });
    EXPECT_TRUE(dir) << dir.error_message();
    EXPECT_TRUE(dir->in_memory());
    EXPECT_TRUE(dir->prepare_attempt(0, 2));
    std::filesystem::create_directories(dir->attempt_dir(0) + "/progress");
    std::ofstream(dir->attempt_dir(0) + "/progress/0");  // empty heartbeat files
    std::ofstream(dir->attempt_dir(0) + "/progress/1") << "12\n";
    return *dir;
  }

  std::filesystem::path root_ =
      std::filesystem::temp_directory_path() / ("ddprun_finish_test_" + std::to_string(::getpid()));
  std::filesystem::path memory_ = root_ / "runtime";
  std::filesystem::path disk_ = root_ / "tmp";
  std::optional<std::string> saved_;
};

TEST_F(RunLogDirFinish, NothingAUserNeedsMeansNothingIsLeft) {
  const RunLogDir dir = in_memory();
  EXPECT_EQ(dir.finish(disk_.string()), std::nullopt);
  EXPECT_TRUE(std::filesystem::is_empty(memory_));
  EXPECT_TRUE(std::filesystem::is_empty(disk_));
}

TEST_F(RunLogDirFinish, AnErrorFileMovesToDiskAndIsNamed) {
  const RunLogDir dir = in_memory();
  std::ofstream(dir.error_file(0, 1)) << R"({"message": "boom"})";
  const auto kept = dir.finish(disk_.string());
  ASSERT_TRUE(kept);
  EXPECT_EQ(std::filesystem::path(*kept).parent_path(), disk_);
  EXPECT_TRUE(std::filesystem::is_empty(memory_)) << "left in memory";
  std::ifstream moved(*kept + "/attempt_0/1/error.json");
  std::string text((std::istreambuf_iterator<char>(moved)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, R"({"message": "boom"})");
  EXPECT_FALSE(std::filesystem::exists(*kept + "/attempt_0/progress")) << "heartbeats moved too";
}

TEST_F(RunLogDirFinish, OnDiskAKeptDirectoryStaysAndTheUsersOwnIsNeverTouched) {
  auto on_disk = RunLogDir::create("", "job", [&] { return disk_.string(); });
  ASSERT_TRUE(on_disk);
  EXPECT_FALSE(on_disk->in_memory());
  ASSERT_TRUE(on_disk->prepare_attempt(0, 1));
  std::ofstream(on_disk->stdout_log(0, 0)) << "the filtered-out rank's output\n";
  EXPECT_EQ(on_disk->finish(disk_.string()), on_disk->path());
  EXPECT_TRUE(std::filesystem::exists(on_disk->stdout_log(0, 0)));
  auto users = RunLogDir::create((root_ / "mine").string(), "job");
  ASSERT_TRUE(users);
  ASSERT_TRUE(users->prepare_attempt(0, 1));
  EXPECT_EQ(users->finish(disk_.string()), std::nullopt);
  EXPECT_TRUE(std::filesystem::exists(users->worker_dir(0, 0)));
}

TEST(RunLogDir, AnAttemptThatCannotBeCreatedSaysWhere) {
  auto base = std::filesystem::temp_directory_path() /
              ("ddprun_layout_blocked_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  auto dir = RunLogDir::create(base.string(), "job3");
  ASSERT_TRUE(dir) << dir.error_message();
  std::ofstream(dir->path() + "/attempt_1") << "a file";  // where the directory should go
  Status s = dir->prepare_attempt(1, 1);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find(dir->path() + "/attempt_1/0"), std::string::npos) << s.message();
  std::filesystem::remove_all(base);
}

// An environment for temporary_parent: only the variables given.
std::function<const char*(const char*)> env_of(std::map<std::string, std::string> vars) {
  auto kept = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [kept](const char* name) -> const char* {
    auto it = kept->find(name);
    return it == kept->end() ? nullptr : it->second.c_str();
  };
}

TEST(TemporaryParent, TmpdirAlwaysWins) {
  EXPECT_EQ(temporary_parent(false, env_of({{"TMPDIR", "/scratch/me"}})), "/scratch/me");
  EXPECT_EQ(temporary_parent(true, env_of({{"TMPDIR", "/scratch/me"}})), "/scratch/me");
}

TEST(TemporaryParent, WithoutLogFilesTheRuntimeDirIsUsed) {
  auto runtime = std::filesystem::temp_directory_path() /
                 ("ddprun_runtime_dir_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(runtime);
  EXPECT_EQ(temporary_parent(false, env_of({{"XDG_RUNTIME_DIR", runtime.string()}})),
            runtime.string());
  EXPECT_EQ(
      temporary_parent(false, env_of({{"XDG_RUNTIME_DIR", runtime.string()}, {"TMPDIR", ""}})),
      runtime.string());  // an empty TMPDIR is no choice
  // Log files can be large: never in memory.
  EXPECT_EQ(temporary_parent(true, env_of({{"XDG_RUNTIME_DIR", runtime.string()}})), "/tmp");
  std::filesystem::remove_all(runtime);
}

TEST(TemporaryParent, AnUnusableRuntimeDirIsPassedOver) {
  const std::string chosen =
      temporary_parent(false, env_of({{"XDG_RUNTIME_DIR", "/nonexistent/ddprun-runtime"}}));
  EXPECT_TRUE(chosen == "/dev/shm" || chosen == "/tmp") << chosen;
  EXPECT_EQ(chosen == "/dev/shm",
            std::filesystem::is_directory("/dev/shm") && ::access("/dev/shm", W_OK | X_OK) == 0);
}

TEST(WritesLogFiles, OnlyWhenAStreamOfSomeRankGoesToAFile) {
  EXPECT_FALSE(writes_log_files(logs(0, 0), 4));
  EXPECT_TRUE(writes_log_files(logs(kStderr, 0), 4));
  EXPECT_TRUE(writes_log_files(logs(0, kStdout), 4));
  EXPECT_TRUE(writes_log_files(logs(0, 0, {0}), 2));  // rank 1 kept out of the console
  EXPECT_FALSE(writes_log_files(logs(0, 0, {0}), 1));
  LogOptions per_rank;
  per_rank.redirects.per_rank = {{3, kStdout}};
  EXPECT_FALSE(writes_log_files(per_rank, 3));
  EXPECT_TRUE(writes_log_files(per_rank, 4));
}

TEST(LineAssembler, EmitsWholeLinesOnly) {
  LineAssembler a;
  EXPECT_TRUE(a.feed("par").empty());
  EXPECT_EQ(a.feed("tial\nnext\nla"), (std::vector<std::string>{"partial\n", "next\n"}));
  EXPECT_EQ(a.flush(), "la\n");
  EXPECT_EQ(a.flush(), "");
}

TEST(LineAssembler, BoundsAnEndlessLine) {
  LineAssembler a;
  std::string chunk(LineAssembler::kMaxLine, 'x');
  auto lines = a.feed(chunk);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].size(), LineAssembler::kMaxLine + 1);
}

TEST(LinePrefix, TorchrunsDefaultAndTemplate) {
  EXPECT_EQ(line_prefix("", "trainer", 5, 1, "h"), "[trainer1]:");
  EXPECT_EQ(line_prefix("", "", 5, 1, "h"), "[1]:");  // --role ""
  EXPECT_EQ(
      line_prefix("${hostname}:${rank}|${local_rank} ${role_name} ${other}", "r", 5, 1, "node-a"),
      "node-a:5|1 r ${other}");
}

}  // namespace
}  // namespace ddprun::agent
