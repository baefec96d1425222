// The per-node agent: joins a round, starts one worker per local rank, supervises them on an
// Asio event loop (child exits, signals and timers wake it; nothing polls), restarts the group
// on failure or membership change, and ends with the job's outcome as an exit code.
//
//   join --assignment--> start workers --all exit 0--> report success --> exit 0
//                              |--a worker fails--> stop the rest --> report failure
//                              |        restart: join again; no restarts left: print, exit code
//                              |--membership change--> stop --> join again (not a restart)
//                              `--handled signal--> forward to every worker group --> 128+signal
//   a worker not reaped --kill_wait_timeout after SIGKILL --> named, given up on --> leave, 71
//   unfit to train (health check, --node_failure_limit, a rank's exclude_node) --> leave, 69
#pragma once

#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>

#include "agent/agent_observer.h"
#include "agent/agent_parts.h"
#include "agent/health/failure_history.h"
#include "agent/health/health_check.h"
#include "agent/logs/log_layout.h"
#include "agent/logs/worker_output.h"
#include "agent/options.h"
#include "agent/process/worker_env.h"
#include "agent/process/worker_group.h"
#include "agent/progress/hang_response.h"
#include "agent/progress/restart_guard.h"
#include "agent/progress/straggler_notices.h"
#include "common/clock.h"

namespace ddprun::agent {

// The lifecycle as an explicit state machine (Phase below):
//
//   kIdle --start--> kJoining --assignment--> kSupervising --every worker exited--> kDraining
//     kDraining --output drained, interrupted--> kJoining (rejoin) | kDone (signal, job failed)
//     kDraining --output drained, own outcome--> kReporting --restart--> kJoining
//                                                    `--job over--> kDone
//   any phase --handled signal / internal error--> kDone (workers stopped first)
//
// Not thread-safe: everything runs on `io`'s single thread. What it uses of the OS comes in
// `parts` (agent_parts.h): SystemAgentParts in ddprun, fakes in the lifecycle tests.
class Agent final : private WorkerGroupObserver {
 public:
  Agent(AgentOptions options, boost::asio::io_context& io, AgentParts parts);
  ~Agent() override;

  // Runs the job to its end on `io` and returns ddprun's exit code: 0 on success, the root
  // cause's exit code (128+signal for a signal) on failure, 128+signal when stopped by one.
  int run();

  // The pieces of run(), for driving the agent step by step (tests, with a fake launcher):
  // start() begins the first round; the job is over once exit_code() is set.
  void start();
  std::optional<int> exit_code() const { return exit_code_; }
  // A child of this process ended (the launcher reports every reaped child here).
  void on_child_exit(pid_t pid, ExitStatus status);
  // The attempt number of the next (or running) worker group's logs.
  int attempt() const { return attempt_; }
  // This node's running ranks' progress (last step, heartbeat age) under their global ranks;
  // ranks whose worker exited are left out; empty when no worker group runs. Read-only, for
  // status lines (agent/progress/progress_summary.h).
  std::vector<RankProgress> progress() const;
  // Adds an observer of the job's progress (see agent_observer.h); it must outlive the agent.
  void add_observer(AgentObserver& observer) { observers_.push_back(&observer); }
  // The job's store host, for observers that read its statistics (metrics).
  const JobStoreHost& store_host() const { return store_; }
  // Whether the ranks' heartbeats are read (hang detection, --straggler_threshold).
  bool watches_progress() const { return progress_watch_.watching(); }
  // Each local rank's progress now, with its global rank (last step, heartbeat age, busy time),
  // while heartbeats are read and an attempt's workers exist; empty otherwise. Unlike progress(),
  // ranks whose worker exited stay in (their last step still counts). Read-only, for observers
  // (metrics).
  std::vector<RankProgress> rank_progress() const;

 private:
  enum class Phase {
    kIdle,         // built, not started
    kJoining,      // waiting for the coordinator's next round
    kSupervising,  // the attempt's workers run (or are being stopped)
    kDraining,     // every worker exited; their output pipes are being drained
    kReporting,    // the coordinator decides what the group's outcome means
    kRestarting,   // before the next round: the last attempt's GPU memory is being freed
    kDone,         // exit_code_ is set
  };
  // Something that ends the current attempt from outside, besides its own outcome. A stronger
  // kind replaces a weaker one: a signal ends the job whatever else happened.
  struct Interrupt {
    // kUnfit: the periodic health check failed, or a rank asked to exclude the node; the node
    // leaves the job (exit 69).
    // kUnkillable: a worker survived SIGKILL; the node leaves the job (exit 71), whatever else.
    enum class Kind { kNone, kRejoin, kJobFailed, kUnfit, kSignal, kUnkillable };
    Kind kind = Kind::kNone;
    int signo = 0;  // kSignal
    // kJobFailed: the job's report and exit code; kUnfit, kUnkillable: the exit code, and the
    // report's cause, which is also why the node leaves (Coordinator::close_excluded).
    CoordinatorEvent event;
    UnfitReason unfit = UnfitReason::kHealthCheck;  // kUnfit, kUnkillable
  };

