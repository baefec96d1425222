// FileTimerServer on a real FIFO and a real Asio loop (the test's thread): requests written by
// the test with a recording signal sender, then torch 1.13's own FileTimerClient in real
// Python workers that the server kills. Every wait is bounded; nothing sleeps.
#include "agent/file_timer/file_timer_server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/agent/loop_child.h"
#include "tests/integration/test_python.h"

namespace ddprun::agent {
namespace {

using std::chrono::seconds;
using testing::LoopChild;
using testing::run_until;
using testing::TempDir;

class RecordingSender final : public SignalSender {
 public:
  Status send(pid_t pid, int signo) override {
    sent.emplace_back(pid, signo);
    return {};
  }
  std::vector<std::pair<pid_t, int>> sent;
};

// A request line as torch writes it, expiring `in` seconds from now (negative: already due).
std::string request_line(pid_t pid, const std::string& scope, double in, int signo) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json j{{"version", 1},
                   {"pid", pid},
                   {"scope_id", scope},
                   {"expiration_time", now + in},
                   {"signal", signo}};
  return j.dump() + "\n";
}

std::string release_line(pid_t pid, const std::string& scope) {
  return nlohmann::json{{"version", 1},
                        {"pid", pid},
                        {"scope_id", scope},
                        {"expiration_time", -1},
                        {"signal", 0}}
             .dump() +
         "\n";
}

// One client: open (non-blocking, as torch's client does), write, close.
void write_to_fifo(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(fd, 0) << "open " << path;
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

class FileTimerServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = FileTimerServer::create(
        io, dir.path(), {},
        [this](const TimerExpiry& e, const Status& sent) {
          expiries.push_back(e);
          send_results.push_back(sent);
        },
        sender);
    ASSERT_TRUE(created.ok()) << created.error_message();
    server = std::move(created.value());
  }

  boost::asio::io_context io;
  TempDir dir;
  RecordingSender sender;
  std::unique_ptr<FileTimerServer> server;
  std::vector<TimerExpiry> expiries;
  std::vector<Status> send_results;
};

