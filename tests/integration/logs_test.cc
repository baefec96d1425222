// Worker output routing: --redirects (all ranks and a per-rank map), --tee (prefixed console
// lines, unprefixed files), --local_ranks_filter, and the --log_dir layout
// <log_dir>/<run_id>_<random>/attempt_<N>/<local_rank>/{stdout.log,stderr.log,error.json}.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>

#include "tests/integration/ddprun_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

class LogsTest : public DdprunTest {
 protected:
  std::string log_dir() const { return temp() / "logs"; }

  // The run directory ddprun created in log_dir() ("" unless exactly one).
  std::string run_dir() const {
    const auto entries = list_dir(log_dir());
    return entries.size() == 1 ? log_dir() + "/" + entries.front() : "";
  }

  std::string log(int attempt, int rank, const std::string& file) const {
    return read_text_file(run_dir() + "/attempt_" + std::to_string(attempt) + "/" +
                          std::to_string(rank) + "/" + file);
  }

  RunResult run_chatter(std::vector<std::string> flags) {
    flags.insert(flags.end(),
                 {"--nproc_per_node", "2", "--log_dir", log_dir(), worker("chatter.py")});
    return run_ddprun(flags);
  }

  static std::string expected_stdout(int rank, const std::string& error_file) {
    const std::string r = std::to_string(rank);
    return "out" + r + " line1\nout" + r + " line2\nerrfile" + r + " " + error_file + "\n";
  }
  std::string error_file(int attempt, int rank) const {
    return run_dir() + "/attempt_" + std::to_string(attempt) + "/" + std::to_string(rank) +
           "/error.json";
  }
};

TEST_F(LogsTest, RedirectsBothStreamsToFilesOnly) {
  const RunResult run = run_chatter({"--redirects", "3"});
  ASSERT_TRUE(ExitedWith(run, 0));
  ASSERT_FALSE(run_dir().empty()) << "log dir holds: " << list_dir(log_dir()).size();
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    EXPECT_FALSE(has(run.out, "out" + r)) << run.out;
    EXPECT_FALSE(has(run.err, "err" + r)) << run.err;
    EXPECT_EQ(log(0, rank, "stdout.log"), expected_stdout(rank, error_file(0, rank)));
    EXPECT_EQ(log(0, rank, "stderr.log"), "err" + r + " line1\n");
  }
}

TEST_F(LogsTest, TeePrefixesConsoleLinesAndWritesFilesUnprefixed) {
  const RunResult run = run_chatter({"--tee", "3"});
  ASSERT_TRUE(ExitedWith(run, 0));
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    const std::string prefix = "[default" + r + "]:";
    EXPECT_TRUE(has(run.out, prefix + "out" + r + " line1\n")) << run.out;
    EXPECT_TRUE(has(run.out, prefix + "out" + r + " line2\n")) << run.out;
    EXPECT_TRUE(has(run.err, prefix + "err" + r + " line1\n")) << run.err;
    EXPECT_FALSE(has(run.out, "\nout" + r)) << "unprefixed console line\n" << run.out;
    EXPECT_EQ(log(0, rank, "stdout.log"), expected_stdout(rank, error_file(0, rank)));
    EXPECT_EQ(log(0, rank, "stderr.log"), "err" + r + " line1\n");
  }
}