  void begin_round();
  void restart_round();  // begin_round() once the last attempt's GPU memory is free
  void join_round();
  void check_health_then_join();
  std::string health_check_output() const;
  void on_unhealthy(const Status& why);
  // agent_fitness.cc: leaving the job unfit to train.
  void on_exclude_request(const WorkerNotice& notice);
  void leave_unfit_interrupted(const GroupResult& result);
  bool leaves_for_failures(const FailureReport& job_report);
  void kept_out(const Status& refused);
  void leave_unfit(UnfitReason reason, const std::string& why, const FailureReport& report,
                   int exit_code);
  void start_workers(const RoundAssignment& assignment);
  // Shares this node's ranks' progress (hang detection, stragglers) through the coordinator.
  void share(const std::vector<LocalRankProgress>& progress);
  void on_worker_started(const WorkerLaunch& launch, SpawnedProcess& process) override;
  void on_worker_exited(const WorkerLaunch& launch, pid_t pid, const ExitStatus& status) override;
  void on_worker_unkillable(const WorkerLaunch& launch, pid_t pid) override;
  template <class F>
  void notify(F&& event) {
    for (AgentObserver* o : observers_) event(*o);
  }
  void on_group_finished(const GroupResult& result) override;
  void after_group(const GroupResult& result);
  void handle_failure(const GroupResult& result);
  void send_report(const FailureReport& report);
  FailureReport build_report(const GroupResult& result) const;
  void on_signal(int signo);
  void on_worker_notice(const WorkerNotice& notice);
  void on_stop_request(const WorkerNotice& notice);
  void on_coordinator_event(const CoordinatorEvent& event);
  void on_hang(const HangVerdict& verdict);
  void settle_hang(FailureReport report);
  HangResponse::Attempt hung_attempt(Phase phase) const;
  std::vector<RankProgress> global(const std::vector<LocalRankProgress>& local) const;
  void interrupt(Interrupt what);
  void end_with_job_failure(const CoordinatorEvent& event);
  void finish(int exit_code);

  AgentOptions options_;
  boost::asio::io_context& io_;
  ProcessLauncher& launcher_;
  Coordinator& coordinator_;
  const Clock& clock_;
  JobStoreHost& store_;            // the job's store while this node hosts it
  ProgressWatch& progress_watch_;  // progress of this attempt's workers
  RunLogFiles& log_files_;
  DeadlineTimer& shutdown_timer_;
  DeadlineTimer& drain_timer_;
  DeadlineTimer& kill_wait_timer_;
  const ProcessInspector& inspector_;
  GpuMemoryWait& gpu_memory_;  // what restart_round() waits on
  SignalSource& signals_;
  WorkerChannel& channel_;
  const EnvMap& base_env_;  // what every worker's environment starts from

  WorkerOutput output_;  // the workers' output, to the console and the log files
  std::optional<RunLogDir> log_dir_;
  std::unique_ptr<WorkerGroup> group_;
  std::optional<RoundAssignment> assignment_;  // of the current (or last) attempt
  int attempt_ = 0;                            // groups started so far; names attempt_<N> dirs
  std::vector<pid_t> attempt_pids_;            // the current (or last) attempt's workers
  Phase phase_ = Phase::kIdle;
  Interrupt interrupt_;           // reset when the next round begins
  std::optional<int> exit_code_;  // set exactly when phase_ is kDone
  std::vector<AgentObserver*> observers_;
  SteadyTime join_started_;
  // The first worker failure of the current attempt, until a restarted group runs.
  std::optional<SteadyTime> failed_at_;
  // This attempt's hang verdict, if any: its failure is then settled as a hang (settle_hang).
  HangResponse hang_;
  HealthCheck health_check_;        // --health_check, before each round
  StragglerNotices stragglers_;     // the job's stragglers as last found (--straggler_threshold)
  RestartGuard restart_guard_;      // failures not to restart: stop_job, --max_no_progress_restarts
  FailureHistory failure_history_;  // the job's last failures: this node's? --node_failure_limit
};

}  // namespace ddprun::agent