TEST_F(FileTimerServerTest, CreatesAPrivateFifoAndNamesItForWorkers) {
  struct stat st {};
  ASSERT_EQ(::stat(server->path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(server->path(), dir.path() + "/torchelastic_timer");
  EXPECT_EQ(server->worker_env(),
            (std::pair<std::string, std::string>{"TORCHELASTIC_TIMER_FILE", server->path()}));
}

TEST_F(FileTimerServerTest, DueScopeOfARegisteredWorkerIsSignalledAndReported) {
  server->add_worker(4242, 2);
  write_to_fifo(server->path(), request_line(4242, "step", -1, SIGTERM));
  ASSERT_TRUE(run_until(
      io, [&] { return !expiries.empty(); }, seconds(10)));
  EXPECT_EQ(sender.sent, (std::vector<std::pair<pid_t, int>>{{4242, SIGTERM}}));
  EXPECT_EQ(expiries[0].pid, 4242);
  EXPECT_EQ(expiries[0].local_rank, 2);
  EXPECT_EQ(expiries[0].scope_id, "step");
  EXPECT_EQ(expiries[0].signal, SIGTERM);
  EXPECT_TRUE(send_results[0].ok());
  EXPECT_EQ(server->stats().requests, 1u);
  EXPECT_EQ(server->stats().signals_sent, 1u);
}

TEST_F(FileTimerServerTest, BadLinesAreCountedAndLaterClientsAreStillServed) {
  server->add_worker(4242, 0);
  write_to_fifo(server->path(), "not json\n" + std::string(5000, 'x') + "\n{\"pid\": 1}\n");
  // A second client after the first closed: the read end never saw end of file.
  write_to_fifo(server->path(), request_line(4242, "s", -1, SIGKILL));
  ASSERT_TRUE(run_until(
      io, [&] { return !expiries.empty(); }, seconds(10)));
  EXPECT_EQ(server->stats().malformed, 3u);
  EXPECT_EQ(sender.sent, (std::vector<std::pair<pid_t, int>>{{4242, SIGKILL}}));
}

TEST_F(FileTimerServerTest, ReleasedScopeIsCancelled) {
  server->add_worker(100, 0);
  server->add_worker(101, 1);
  write_to_fifo(server->path(), request_line(100, "a", 3600, SIGKILL));
  write_to_fifo(server->path(), release_line(100, "a"));
  write_to_fifo(server->path(), request_line(101, "b", -1, SIGKILL));  // due at once: a marker
  ASSERT_TRUE(run_until(
      io, [&] { return !expiries.empty(); }, seconds(10)));
  EXPECT_EQ(server->stats().requests, 3u);
  EXPECT_EQ(sender.sent, (std::vector<std::pair<pid_t, int>>{{101, SIGKILL}}));
}

TEST_F(FileTimerServerTest, StrayPidIsNeverSignalled) {
  server->add_worker(101, 1);
  write_to_fifo(server->path(), request_line(999999, "a", -1, SIGKILL));
  write_to_fifo(server->path(), request_line(101, "b", -1, SIGKILL));
  ASSERT_TRUE(run_until(
      io, [&] { return !expiries.empty(); }, seconds(10)));
  EXPECT_EQ(server->stats().refused, 1u);
  EXPECT_EQ(sender.sent, (std::vector<std::pair<pid_t, int>>{{101, SIGKILL}}));
}

TEST_F(FileTimerServerTest, WorkerRemovedBeforeItsRequestIsReadIsNotSignalled) {
  server->add_worker(100, 0);
  write_to_fifo(server->path(), request_line(100, "a", -1, SIGKILL));
  server->remove_worker(100);  // reaped before the loop read its request
  ASSERT_TRUE(run_until(
      io, [&] { return server->stats().refused == 1; }, seconds(10)));
  EXPECT_TRUE(sender.sent.empty());
  EXPECT_TRUE(expiries.empty());
}

TEST_F(FileTimerServerTest, DestroyingTheServerRemovesTheFifoAndLeavesTheLoopUsable) {
  server->add_worker(100, 0);
  write_to_fifo(server->path(), request_line(100, "a", 3600, SIGKILL));
  ASSERT_TRUE(run_until(
      io, [&] { return server->stats().requests == 1; }, seconds(10)));
  const std::string path = server->path();
  server.reset();  // a read and a timer wait are pending
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  io.restart();
  io.poll();  // the cancelled handlers run and find nothing
  EXPECT_TRUE(expiries.empty());
}

TEST(FileTimerServerCreate, ReplacesAStaleFifoButNeverAnotherFile) {
  boost::asio::io_context io;
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir.path() + "/torchelastic_timer").c_str(), 0644), 0);
  auto replaced = FileTimerServer::create(io, dir.path(), {}, nullptr);
  ASSERT_TRUE(replaced.ok()) << replaced.error_message();
  struct stat st {};
  ASSERT_EQ(::stat((*replaced)->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  const std::string taken = dir.path() + "/taken";
  std::ofstream(taken) << "user data";
  FileTimerServerOptions options;
  options.fifo_name = "taken";
  auto refused = FileTimerServer::create(io, dir.path(), options, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().is_invalid_argument());
  EXPECT_NE(refused.error_message().find("not a FIFO"), std::string::npos);
  EXPECT_EQ(::access(taken.c_str(), F_OK), 0);

  options.fifo_name = "../escape";
  EXPECT_TRUE(
      FileTimerServer::create(io, dir.path(), options, nullptr).status().is_invalid_argument());
  EXPECT_FALSE(FileTimerServer::create(io, dir.path() + "/missing", {}, nullptr).ok());
}

// Torch's real client, in real Python workers. The server runs in-process on this thread.
class FileTimerServerIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = FileTimerServer::create(
        io, dir.path(), {}, [this](const TimerExpiry& e, const Status&) { expiries.push_back(e); });
    ASSERT_TRUE(created.ok()) << created.error_message();
    server = std::move(created.value());
  }

  // Starts the worker script; `register_as` >= 0 registers it as that local rank.
  std::unique_ptr<LoopChild> start_worker(const char* signal_name, const char* after,
                                          const char* inside, const char* outside,
                                          int register_as) {
    auto child = LoopChild::start(io,
                                  {ddprun::testing::test_python(),
                                   DDPRUN_SOURCE_DIR "/tests/agent/workers/file_timer_client.py",
                                   server->path(), signal_name, after, inside, outside},
                                  {{"PYTHONDONTWRITEBYTECODE", "1"}});
    if (child && register_as >= 0) {
      server->add_worker(child->pid(), register_as);  // as the agent does, right after spawn
      child->on_exit = [this, pid = child->pid()](const ExitStatus&) {
        server->remove_worker(pid);  // as the agent's reap handler does
      };
    }
    return child;
  }

  // A worker whose scope (0.2 s) it outlives (60 s of work) is killed with `signo`.
  void expect_killed_with(int signo, const char* signal_name) {
    auto child = start_worker(signal_name, "0.2", "60", "0", 1);
    ASSERT_TRUE(child);
    ASSERT_TRUE(run_until(
        io, [&] { return child->exit().has_value(); }, seconds(30)))
        << "the worker was not killed within 30 s";
    EXPECT_EQ(child->exit()->signal, signo) << "exit code " << child->exit()->code;
    ASSERT_EQ(expiries.size(), 1u);
    EXPECT_EQ(expiries[0].pid, child->pid());
    EXPECT_EQ(expiries[0].local_rank, 1);
    EXPECT_EQ(expiries[0].signal, signo);
    // torch's default scope id, "<file>#<line>" of the frame above expires(): in torch 1.13
    // that is contextlib's own frame ("/usr/lib/python3.11/contextlib.py#137").
    EXPECT_NE(expiries[0].scope_id.find(".py#"), std::string::npos) << expiries[0].scope_id;
    EXPECT_EQ(server->stats().signals_sent, 1u);
  }

  boost::asio::io_context io;
  TempDir dir;
  std::unique_ptr<FileTimerServer> server;
  std::vector<TimerExpiry> expiries;
};

