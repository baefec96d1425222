// What the agent reports as its job goes on, for parts that watch the job without taking part
// in it: service notification (systemd), metrics, the status line. The agent calls every
// registered observer in order, on its event loop; an observer must not block, throw, or call
// back into the agent. The default implementations do nothing.
#pragma once

#include <sys/types.h>

#include "agent/coordination/coordinator.h"
#include "agent/health/builtin/check_outcome.h"
#include "agent/process/exit_status.h"
#include "agent/process/process_inspector.h"
#include "agent/process/worker_group.h"
#include "common/clock.h"

namespace ddprun::agent {

// Why this node left the job unfit to train (Coordinator::close_excluded), or was kept out.
enum class UnfitReason {
  kHealthCheck,     // it failed its health check (--health_check): exit 69
  kFailures,        // its workers caused K of the job's last M failures (--node_failure_limit): 69
  kExcludeRequest,  // a rank asked (ddprun.exclude_node, ddp::exclude_node): 69
  kUnkillable,      // a worker outlived SIGKILL: 71
  kKeptOut,         // the rendezvous refused its host, kept out for a cool-down: 69
};
// "health_check", "failures", "exclude_request", "unkillable", "kept_out" (a metrics label).
inline const char* to_string(UnfitReason reason) {
  switch (reason) {
    case UnfitReason::kHealthCheck:
      return "health_check";
    case UnfitReason::kFailures:
      return "failures";
    case UnfitReason::kExcludeRequest:
      return "exclude_request";
    case UnfitReason::kUnkillable:
      return "unkillable";
    case UnfitReason::kKeptOut:
      return "kept_out";
  }
  return "unknown";
}

class AgentObserver {
 public:
  virtual ~AgentObserver() = default;

  // The agent asks its coordinator for the next round (attempt `attempt`, from 0).
  virtual void on_joining(int attempt) {}
  // This node failed its health check (`why`: how, and its last output); the job ends here.
  virtual void on_health_check_failed(const std::string& why) {}
  // The built-in node checks (--health_check builtin:...) finished: each kind's outcome.
  virtual void on_node_checks(const std::vector<builtin::CheckOutcome>& outcomes) {}
  // The job's stragglers as last found (--straggler_threshold; progress/stragglers.h), after
  // every share of this node's progress while the workers run; an empty finding when a new
  // attempt starts after one that named stragglers.
  virtual void on_stragglers(const rdzv::StragglerFinding& finding) {}
  // The round is assigned; `waited` is how long the join took.
  virtual void on_round_assigned(const RoundAssignment& assignment, Millis waited) {}
  // Every worker of the attempt has been started (exec confirmed). `failed_at` is set when
  // this group replaces one that failed: the time of that failure, for "failure → restarted".
  virtual void on_workers_started(const RoundAssignment& assignment, int workers,
                                  std::optional<SteadyTime> failed_at) {}
  // One worker was started / ended (`status`: its exit, or its stop for job control).
  virtual void on_worker_started(int local_rank, pid_t pid) {}
  virtual void on_worker_exited(int local_rank, pid_t pid, const ExitStatus& status) {}
  // A worker was not reaped --kill_wait_timeout after its SIGKILL (`snapshot`: what the kernel
  // said of it then): given up on; the node leaves the job (kExitWorkerUnkillable).
  virtual void on_worker_unkillable(int local_rank, pid_t pid, const ProcessSnapshot& snapshot) {}
  // The attempt's group has finished (every worker exited) with `result`.
  virtual void on_group_finished(const GroupResult& result) {}
  // The group failed and the coordinator decided to restart (`counted`: it used a restart).
  virtual void on_restart(bool counted) {}
  // Global rank `rank` asked to stop the job for good (ddprun.stop_job), for `reason`: the job
  // ends without a restart (exit 79). Once per attempt.
  virtual void on_stop_requested(int rank, const std::string& reason) {}
  // Global rank `rank` asked to take this node out of the job (ddprun.exclude_node), for
  // `reason`: the node leaves (exit 69). Every request.
  virtual void on_exclude_requested(int rank, const std::string& reason) {}
  // This node leaves the job unfit to train, or was kept out of it, for `reason`; `why` is the
  // sentence the rendezvous is told. Then on_job_finished().
  virtual void on_left_unfit(UnfitReason reason, const std::string& why) {}
  // The job is over for this node: ddprun exits with `exit_code`.
  virtual void on_job_finished(int exit_code) {}
};

}  // namespace ddprun::agent
