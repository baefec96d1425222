// One attempt's workers: started together, supervised together, stopped together.
//
// A pure state machine driven by events (child exits, stop requests, the shutdown deadline)
// with its side effects behind ProcessLauncher and DeadlineTimer, so it is unit-tested with
// fakes. The agent feeds it events from its Asio loop.
//
//   kRunning --worker fails--> kStopping (SIGTERM to the others, SIGKILL at the deadline)
//   kRunning --worker says it is failing--> kStopping (the same, the failing one left to exit)
//   kRunning --stop(signal)--> kStopping (that signal to every worker, SIGKILL at the deadline)
//   kRunning --all exit 0--->  kFinished(succeeded)
//   kStopping --all exited-->  kFinished(failed | stopped)
//
// When a worker exits, its whole process group is SIGKILLed at once, so that no grandchild of
// a finished worker outlives it; a reaped worker is never signalled again.
//
// A worker SIGKILLed but not reaped within the kill-wait bound is stuck in the kernel (an
// uninterruptible sleep: a dead mount, a wedged driver). It is given up: no longer waited for,
// never signalled again, listed in GroupResult::unkillable; the group finishes without it.
#pragma once

#include <sys/types.h>

#include <csignal>

#include <optional>
#include <string>
#include <vector>

#include "agent/failure_report.h"
#include "agent/process/deadline_timer.h"
#include "agent/process/exit_status.h"
#include "agent/process/process_launcher.h"
#include "common/clock.h"

namespace ddprun::agent {

// One worker to start.
struct WorkerLaunch {
  int local_rank = 0;
  int rank = 0;
  std::string error_file;  // TORCHELASTIC_ERROR_FILE, named in failure reports
  SpawnRequest request;
};

// A worker still there `kill_wait_timeout` after its SIGKILL (WorkerGroup gave up on it).
struct UnkillableWorker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
};

struct GroupResult {
  enum class Outcome {
    kSucceeded,  // every worker exited 0
    kFailed,     // a worker failed (or could not start); `failures` says which, first = root
    kStopped,    // stop() was called (a signal or a membership change); `stop_signal` says how
  };
  Outcome outcome = Outcome::kSucceeded;
  std::vector<WorkerFailure> failures;
  int stop_signal = 0;
  // Workers given up on after SIGKILL, in local-rank order; whatever the outcome, the node
  // cannot go on with them (the agent leaves the job, kExitWorkerUnkillable).
  std::vector<UnkillableWorker> unkillable;
};

class WorkerGroupObserver {
 public:
  virtual ~WorkerGroupObserver() = default;
  // A worker started; the observer may take its pipes (for tee/filtered output).
  virtual void on_worker_started(const WorkerLaunch& launch, SpawnedProcess& process) {}
  // A worker ended (or was stopped by job control), before the group acts on it.
  virtual void on_worker_exited(const WorkerLaunch& launch, pid_t pid, const ExitStatus& status) {}
  // A worker did not exit within the kill-wait bound after SIGKILL: the group gives up on it.
  virtual void on_worker_unkillable(const WorkerLaunch& launch, pid_t pid) {}
  // Every worker has exited. Called once, as the group's last act: the observer must not
  // destroy the group from inside this call (post the follow-up to the event loop instead).
  virtual void on_group_finished(const GroupResult& result) = 0;
};

struct WorkerGroupOptions {
  Millis shutdown_timeout{30000};  // grace between the stop signal and SIGKILL
  // How long a SIGKILLed worker may take to be reaped before it is given up (unkillable).
  Millis kill_wait_timeout{30000};
  std::string hostname;  // for failure records
};

// Not thread-safe: driven from the agent's event-loop thread. The launcher, timers, clock and
// observer must outlive the group. `timer` paces the stop (signal → SIGKILL), `kill_wait_timer`
// the wait for SIGKILLed workers to be reaped.
class WorkerGroup {
 public:
  WorkerGroup(WorkerGroupOptions options, ProcessLauncher& launcher, DeadlineTimer& timer,
              DeadlineTimer& kill_wait_timer, const Clock& clock, WorkerGroupObserver& observer);