TEST_F(LogsTest, TeePrefixUsesTheRoleName) {
  const RunResult run = run_chatter({"-t", "1", "--role", "trainer"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_TRUE(has(run.out, "[trainer1]:out1 line1\n")) << run.out;
  EXPECT_TRUE(has(run.err, "err1 line1\n")) << run.err;  // stderr not teed: as is
  EXPECT_FALSE(has(run.err, "[trainer1]:err1")) << run.err;
}

TEST_F(LogsTest, PerRankRedirectMap) {
  // Rank 0: stdout to its file only; rank 1: stderr to its file only.
  const RunResult run = run_chatter({"-r", "0:1,1:2"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_FALSE(has(run.out, "out0")) << run.out;
  EXPECT_TRUE(has(run.err, "err0 line1")) << run.err;
  EXPECT_TRUE(has(run.out, "out1 line1")) << run.out;
  EXPECT_FALSE(has(run.err, "err1")) << run.err;
  EXPECT_EQ(log(0, 0, "stdout.log"), expected_stdout(0, error_file(0, 0)));
  EXPECT_EQ(log(0, 1, "stderr.log"), "err1 line1\n");
}

TEST_F(LogsTest, LocalRanksFilterShowsOnlyTheChosenRank) {
  const RunResult run = run_chatter({"--local_ranks_filter", "1"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_TRUE(has(run.out, "out1 line1")) << run.out;
  EXPECT_TRUE(has(run.err, "err1 line1")) << run.err;
  EXPECT_FALSE(has(run.out, "out0")) << run.out;
  EXPECT_FALSE(has(run.err, "err0")) << run.err;
}

TEST_F(LogsTest, LocalRanksFilterWithTee) {
  const RunResult run = run_chatter({"--tee", "3", "--local-ranks-filter", "0"});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_TRUE(has(run.out, "[default0]:out0 line1")) << run.out;
  EXPECT_FALSE(has(run.out, "out1")) << run.out;
  EXPECT_FALSE(has(run.err, "err1")) << run.err;
  // Filtered from the console, still in its files.
  EXPECT_EQ(log(0, 1, "stdout.log"), expected_stdout(1, error_file(0, 1)));
}

TEST_F(LogsTest, LogDirLayoutPerRunAttemptAndRank) {
  make_fifo(out("done_0.fifo"));  // the first attempt fails once both ranks have printed
  const RunResult run = run_ddprun({"--nproc_per_node", "2", "--log_dir", temp() / "logs2",
                                    "--rdzv_id", "myjob", "--redirects", "3", "--max_restarts", "1",
                                    worker("chatter.py"), "--fail-first-attempt"});
  ASSERT_TRUE(ExitedWith(run, 0));
  const auto runs = list_dir(temp() / "logs2");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs.front().rfind("myjob_", 0), 0u) << runs.front();
  EXPECT_GT(runs.front().size(), std::string("myjob_").size());
  const std::string dir = temp() / "logs2" + "/" + runs.front();
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"attempt_0", "attempt_1"}));
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int rank = 0; rank < 2; ++rank) {
      const std::string rank_dir =
          dir + "/attempt_" + std::to_string(attempt) + "/" + std::to_string(rank);
      SCOPED_TRACE(rank_dir);
      EXPECT_EQ(read_text_file(rank_dir + "/stdout.log"),
                expected_stdout(rank, rank_dir + "/error.json"));
      EXPECT_EQ(read_text_file(rank_dir + "/stderr.log"),
                "err" + std::to_string(rank) + " line1\n");
    }
  }
}

TEST_F(LogsTest, TeeKeepsEveryLineUnderVolume) {
  // 2 × 20,000 lines of ~80 bytes: several MB through the agent's pipes, while the console
  // (this test's pipe) is read concurrently. Every line arrives once, whole and prefixed.
  constexpr int kLines = 20000;
  const RunResult run = run_ddprun({"--nproc_per_node", "2", "--tee", "3", "--log_dir", log_dir(),
                                    worker("flood.py"), std::to_string(kLines)});
  ASSERT_TRUE(ExitedWith(run, 0));
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    SCOPED_TRACE("local rank " + r);
    const std::string prefix = "[default" + r + "]:r" + r + " line ";
    std::size_t lines = 0, whole = 0;
    for (std::size_t at = run.out.find(prefix); at != std::string::npos;
         at = run.out.find(prefix, at + 1)) {
      ++lines;
      const auto end = run.out.find('\n', at);
      // "<prefix>NNNNNN " + 60 x: a line cut or merged with another would differ in length.
      if (end != std::string::npos && end - at == prefix.size() + 7 + 60) ++whole;
    }
    EXPECT_EQ(lines, static_cast<std::size_t>(kLines));
    EXPECT_EQ(whole, static_cast<std::size_t>(kLines));
    // The last fragment has no newline: it is flushed, prefixed, when the stream ends.
    EXPECT_TRUE(has(run.out, "[default" + r + "]:r" + r + " no newline at the end")) << r;
    const std::string file = log(0, rank, "stdout.log");
    EXPECT_EQ(std::count(file.begin(), file.end(), '\n'), kLines);
    EXPECT_FALSE(has(file, "[default")) << "file lines must not be prefixed";
    EXPECT_TRUE(has(log(0, rank, "stderr.log"), "r" + r + " err 019000\n"));
  }
}