TEST_F(FileTimerServerIntegration, TorchClientsExpiredScopeKillsTheWorkerWithSigterm) {
  expect_killed_with(SIGTERM, "SIGTERM");
}

TEST_F(FileTimerServerIntegration, TorchClientsExpiredScopeKillsTheWorkerWithSigkill) {
  expect_killed_with(SIGKILL, "SIGKILL");
}

TEST_F(FileTimerServerIntegration, ScopeFinishedInTimeDoesNotKillTheWorker) {
  // Work 0 s inside a 0.5 s scope, then live 0.8 s past its expiration with it released.
  auto child = start_worker("SIGKILL", "0.5", "0", "0.8", 0);
  ASSERT_TRUE(child);
  ASSERT_TRUE(run_until(
      io,
      [&] {
        // The release may be read after the exit was reaped (then refused, like the agent would).
        const auto& s = server->stats();
        return child->exit().has_value() && s.requests + s.refused == 2;
      },
      seconds(30)));
  EXPECT_TRUE(child->exit()->success()) << "signal " << child->exit()->signal;
  EXPECT_GE(server->stats().requests, 1u);  // the acquire was served
  EXPECT_TRUE(expiries.empty());
}

TEST_F(FileTimerServerIntegration, UnregisteredProcessIsNeverKilled) {
  // The same expired scope as the kill tests, from a pid the agent did not start.
  auto child = start_worker("SIGKILL", "0.1", "0.5", "0", -1);
  ASSERT_TRUE(child);
  ASSERT_TRUE(run_until(
      io, [&] { return child->exit().has_value() && server->stats().refused == 2; }, seconds(30)));
  EXPECT_TRUE(child->exit()->success()) << "signal " << child->exit()->signal;
  EXPECT_TRUE(expiries.empty());
  EXPECT_EQ(server->stats().requests, 0u);
}

}  // namespace
}  // namespace ddprun::agent