  // Starts every worker in order (forked back to back, then each exec confirmed). A worker that
  // cannot start is a failure: those not yet forked are not started, the others are stopped.
  void start(std::vector<WorkerLaunch> launches);
  // Feeds a reaped child's exit. Returns false when `pid` is not one of this group's workers.
  bool on_child_exit(pid_t pid, ExitStatus status);
  // A worker was stopped by `signo` (not ended). A job-control stop (is_job_control_stop) is
  // its failure: recorded, the worker SIGKILLed (stopped, it cannot act on SIGTERM), the rest
  // stopped; its exit comes later through on_child_exit. Other stops (SIGSTOP) are left alone.
  // Returns false when `pid` is not one of this group's running workers.
  bool on_child_stopped(pid_t pid, int signo);
  // Stops the group: `signo` to every running worker's process group now, SIGKILL after the
  // shutdown timeout. A second call with SIGKILL (or while stopping for a signal) kills at once.
  void stop(int signo);
  // A running worker said it is failing (its uncaught exception, worker_channel.h) and is on
  // its way out: its failure is recorded now (the root cause when it is the first) and the rest
  // are stopped as for any failure, while the worker itself is left to finish (its atexit
  // handlers, its error file) within the shutdown timeout. Its exit then gives the record its
  // exit status. Returns false when `pid` is not one of this group's running workers; records
  // nothing unless the group is running.
  bool worker_failing(pid_t pid);
  // The group has failed although its workers are still running (ranks hung): each of
  // `failures` (matched to a running worker by global rank; a rank of another node is kept as
  // given) becomes a failure, in order (the first is the root cause), with its error_message
  // and `hung`; then `signo` goes to every running worker (SIGABRT: they print their stacks)
  // and SIGKILL after the shutdown timeout, as for any failure. Only while running.
  void fail_running(const std::vector<WorkerFailure>& failures, int signo);
  // The signal a worker's failure sends the rest (SIGTERM by default). A hang verdict sets
  // SIGABRT: a rank that dies of the hang (its peer stopped) must not cost the others their
  // stacks.
  void stop_failures_with(int signo) { failure_stop_signal_ = signo; }

  bool finished() const { return state_ == State::kFinished; }
  // PIDs of workers not yet reaped (those given up on as unkillable are not listed).
  std::vector<pid_t> running_pids() const;

 private:
  enum class State { kIdle, kRunning, kStopping, kFinished };
  struct Worker {
    WorkerLaunch launch;
    pid_t pid = -1;
    bool running = false;
    // worker_failing: its failure is failures_[failure_index], its exit still to come.
    bool failing = false;
    std::size_t failure_index = 0;
    std::optional<SteadyTime> killed_at{};  // its first SIGKILL
  };

  void record_failure(const Worker& worker, ExitStatus status);
  void record_start_failure(const WorkerLaunch& launch, const std::string& why);
  void begin_stop(int signo);
  void kill_running();
  // SIGKILL to `worker`'s group; its first starts the kill-wait bound.
  void kill(Worker& worker);
  void arm_kill_wait();
  void give_up_unkillable();
  void finish_if_done();

  WorkerGroupOptions options_;
  ProcessLauncher& launcher_;
  DeadlineTimer& timer_;
  DeadlineTimer& kill_wait_timer_;  // at the earliest SIGKILLed running worker's bound
  const Clock& clock_;
  WorkerGroupObserver& observer_;

  State state_ = State::kIdle;
  std::vector<Worker> workers_;
  std::vector<WorkerFailure> failures_;  // failures seen before the stop began, in order
  std::vector<UnkillableWorker> unkillable_;
  std::optional<int> stop_signal_;     // set when stop() (not a failure) began the stop
  int failure_stop_signal_ = SIGTERM;  // stop_failures_with
};

}  // namespace ddprun::agent
