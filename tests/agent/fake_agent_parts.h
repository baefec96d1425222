// Fakes of everything the agent uses of the OS (agent/agent_parts.h): no port is opened, no
// file written, no signal raised and no real time waited. Timers run on a FakeClock that the
// test advances.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/agent_parts.h"
#include "common/clock.h"
#include "tests/agent/fake_process_launcher.h"

namespace ddprun::agent::testing {

// Offers a new port every round, as StoreHost does, without listening.
class FakeJobStoreHost final : public JobStoreHost {
 public:
  Result<int> offer_port() override { return next_port++; }
  Status on_assigned(const RoundAssignment&) override {
    ++rounds_assigned;
    return {};
  }
  void end_round() override { ++rounds_ended; }
  const store::StoreServer* server() const override { return nullptr; }

  int next_port = 40000;
  int rounds_assigned = 0;
  int rounds_ended = 0;
};

// Records the attempts; a hang is reported when the test calls events.on_hang, with the
// ranks' progress the test puts in `ranks`.
class FakeProgressWatch final : public ProgressWatch {
 public:
  void set_events(Events e) override { events = std::move(e); }
  bool detecting() const override { return false; }
  Status begin_attempt(const std::string& dir, int nproc) override {
    attempt_dirs.push_back(dir);
    return {};
  }
  std::vector<std::pair<std::string, std::string>> worker_env(int local_rank) const override {
    return {{"DDPRUN_HEARTBEAT_FILE", attempt_dirs.back() + "/" + std::to_string(local_rank)}};
  }
  void worker_started(int local_rank, pid_t pid) override { started[local_rank] = pid; }
  void workers_running() override {}
  void worker_exited(int local_rank, pid_t) override { started.erase(local_rank); }
  void end_attempt() override { ++attempts_ended; }
  std::vector<LocalRankProgress> progress() const override { return ranks; }

  Events events;
  std::vector<LocalRankProgress> ranks;  // what progress() says
  std::vector<std::string> attempt_dirs;
  std::map<int, pid_t> started;
  int attempts_ended = 0;
};

// A log directory that exists only as paths: <log_dir>/<run_id>_fake.
class FakeRunLogFiles final : public RunLogFiles {
 public:
  Result<RunLogDir> create_run_dir(const LogOptions& logs, const std::string& run_id,
                                   int) override {
    return RunLogDir(
        (logs.log_dir.empty() ? "/nonexistent" : logs.log_dir) + "/" + run_id + "_fake",
        logs.log_dir.empty());
  }
  Status prepare_attempt(const RunLogDir&, int attempt, int) override {
    prepared_attempts.push_back(attempt);
    return {};
  }
  Result<std::shared_ptr<UniqueFd>> open_log(const std::string& path) override {
    opened.push_back(path);
    return std::make_shared<UniqueFd>();
  }
  std::vector<std::string> last_lines(const std::string& path, std::size_t) override {
    auto it = file_lines.find(path);
    return it == file_lines.end() ? std::vector<std::string>{} : it->second;
  }
  std::optional<std::string> finish_run(const RunLogDir&) override {
    removed = true;
    return std::nullopt;
  }

  std::vector<int> prepared_attempts;
  std::vector<std::string> opened;
  std::map<std::string, std::vector<std::string>> file_lines;  // what last_lines() finds
  bool removed = false;
};

// Signals the test delivers by hand.
class FakeSignalSource final : public SignalSource {
 public:
  void watch(std::function<void(int)> on_signal) override { handler = std::move(on_signal); }
  void stop() override { handler = nullptr; }
  void deliver(int signo) {
    if (handler) handler(signo);
  }
  std::function<void(int)> handler;
};

// Notices the test delivers by hand, as a worker's bootstrap would send them.
class FakeWorkerChannel final : public WorkerChannel {
 public:
  void set_handler(Handler h) override { handler = std::move(h); }
  std::vector<std::pair<std::string, std::string>> worker_env() const override {
    return {{"DDPRUN_WORKER_SOCKET", "/fake/agent.sock"}};
  }
  void deliver(const WorkerNotice& notice) {
    if (handler) handler(notice);
  }
  Handler handler;
};

// A timer that expires when its FakeClock reaches the deadline (FakeAgentParts::advance).
class FakeClockTimer final : public DeadlineTimer {
 public:
  explicit FakeClockTimer(const FakeClock& clock) : clock_(clock) {}
  void arm(Millis after, std::function<void()> on_expiry) override {
    deadline = clock_.steady_now() + after;
    callback_ = std::move(on_expiry);
  }
  void cancel() override { callback_ = nullptr; }
  bool armed() const { return static_cast<bool>(callback_); }
  void fire_if_due() {
    if (callback_ && clock_.steady_now() >= deadline) std::exchange(callback_, nullptr)();
  }
  SteadyTime deadline{};

