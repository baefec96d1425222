// The real ddp-rendezvous executable for tests (tests needing DDP_RENDEZVOUS_BIN): the daemon
// as a child process on a free loopback port (signalled only by its own PID, killed when the
// object goes), and its subcommands run as a user runs them.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/clock.h"

extern char** environ;

namespace ddprun::rdzv::testing {

using namespace std::chrono_literals;

class Daemon {
 public:
  // The daemon on a free loopback port, with `extra` flags after the test's own; stderr goes
  // with stdout when `merge_stderr`.
  // `max_fds` > 0: the daemon's RLIMIT_NOFILE (set on this process around the spawn, which
  // the child inherits; posix_spawn cannot set it).
  // `port` 0: a free one.
  explicit Daemon(std::vector<std::string> extra = {}, bool merge_stderr = false,
                  rlim_t max_fds = 0, uint16_t port = 0) {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    if (merge_stderr) posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    std::vector<std::string> args = {
        DDP_RENDEZVOUS_BIN, "--host", "127.0.0.1",        "--port", std::to_string(port),
        "--log-level",      "warn",   "--shutdown-grace", "300ms"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    rlimit saved{};
    ::getrlimit(RLIMIT_NOFILE, &saved);
    if (max_fds > 0) {
      rlimit low = saved;
      low.rlim_cur = max_fds;
      ::setrlimit(RLIMIT_NOFILE, &low);
    }
    EXPECT_EQ(posix_spawn(&pid_, DDP_RENDEZVOUS_BIN, &actions, nullptr, argv.data(), environ), 0);
    if (max_fds > 0) ::setrlimit(RLIMIT_NOFILE, &saved);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_ = fds[0];
  }
  ~Daemon() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);  // our own child, by PID
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }
  // Reads stdout until `stop(text)` or EOF or the timeout; returns what it read.
  std::string read_stdout(Millis timeout, const std::function<bool(const std::string&)>& stop) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[256];
    while (!stop(text_)) {
      const auto left =
          std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) {
        eof_ = true;
        break;
      }
      text_.append(buf, static_cast<size_t>(n));
    }
    return text_;
  }
  uint16_t port() {
    read_stdout(10s, [](const std::string& t) { return t.find('\n') != std::string::npos; });
    const auto colon = text_.rfind(':', text_.find('\n'));
    EXPECT_EQ(text_.rfind("listening on 127.0.0.1:", 0), 0u) << text_;
    return static_cast<uint16_t>(std::stoi(text_.substr(colon + 1)));
  }
  // Waits (bounded) for the daemon to end by itself; its exit code, or -1.
  int wait_exit(Millis timeout) {
    read_stdout(timeout, [this](const std::string&) { return eof_; });
    if (!eof_) return -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  const std::string& text() const { return text_; }
  pid_t pid() const { return pid_; }
  // SIGTERM, then wait (bounded) for stdout to close; returns the exit status or -1.
  int terminate(Millis timeout) {
    ::kill(pid_, SIGTERM);
    read_stdout(timeout, [this](const std::string&) { return eof_; });
    if (!eof_) return -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool eof_ = false;
  std::string text_;
};

// `ddp-rendezvous SUBCOMMAND ARGS` as a user runs it ("status", "release"): its exit code and
// what it printed (stdout and stderr). The commands bound themselves (5 s query timeout).
inline std::pair<int, std::string> run_subcommand(const std::string& subcommand,
                                                  const std::vector<std::string>& args) {
  std::string cmd = std::string(DDP_RENDEZVOUS_BIN) + " " + subcommand;
  for (const auto& a : args) cmd += " '" + a + "'";
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[256];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline std::pair<int, std::string> run_status(const std::vector<std::string>& args) {
  return run_subcommand("status", args);
}

}  // namespace ddprun::rdzv::testing
