#include "agent/process/worker_group.h"

#include <algorithm>
#include <csignal>

namespace ddprun::agent {

WorkerGroup::WorkerGroup(WorkerGroupOptions options, ProcessLauncher& launcher,
                         DeadlineTimer& timer, DeadlineTimer& kill_wait_timer, const Clock& clock,
                         WorkerGroupObserver& observer)
    : options_(std::move(options)),
      launcher_(launcher),
      timer_(timer),
      kill_wait_timer_(kill_wait_timer),
      clock_(clock),
      observer_(observer) {}

void WorkerGroup::start(std::vector<WorkerLaunch> launches) {
  state_ = State::kRunning;
  workers_.reserve(launches.size());
  // Fork every worker first, then confirm each exec: the children exec in parallel.
  std::vector<SpawnedProcess> spawned;
  spawned.reserve(launches.size());
  for (auto& launch : launches) {
    auto process = launcher_.spawn(launch.request);
    if (!process) {
      record_start_failure(launch, process.error_message());
      break;  // the rest are not started
    }
    Worker& worker = workers_.emplace_back(Worker{std::move(launch)});
    worker.pid = process->pid;
    worker.running = true;
    spawned.push_back(std::move(process.value()));
  }
  for (std::size_t i = 0; i < spawned.size(); ++i) {
    Worker& worker = workers_[i];
    if (Status started = launcher_.confirm_started(spawned[i]); !started) {
      worker.running = false;  // already reaped by the launcher
      record_start_failure(worker.launch, started.message());
      continue;
    }
    observer_.on_worker_started(worker.launch, spawned[i]);
  }
  if (!failures_.empty()) {
    begin_stop(SIGTERM);
    finish_if_done();
  }
}

void WorkerGroup::record_start_failure(const WorkerLaunch& launch, const std::string& why) {
  // Reported like a worker that exited 127 (the shell's "cannot execute"), with the reason.
  WorkerFailure failure;
  failure.local_rank = launch.local_rank;
  failure.rank = launch.rank;
  failure.exit = ExitStatus::exited(127);
  failure.time = format_report_time(clock_.wall_now());
  failure.hostname = options_.hostname;
  failure.error_file = launch.error_file;
  failure.error_message = why;
  failure.traceback = why;
  failures_.push_back(std::move(failure));
}

bool WorkerGroup::on_child_exit(pid_t pid, ExitStatus status) {
  for (Worker& worker : workers_) {
    if (worker.pid != pid || !worker.running) continue;
    worker.running = false;
    // A failure announced before the exit: the exit completes its record (an exit 0 after an
    // uncaught exception, an atexit handler's os._exit(0), leaves it failed with code 1).
    if (worker.failing && !status.success()) failures_[worker.failure_index].exit = status;
    observer_.on_worker_exited(worker.launch, pid, status);
    // Grandchildren die with their worker; the group id is still ours to use right now.
    launcher_.signal_group(pid, SIGKILL);
    launcher_.release_group(pid);
    if (!status.success() && state_ == State::kRunning) {
      record_failure(worker, status);
      begin_stop(failure_stop_signal_);
    }
    finish_if_done();
    return true;
  }
  return false;
}

bool WorkerGroup::on_child_stopped(pid_t pid, int signo) {
  for (Worker& worker : workers_) {
    if (worker.pid != pid || !worker.running) continue;
    if (!is_job_control_stop(signo)) return true;
    observer_.on_worker_exited(worker.launch, pid, ExitStatus::stopped_by(signo));
    if (state_ == State::kRunning) {
      record_failure(worker, ExitStatus::stopped_by(signo));
      begin_stop(SIGTERM);
    }
    kill(worker);
    return true;
  }
  return false;
}

bool WorkerGroup::worker_failing(pid_t pid) {
  for (Worker& worker : workers_) {
    if (worker.pid != pid || !worker.running) continue;
    if (state_ != State::kRunning) return true;
    record_failure(worker, ExitStatus::exited(1));
    worker.failing = true;
    worker.failure_index = failures_.size() - 1;
    begin_stop(failure_stop_signal_);
    return true;
  }
  return false;
}

void WorkerGroup::stop(int signo) {
  if (state_ == State::kFinished || state_ == State::kIdle) return;
  if (state_ == State::kStopping) {
    // Asked again (a second Ctrl-C): no more grace.
    kill_running();
    return;
  }
  stop_signal_ = signo;
  begin_stop(signo);
  finish_if_done();
}

void WorkerGroup::fail_running(const std::vector<WorkerFailure>& failures, int signo) {
  if (state_ != State::kRunning) return;
  for (const WorkerFailure& given : failures) {
    const Worker* local = nullptr;
    for (const Worker& worker : workers_) {
      if (worker.launch.rank == given.rank && worker.running) local = &worker;
    }
    if (local) {
      record_failure(*local, ExitStatus::killed(signo));
      failures_.back().error_message = given.error_message;
      failures_.back().hung = given.hung;
    } else {
      // A rank of another node: named as it was given (the stop signal stands for its end).
      WorkerFailure remote = given;
      remote.exit = ExitStatus::killed(signo);
      remote.time = format_report_time(clock_.wall_now());
      failures_.push_back(std::move(remote));
    }
  }
  begin_stop(signo);
}

std::vector<pid_t> WorkerGroup::running_pids() const {
  std::vector<pid_t> pids;
  for (const Worker& w : workers_) {
    if (w.running) pids.push_back(w.pid);
  }
  return pids;
}

void WorkerGroup::record_failure(const Worker& worker, ExitStatus status) {
  WorkerFailure failure;
  failure.local_rank = worker.launch.local_rank;
  failure.rank = worker.launch.rank;
  failure.pid = worker.pid;
  failure.exit = status;
  failure.time = format_report_time(clock_.wall_now());
  failure.hostname = options_.hostname;
  failure.error_file = worker.launch.error_file;
  failures_.push_back(std::move(failure));
}

void WorkerGroup::begin_stop(int signo) {
  state_ = State::kStopping;
  for (Worker& w : workers_) {
    // One on its way out by itself is not interrupted; the deadline's SIGKILL still applies.
    if (!w.running || w.failing) continue;
    if (signo == SIGKILL) {
      kill(w);
    } else {
      launcher_.signal_group(w.pid, signo);
    }
  }
  if (signo == SIGKILL) return;
  timer_.arm(options_.shutdown_timeout, [this] { kill_running(); });
}

void WorkerGroup::kill_running() {
  for (Worker& w : workers_) {
    if (w.running) kill(w);
  }
}

void WorkerGroup::kill(Worker& worker) {
  launcher_.signal_group(worker.pid, SIGKILL);
  if (worker.killed_at) return;  // its bound runs from the first SIGKILL
  worker.killed_at = clock_.steady_now();
  arm_kill_wait();
}

// One timer for every SIGKILLed worker: it wakes at the earliest bound still pending.
void WorkerGroup::arm_kill_wait() {
  std::optional<SteadyTime> next;
  for (const Worker& w : workers_) {
    if (!w.running || !w.killed_at) continue;
    const SteadyTime bound = *w.killed_at + options_.kill_wait_timeout;
    next = next ? std::min(*next, bound) : bound;
  }
  if (!next) return kill_wait_timer_.cancel();
  const auto left = std::max(SteadyTime::duration{0}, *next - clock_.steady_now());
  kill_wait_timer_.arm(std::chrono::ceil<Millis>(left), [this] { give_up_unkillable(); });
}

// SIGKILL cannot be caught: a worker still unreaped after the bound waits in the kernel and may
// never come back. Waiting for it would keep the node (and the job) forever.
void WorkerGroup::give_up_unkillable() {
  const SteadyTime now = clock_.steady_now();
  for (Worker& w : workers_) {
    if (!w.running || !w.killed_at || now < *w.killed_at + options_.kill_wait_timeout) continue;
    w.running = false;  // never waited for or signalled again: its pid stays our unreaped child
    unkillable_.push_back({w.launch.local_rank, w.launch.rank, w.pid});
    observer_.on_worker_unkillable(w.launch, w.pid);
  }
  arm_kill_wait();
  finish_if_done();
}

void WorkerGroup::finish_if_done() {
  if (state_ == State::kFinished) return;
  for (const Worker& w : workers_) {
    if (w.running) return;
  }
  timer_.cancel();
  kill_wait_timer_.cancel();
  state_ = State::kFinished;
  GroupResult result;
  result.unkillable = unkillable_;
  if (!failures_.empty()) {
    result.outcome = GroupResult::Outcome::kFailed;
    result.failures = failures_;
  } else if (stop_signal_) {
    result.outcome = GroupResult::Outcome::kStopped;
    result.stop_signal = *stop_signal_;
  }
  observer_.on_group_finished(result);
}

}  // namespace ddprun::agent
