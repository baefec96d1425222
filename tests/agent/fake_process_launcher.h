// Test doubles for the worker group's side effects: a launcher that records spawns and
// signals without forking, and a timer that fires only when the test says so.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/process/deadline_timer.h"
#include "agent/process/process_launcher.h"

namespace ddprun::agent::testing {

class FakeProcessLauncher final : public ProcessLauncher {
 public:
  // Tests feed exits to the agent themselves; the handler is kept to check it is set.
  void set_exit_handler(ExitHandler handler) override { exit_handler = std::move(handler); }
  Result<SpawnedProcess> spawn(const SpawnRequest& request) override {
    if (fail_executable && request.executable == *fail_executable) {
      return Status::error("cannot execute " + request.executable + ": No such file or directory");
    }
    spawned.push_back(request);
    SpawnedProcess p;
    p.pid = next_pid++;
    return p;
  }
  Status confirm_started(SpawnedProcess& process) override {
    if (exec_fails_for == process.pid) return Status::error("cannot execute: Permission denied");
    return {};
  }
  void signal_group(pid_t pgid, int signo) override { signals.emplace_back(pgid, signo); }
  void abandon(pid_t pid) override { abandoned.push_back(pid); }

  // Signals sent to `pgid`, in order.
  std::vector<int> signals_to(pid_t pgid) const {
    std::vector<int> out;
    for (auto [pid, sig] : signals) {
      if (pid == pgid) out.push_back(sig);
    }
    return out;
  }

  ExitHandler exit_handler;
  std::vector<SpawnRequest> spawned;
  std::vector<std::pair<pid_t, int>> signals;
  std::vector<pid_t> abandoned;                // abandon()ed children, in order
  std::optional<std::string> fail_executable;  // spawn() itself fails (fork, pipes)
  pid_t exec_fails_for = -1;                   // this child's exec fails
  pid_t next_pid = 1000;
};

class FakeDeadlineTimer final : public DeadlineTimer {
 public:
  void arm(Millis after, std::function<void()> on_expiry) override {
    armed_for = after;
    callback = std::move(on_expiry);
  }
  void cancel() override { callback = nullptr; }
  bool armed() const { return static_cast<bool>(callback); }
  void fire() {
    auto cb = std::move(callback);
    callback = nullptr;
    if (cb) cb();
  }

  std::optional<Millis> armed_for;
  std::function<void()> callback;
};

}  // namespace ddprun::agent::testing