TEST_F(LogsTest, DefaultLogDirIsUnderTmpdir) {
  const RunResult run = run_ddprun({"--nproc_per_node", "2", "--tee", "1", worker("chatter.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  const std::string tmpdir = env_.at("TMPDIR");
  EXPECT_TRUE(has(run.out, "[default0]:errfile0 " + tmpdir + "/")) << run.out;
}

// Issue 22: with --local_ranks_filter and no --log_dir, the filtered-out ranks' output lived only
// in the temporary directory, which a successful run deleted. It is kept, and named.
TEST_F(LogsTest, FilteredOutOutputIsKeptAfterASuccessAndNamed) {
  const RunResult run =
      run_ddprun({"--nproc_per_node", "2", "--local_ranks_filter", "0", worker("chatter.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_FALSE(has(run.out, "out1 line1")) << "rank 1 was filtered out of the console";
  const std::string tmpdir = env_.at("TMPDIR");
  const std::string marker = "the run's log and error files are kept in ";
  const auto at = run.err.find(marker);
  ASSERT_NE(at, std::string::npos) << run.err;
  const std::string kept =
      run.err.substr(at + marker.size(), run.err.find('\n', at) - (at + marker.size()));
  EXPECT_EQ(kept.rfind(tmpdir + "/", 0), 0u) << kept;
  EXPECT_TRUE(has(read_text_file(kept + "/attempt_0/1/stdout.log"), "out1 line2")) << kept;
}

// Without $TMPDIR, a run that writes no log files keeps its error and heartbeat files in the
// runtime directory (a memory file system), and deletes them when it succeeds.
TEST_F(LogsTest, WithoutTmpdirARunWithoutLogFilesUsesTheRuntimeDir) {
  const std::filesystem::path runtime = std::filesystem::path(temp().path()) / "runtime";
  std::filesystem::create_directories(runtime);
  env_.erase("TMPDIR");
  env_["XDG_RUNTIME_DIR"] = runtime.string();
  const RunResult run = run_ddprun({"--nproc_per_node", "2", worker("chatter.py")});
  ASSERT_TRUE(ExitedWith(run, 0));
  EXPECT_TRUE(has(run.out, "errfile0 " + runtime.string() + "/ddprun_none_")) << run.out;
  EXPECT_TRUE(has(run.out, "errfile1 " + runtime.string() + "/ddprun_none_")) << run.out;
  EXPECT_TRUE(std::filesystem::is_empty(runtime)) << "the run's directory was left behind";
}

// A port on 127.0.0.1 that refuses connections for as long as it lives: bound, never listening.
class RefusingPort {
 public:
  RefusingPort() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot bind a port on 127.0.0.1";
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~RefusingPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  int port_ = 0;
};

// Issue 22: every failed run left a ddprun_* directory in /dev/shm (or $XDG_RUNTIME_DIR), most
// of them empty or holding empty heartbeat files. Whatever ends a run, nothing stays in memory.
class NothingLeftInMemoryTest : public DdprunTest {
 protected:
  void SetUp() override {
    runtime_ = std::filesystem::path(temp().path()) / "runtime";
    std::filesystem::create_directories(runtime_);
    env_.erase("TMPDIR");
    env_["XDG_RUNTIME_DIR"] = runtime_.string();
  }
  void expect_nothing_left() {
    EXPECT_TRUE(std::filesystem::is_empty(runtime_)) << "the run's directory was left in memory";
  }
  std::filesystem::path runtime_;
};

TEST_F(NothingLeftInMemoryTest, AfterAWorkerFailure) {
  const RunResult run =
      run_ddprun({"--nproc_per_node", "2", "--no_python", "/bin/sh", "-c", "exit 3"});
  ASSERT_TRUE(ExitedWith(run, 3)) << run.err;
  expect_nothing_left();
}

// Also issue 22: waiting for an unreachable rendezvous said nothing until it gave up, and then
// said "cannot reach" twice over.
TEST_F(NothingLeftInMemoryTest, AfterARendezvousThatCannotBeReachedWhichItSaysOnce) {
  RefusingPort refusing;
  const RunResult run =
      run_ddprun({"--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint", refusing.endpoint(),
                  "--rdzv_conf", "is_host=0,join_timeout=2", "--no_python", "/bin/true"});
  ASSERT_TRUE(ExitedWith(run, 1)) << run.err;
  EXPECT_NE(run.err.find("waiting for the rendezvous server at " + refusing.endpoint() +
                         ": connect: Connection refused; retrying for up to 2 s"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("rendezvous failed: could not reach the rendezvous server at " +
                         refusing.endpoint() + " within "),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("cannot reach"), std::string::npos) << run.err;
  expect_nothing_left();
}

TEST_F(NothingLeftInMemoryTest, AfterSigtermWhileJoining) {
  RefusingPort refusing;
  auto ddprun = start_ddprun({"--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                              refusing.endpoint(), "--rdzv_conf", "is_host=0,join_timeout=60",
                              "--no_python", "/bin/true"});
  ASSERT_NE(ddprun, nullptr);
  ASSERT_TRUE(ddprun->wait_for_stderr("waiting for the rendezvous server", deadline_after(30s)))
      << ddprun->stderr_text();
  ddprun->send_signal(SIGTERM);
  const RunResult run = finish(*ddprun, deadline_after(30s));
  ASSERT_TRUE(ExitedWith(run, 128 + SIGTERM)) << run.err;
  expect_nothing_left();
}

}  // namespace
}  // namespace ddprun::testing