 private:
  const FakeClock& clock_;
  std::function<void()> callback_;
};

// What /proc would say, set by the test per pid; a pid it did not set reads as gone (empty).
class FakeProcessInspector final : public ProcessInspector {
 public:
  ProcessSnapshot inspect(pid_t pid) const override {
    inspected.push_back(pid);
    auto it = processes.find(pid);
    return it == processes.end() ? ProcessSnapshot{} : it->second;
  }
  std::map<pid_t, ProcessSnapshot> processes;
  mutable std::vector<pid_t> inspected;
};

// Records each wait; the test answers it (answer()), as NVML would once memory is freed.
class FakeGpuMemoryWait final : public GpuMemoryWait {
 public:
  void wait(std::vector<pid_t> pids, std::function<void(Status)> done) override {
    waited_for.push_back(std::move(pids));
    if (answer_at_once) return done(Status());
    pending = std::move(done);
  }
  void cancel() override { pending = nullptr; }
  void answer(Status status = {}) {
    if (auto done = std::exchange(pending, nullptr)) done(std::move(status));
  }

  bool answer_at_once = true;  // false: each wait waits for answer()
  std::vector<std::vector<pid_t>> waited_for;
  std::function<void(Status)> pending;
};

// Every fake, and the clock their timers run on. The workers' base environment is a fixed map,
// not the test's own.
struct FakeAgentParts {
  FakeClock clock;
  FakeProcessLauncher launcher;
  FakeJobStoreHost store;
  FakeProgressWatch progress;
  FakeRunLogFiles log_files;
  FakeClockTimer shutdown_timer{clock};
  FakeClockTimer drain_timer{clock};
  FakeSignalSource signals;
  FakeWorkerChannel channel;
  FakeClockTimer hang_timer{clock};
  FakeClockTimer health_check_timer{clock};
  FakeClockTimer health_interval_timer{clock};
  FakeClockTimer kill_wait_timer{clock};
  FakeProcessInspector inspector;
  FakeGpuMemoryWait gpu_memory;
  EnvMap worker_base_env{{"HOME", "/home/trainer"}, {"PATH", "/usr/bin:/bin"}};

  AgentParts with(Coordinator& coordinator) {
    return {.launcher = launcher,
            .coordinator = coordinator,
            .clock = clock,
            .store = store,
            .progress = progress,
            .log_files = log_files,
            .shutdown_timer = shutdown_timer,
            .drain_timer = drain_timer,
            .signals = signals,
            .channel = channel,
            .hang_timer = hang_timer,
            .health_check_timer = health_check_timer,
            .health_interval_timer = health_interval_timer,
            .kill_wait_timer = kill_wait_timer,
            .inspector = inspector,
            .gpu_memory = gpu_memory,
            .worker_base_env = worker_base_env};
  }
  // Moves the clock on and fires the timers that became due.
  void advance(Millis by) {
    clock.advance(by);
    for (FakeClockTimer* timer : {&shutdown_timer, &drain_timer, &hang_timer, &health_check_timer,
                                  &health_interval_timer, &kill_wait_timer}) {
      timer->fire_if_due();
    }
  }
};

}  // namespace ddprun::agent::testing
