#include "agent/agent.h"

#include <csignal>
#include <cstdio>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "agent/progress/hang_report.h"
#include "agent/worker_launches.h"
#include "common/exit_codes.h"

namespace ddprun::agent {
namespace {

// Bound on waiting for workers' output pipes to close after they exit: a grandchild that
// escaped its process group may hold one open forever.
constexpr Millis kOutputDrainTimeout{2000};
constexpr std::size_t kStderrTailLines = 20;

}  // namespace

Agent::Agent(AgentOptions options, boost::asio::io_context& io, AgentParts parts)
    : options_(std::move(options)),
      io_(io),
      launcher_(parts.launcher),
      coordinator_(parts.coordinator),
      clock_(parts.clock),
      store_(parts.store),
      progress_watch_(parts.progress),
      log_files_(parts.log_files),
      shutdown_timer_(parts.shutdown_timer),
      drain_timer_(parts.drain_timer),
      kill_wait_timer_(parts.kill_wait_timer),
      inspector_(parts.inspector),
      gpu_memory_(parts.gpu_memory),
      signals_(parts.signals),
      channel_(parts.channel),
      base_env_(parts.worker_base_env),
      output_(io, {options_.logs, options_.role, options_.hostname}, parts.log_files),
      hang_(parts.coordinator, parts.hang_timer, parts.clock),
      health_check_({parts.launcher, parts.health_check_timer, parts.health_interval_timer},
                    options_.health_check, options_.master_addr),
      restart_guard_(options_.progress.max_no_progress_restarts),
      failure_history_(options_.node_failures.limit, options_.node_failures.window) {
  progress_watch_.set_events({[this](const HangVerdict& v) { on_hang(v); },
                              [](const TimerExpiry& e) {
                                spdlog::warn(
                                    "torch's file timer: scope '{}' of pid {} expired; sent it {}",
                                    e.scope_id, e.pid, signal_name(e.signal));
                              },
                              [this](const std::vector<LocalRankProgress>& p) { share(p); }});
  signals_.watch([this](int signo) { on_signal(signo); });
  channel_.set_handler([this](const WorkerNotice& notice) { on_worker_notice(notice); });
  launcher_.set_exit_handler([this](pid_t pid, ExitStatus status) { on_child_exit(pid, status); });
  health_check_.set_outcome_handler([this](const std::vector<builtin::CheckOutcome>& outcomes) {
    notify([&](AgentObserver& o) { o.on_node_checks(outcomes); });
  });
}

Agent::~Agent() {
  launcher_.set_exit_handler(nullptr);
  channel_.set_handler(nullptr);
  signals_.stop();
  progress_watch_.set_events({});
}

int Agent::run() {
  start();
  if (!exit_code_) io_.run();
  // Grandchildren that escaped their group, the sentinel; a worker given up on is not waited
  // for again (the launcher was told to abandon it), the others only up to the bound.
  launcher_.end_all_children(options_.kill_wait_timeout);
  return exit_code_.value_or(1);
}

void Agent::start() {
  if (phase_ != Phase::kIdle) return;  // a signal may already have ended the job
  auto dir = log_files_.create_run_dir(options_.logs, options_.run_id, options_.nproc_per_node);
  if (!dir) {
    spdlog::error("{}", dir.error_message());
    finish(1);
    return;
  }
  log_dir_ = std::move(dir.value());
  coordinator_.set_event_handler([this](const CoordinatorEvent& e) { on_coordinator_event(e); });
  begin_round();
}

void Agent::on_child_exit(pid_t pid, ExitStatus status) {
  if (health_check_.on_child_exit(pid, status)) return;
  if (!group_) return;
  if (status.stopped) {
    if (group_->on_child_stopped(pid, status.signal) && !is_job_control_stop(status.signal)) {
      spdlog::warn("worker pid {} was stopped by {}; the job waits until it is continued (SIGCONT)",
                   pid, signal_name(status.signal));
    }
    return;
  }
  group_->on_child_exit(pid, status);
  // Any other pid is an adopted grandchild: reaping it was all there was to do.
}

// A worker's bootstrap says its script raised: the rest are stopped now, not once the failing
// interpreter has finished shutting down.
void Agent::on_worker_notice(const WorkerNotice& notice) {
  if (notice.kind == WorkerNotice::Kind::kStopJob) return on_stop_request(notice);
  if (notice.kind == WorkerNotice::Kind::kExcludeNode) return on_exclude_request(notice);
  if (phase_ != Phase::kSupervising || !group_ || interrupt_.kind != Interrupt::Kind::kNone) return;
  if (!group_->worker_failing(notice.pid)) return;  // not a running worker of this attempt
  spdlog::debug("worker pid {} raised {}; stopping the others", notice.pid, notice.message);
  if (!failed_at_) failed_at_ = clock_.steady_now();
}

// A rank asked to end the job for good (ddprun.stop_job): its failure is the root cause and is
// reported as not restartable (restart_guard.h); the others are stopped as for any failure.
void Agent::on_stop_request(const WorkerNotice& notice) {
  if ((phase_ != Phase::kSupervising && phase_ != Phase::kDraining) || !assignment_) return;
  const int rank = assignment_->rank_offset + std::max(0, notice.local_rank);
  spdlog::error("rank {} (pid {}) asked to stop the job: {}", rank, notice.pid, notice.message);
  if (!restart_guard_.stop_requested()) {
    notify([&](AgentObserver& o) { o.on_stop_requested(rank, notice.message); });
  }
  restart_guard_.stop_requested(rank, notice.message);
  if (phase_ != Phase::kSupervising) return;  // the workers are ending already
  if (!failed_at_) failed_at_ = clock_.steady_now();
  if (group_->worker_failing(notice.pid)) return;  // the rank itself: it is on its way out
  // A process of the rank's (a data-loader worker) asked, and the rank may run on: its rank is
  // the root cause, and every worker is stopped.
  WorkerFailure asked;
  asked.rank = rank;
  asked.local_rank = std::max(0, notice.local_rank);
  asked.error_message = "asked to stop the job: " + notice.message;
  group_->fail_running({asked}, SIGTERM);
}

void Agent::begin_round() {
  phase_ = Phase::kJoining;
  join_started_ = clock_.steady_now();
  notify([&](AgentObserver& o) { o.on_joining(attempt_); });
  interrupt_ = {};  // a rejoin that asked for this round has been served by it
  if (health_check_.enabled()) return check_health_then_join();
  join_round();
}

// Issue 38: on a GPU node the driver frees an exited worker's memory a little after it is
// reaped; workers started before that can die out of memory. The wait is bounded
// (--gpu_memory_wait) and a node without NVIDIA GPUs does not wait.
void Agent::restart_round() {
  phase_ = Phase::kRestarting;
  gpu_memory_.wait(attempt_pids_, [this](const Status& released) {
    if (phase_ != Phase::kRestarting) return;
    if (!released) spdlog::error("{}; starting the next attempt anyway", released.message());
    begin_round();
  });
}

void Agent::join_round() {
  JoinOffer offer;
  offer.local_world_size = options_.nproc_per_node;
  offer.master_addr = options_.master_addr;
  auto port = store_.offer_port();
  if (!port) {
    spdlog::error("{}", port.error_message());
    finish(1);
    return;
  }
  offer.master_port = *port;
  coordinator_.join(offer, [this](Result<RoundAssignment> assignment) {
    if (phase_ != Phase::kJoining) return;
    if (assignment.status().is_excluded()) return kept_out(assignment.status());
    if (!assignment) {
      spdlog::error("rendezvous failed: {}", assignment.error_message());
      finish(1);
      return;
    }
    notify([&](AgentObserver& o) {
      o.on_round_assigned(*assignment,
                          std::chrono::duration_cast<Millis>(clock_.steady_now() - join_started_));
    });
    if (Status hosted = store_.on_assigned(*assignment); !hosted) {
      spdlog::error("{}", hosted.message());
      finish(1);
      return;
    }
    start_workers(*assignment);
  });
}

void Agent::start_workers(const RoundAssignment& assignment) {
  if (Status s = log_files_.prepare_attempt(*log_dir_, attempt_, options_.nproc_per_node); !s) {
    spdlog::error("{}", s.message());
    finish(1);
    return;
  }
  output_.begin_attempt(*log_dir_, attempt_);
  if (Status s = progress_watch_.begin_attempt(log_dir_->attempt_dir(attempt_) + "/progress",
                                               options_.nproc_per_node);
      !s) {
    spdlog::error("{}", s.message());
    finish(1);
    return;
  }
  hang_.reset();
  restart_guard_.attempt_started();
  if (!stragglers_.current().stragglers.empty()) {  // named in the last attempt: judged afresh
    stragglers_.reset();
    notify([&](AgentObserver& o) { o.on_stragglers(stragglers_.current()); });
  }
  auto launches = make_worker_launches(
      {options_, assignment, base_env_, *log_dir_, attempt_, progress_watch_, channel_});
  spdlog::debug("starting {} workers: attempt {}, restart count {}, master {}:{}", launches.size(),
                attempt_, assignment.restart_count, assignment.master_addr, assignment.master_port);
  WorkerGroupOptions group_options{options_.shutdown_timeout, options_.kill_wait_timeout,
                                   options_.hostname};
  assignment_ = assignment;
  phase_ = Phase::kSupervising;
  WorkerGroupObserver& observer = *this;
  attempt_pids_.clear();
  group_ = std::make_unique<WorkerGroup>(group_options, launcher_, shutdown_timer_,
                                         kill_wait_timer_, clock_, observer);
  group_->start(std::move(launches));
  if (phase_ == Phase::kSupervising) {
    progress_watch_.workers_running();
    health_check_.watch(health_check_env(base_env_, options_, attempt_), health_check_output(),
                        [this](const Status& why) { on_unhealthy(why); });
    notify([&](AgentObserver& o) {
      o.on_workers_started(assignment, options_.nproc_per_node, failed_at_);
    });
    failed_at_.reset();
  }
}

void Agent::on_worker_started(const WorkerLaunch& launch, SpawnedProcess& process) {
  progress_watch_.worker_started(launch.local_rank, process.pid);
  attempt_pids_.push_back(process.pid);
  notify([&](AgentObserver& o) { o.on_worker_started(launch.local_rank, process.pid); });
  output_.attach(launch, process);
}

void Agent::on_worker_exited(const WorkerLaunch& launch, pid_t pid, const ExitStatus& status) {
  progress_watch_.worker_exited(launch.local_rank, pid);  // first: the pid may be reused after this
  // Only a worker's own failure counts; workers we stop (a signal, a rejoin) do not.
  if (!status.success() && !failed_at_ && phase_ == Phase::kSupervising &&
      interrupt_.kind == Interrupt::Kind::kNone) {
    failed_at_ = clock_.steady_now();
  }
  notify([&](AgentObserver& o) { o.on_worker_exited(launch.local_rank, pid, status); });
}

// SIGKILL did not end it: it waits in the kernel (a dead mount, a wedged driver) and may never
// come back. The node cannot go on with it, and restarting would not help: it is named (what
// /proc says of it) and the node leaves the job once the rest have exited (after_group).
void Agent::on_worker_unkillable(const WorkerLaunch& launch, pid_t pid) {
  const ProcessSnapshot snapshot = inspector_.inspect(pid);
  const std::string line = describe_unkillable(
      pid, launch.local_rank, std::chrono::duration<double>(options_.kill_wait_timeout).count(),
      snapshot);
  spdlog::error("{}; giving up on it: this node leaves the job", line);
  launcher_.abandon(pid);  // never waited for again
  progress_watch_.worker_exited(launch.local_rank, pid);
  notify([&](AgentObserver& o) { o.on_worker_unkillable(launch.local_rank, pid, snapshot); });
  if (interrupt_.kind == Interrupt::Kind::kUnkillable) {
    interrupt_.event.report.cause += "\n" + line;
    return;
  }
  Interrupt unkillable{Interrupt::Kind::kUnkillable, 0, {}, UnfitReason::kUnkillable};
  unkillable.event.report.cause = line;
  unkillable.event.exit_code = kExitWorkerUnkillable;
  interrupt(std::move(unkillable));
}

void Agent::on_group_finished(const GroupResult& result) {
  if (std::string summary = stragglers_.summary(); !summary.empty()) spdlog::info("{}", summary);
  notify([&](AgentObserver& o) { o.on_group_finished(result); });
  if (phase_ == Phase::kSupervising) phase_ = Phase::kDraining;
  // The group is still on the stack: continue from the event loop.
  boost::asio::post(io_, [this, result] { after_group(result); });
}

void Agent::after_group(const GroupResult& result) {
  store_.end_round();      // every worker has exited: the store has served its round
  health_check_.cancel();  // the periodic check ends with the workers
  // The attempt's steps, for --max_no_progress_restarts (read before the watch forgets them).
  std::vector<LocalRankProgress> steps = progress_watch_.progress();
  progress_watch_.end_attempt();
  drain_timer_.arm(kOutputDrainTimeout, [this] { output_.close_all(); });
  output_.when_drained([this, result, steps = std::move(steps)] {
    drain_timer_.cancel();
    ++attempt_;
    if (phase_ != Phase::kDraining) return;  // finished meanwhile
    switch (interrupt_.kind) {
      case Interrupt::Kind::kSignal:
        spdlog::warn("stopped workers on {}", signal_name(interrupt_.signo));
        return finish(128 + interrupt_.signo);
      case Interrupt::Kind::kUnkillable:  // the workers' failures, under the stuck ones
      case Interrupt::Kind::kUnfit:       // under the health check or the request
        return leave_unfit_interrupted(result);
      case Interrupt::Kind::kJobFailed:  // the job's report
        return end_with_job_failure(interrupt_.event);
      case Interrupt::Kind::kRejoin:
        // The round is already over for everyone (a node left or failed): a failure of ours
        // in it is a consequence, and reporting it would be ignored. Join the next round.
        if (interrupt_.event.worker_failure) {
          restart_guard_.attempt_failed(steps);
          if (leaves_for_failures(interrupt_.event.report)) return;
        }
        return restart_round();
      case Interrupt::Kind::kNone:
        break;
    }
    phase_ = Phase::kReporting;
    if (result.outcome == GroupResult::Outcome::kFailed) {
      restart_guard_.attempt_failed(steps);
      return handle_failure(result);
    }
    coordinator_.report_success([this](const Status& s) {
      if (phase_ != Phase::kReporting) return;
      if (!s) spdlog::error("{}", s.message());
      launcher_.workers_done();  // before the last work, which its exit then overlaps
      finish(s ? 0 : 1);
    });
  });
}

void Agent::handle_failure(const GroupResult& result) {
  FailureReport report = build_report(result);
  report.not_restartable = restart_guard_.not_restartable();
  if (hang_.active()) return settle_hang(std::move(report));
  send_report(report);
}

void Agent::send_report(const FailureReport& report) {
  coordinator_.report_failure(report, [this, report](Coordinator::FailureDecision decision) {
    if (phase_ != Phase::kReporting) return;
    // The job's report (identical on every node) when the coordinator has one, else ours;
    // with the coordinator's cause, when the job ended outside the workers (rendezvous lost).
    FailureReport shown = decision.report.failures.empty() ? report : decision.report;
    if (!decision.report.cause.empty()) shown.cause = decision.report.cause;
    if (decision.restart) {
      if (decision.counted && leaves_for_failures(shown)) return;
      notify([&](AgentObserver& o) { o.on_restart(decision.counted); });
      const auto& root = shown.root_cause();
      if (decision.counted) {
        // This restart is the job's restart_count + 1st of max_restarts (both job-wide).
        const int nth = assignment_->restart_count + 1;
        spdlog::warn(
            "worker group failed (rank {} exitcode {}); restarting (restart {} of {}; {} left)",
            root.rank, root.exit.torchrun_code(), nth, assignment_->max_restarts,
            std::max(0, assignment_->max_restarts - nth));
      } else {
        spdlog::warn(
            "worker group failed (rank {} exitcode {}) as the round ended elsewhere; "
            "joining the next round",
            root.rank, root.exit.torchrun_code());
      }
      restart_round();
      return;
    }
    (void)std::fputs(shown.render().c_str(), stderr);
    finish(decision.exit_code);
  });
}

FailureReport Agent::build_report(const GroupResult& result) const {
  FailureReport report;
  report.entrypoint = options_.command.display_name;
  report.interpreter = options_.command.interpreter;
  report.failures = result.failures;
  const int attempt = attempt_ - 1;  // the attempt that just ended
  for (WorkerFailure& f : report.failures) {
    load_error_file(f);
    f.stderr_tail =
        output_.stderr_lines(f.local_rank, attempt, f.hung ? kHungStackLines : kStderrTailLines);
  }
  return report;
}

void Agent::on_signal(int signo) {
  if (phase_ == Phase::kDone) return;
  interrupt({Interrupt::Kind::kSignal, signo, {}});
  switch (phase_) {
    case Phase::kSupervising:
      spdlog::warn("received {}: forwarding it to every worker group", signal_name(signo));
      group_->stop(signo);  // a second signal escalates to SIGKILL
      return;
    case Phase::kDraining:
      return;  // after_group() ends the job once the output is drained
    default:
      return finish(128 + signo);  // no workers (waiting for a round, or reporting)
  }
}

void Agent::on_coordinator_event(const CoordinatorEvent& event) {
  if (phase_ == Phase::kDone) return;
  spdlog::info("{}", event.reason);
  const bool job_failed = event.kind == CoordinatorEvent::Kind::kJobFailed;
  if (phase_ == Phase::kReporting && !job_failed) {
    // Only at the exit barrier (a failure report's answer comes through its callback): the
    // round did not finish on every node, and the job restarts as a whole.
    if (event.worker_failure && leaves_for_failures(event.report)) return;
    return restart_round();
  }
  if (phase_ != Phase::kSupervising && phase_ != Phase::kDraining) {
    // Joining or reporting: the pending coordinator call carries the outcome; only a job
    // failure ends things here.
    if (job_failed) end_with_job_failure(event);
    return;
  }
  interrupt(job_failed ? Interrupt{Interrupt::Kind::kJobFailed, 0, event}
                       : Interrupt{Interrupt::Kind::kRejoin, 0, event});
  if (phase_ == Phase::kSupervising) group_->stop(SIGTERM);
  // Otherwise the group is draining its output; after_group() acts on the interrupt.
}

void Agent::interrupt(Interrupt what) {
  if (what.kind > interrupt_.kind) interrupt_ = std::move(what);
}

void Agent::end_with_job_failure(const CoordinatorEvent& event) {
  if (!event.report.failures.empty() || !event.report.cause.empty()) {
    (void)std::fputs(event.report.render().c_str(), stderr);
  } else {
    spdlog::error("{}", event.reason);
  }
  finish(event.exit_code);
}

void Agent::finish(int exit_code) {
  if (phase_ == Phase::kDone) return;
  if (phase_ == Phase::kSupervising) {
    // Only reached on internal errors: never leave workers behind. They are reaped with every
    // other child once the loop has stopped (run(): end_all_children).
    for (pid_t pid : group_->running_pids()) launcher_.signal_group(pid, SIGKILL);
  }
  phase_ = Phase::kDone;
  exit_code_ = exit_code;
  hang_.reset();
  health_check_.cancel();
  gpu_memory_.cancel();
  launcher_.workers_done();
  notify([&](AgentObserver& o) { o.on_job_finished(exit_code); });
  coordinator_.close();
  signals_.stop();
  shutdown_timer_.cancel();
  drain_timer_.cancel();
  output_.close_all();
  if (log_dir_) {
    // Nothing of the run stays in memory; what a user needs stays on disk, and is named.
    if (auto kept = log_files_.finish_run(*log_dir_)) {
      spdlog::info("the run's log and error files are kept in {}", *kept);
    }
  }
  io_.stop();
}

}  // namespace ddprun::agent
