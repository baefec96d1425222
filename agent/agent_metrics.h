// The agent's metrics (see docs/metrics.md for every name): an AgentObserver that counts what
// the job does as the agent reports it, plus collectors for what is read at scrape time (the
// job's store when this node hosts it). It knows nothing of HTTP: the launcher
// serves the registry (metrics/http_endpoint.h) and asks health() for /healthz.
//
//   ddprun_agent_worker_starts_total{job_id}
//   ddprun_agent_worker_exits_total{job_id,reason,signal}     success|failure|signal|stopped
//   ddprun_agent_group_restarts_total{job_id,reason}          worker_failure|membership_change
//   ddprun_agent_rendezvous_rounds_total{job_id}
//   ddprun_agent_health_check_failures_total{job_id}          --health_check failed (or timed out)
//   ddprun_agent_node_checks_total{job_id,check,outcome}      built-in checks: gpu|nic|path,
//                                                             pass|fail
//   ddprun_agent_stop_requests_total{job_id}                  a rank stopped the job (exit 79)
//   ddprun_agent_workers_unkillable_total{job_id}             not reaped after SIGKILL (exit 71)
//   ddprun_agent_exclude_requests_total{job_id}               a rank asked to exclude the node
//   ddprun_agent_node_exclusions_total{job_id,reason}         the node left unfit, or was kept
//                                                             out (UnfitReason: exit 69 or 71)
//   ddprun_agent_rendezvous_join_seconds{job_id}              join → round assigned
//   ddprun_agent_restart_duration_seconds{job_id}             worker failure → group running
//   ddprun_agent_{world_size,nodes,workers_running,round,group_rank,job_restarts,
//                 job_max_restarts}{job_id}
//   ddprun_agent_state{job_id,state}                          1 for the current state
//   ddprun_store_*{job_id}                                    from store::StoreStats
//   ddprun_worker_last_step{job_id,local_rank,rank}           from the ranks' heartbeats,
//   ddprun_worker_heartbeat_age_seconds{job_id,local_rank,rank}  with hang detection or
//   ddprun_worker_step_busy_seconds{job_id,local_rank,rank}      --straggler_threshold on
//   ddprun_worker_straggler{job_id,local_rank,rank}           1: named a straggler, 0: not
//   ddprun_job_{stragglers,step_busy_median_seconds}{job_id}  the job's last straggler finding
//
// Every series carries `job_id` (the run id, --rdzv_id), not `job`: Prometheus sets `job` on
// every scraped series itself (the scrape job's name), and would rename ours `exported_job`.
//
// Group restarts are counted from the rounds the coordinator assigns: a round whose restart
// count went up is a restart after a worker failure (on every node of the job, wherever the
// failure was); any other new round after the first is a membership change (a node joined or
// was lost). So every node reports the same job-wide restarts.
//
// Store counters are totals over the job: each round has a new store (store_host.h), so the
// last round's statistics are folded in when its group finishes, while its store still exists.
//
// Not thread-safe: used on the agent's io_context thread (observer calls and scrapes alike).
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "agent/agent_observer.h"
#include "agent/progress/rank_progress.h"
#include "common/clock.h"
#include "common/result.h"
#include "metrics/registry.h"
#include "store/server.h"

namespace ddprun::agent {

struct AgentMetricsOptions {
  // The run id (--rdzv_id): the job_id label of every series.
  std::string job_id;
  // The job's store while this node hosts it, null otherwise; asked at scrape time and when a
  // group finishes. Unset: no store metrics.
  std::function<const store::StoreServer*()> store;
  // This node's ranks' progress now (hang detection; empty between attempts); asked at scrape
  // time. Unset: no ddprun_worker_* families at all (no hang detection, no straggler threshold).
  std::function<std::vector<RankProgress>()> progress;
};

class AgentMetrics final : public AgentObserver {
 public:
  // Registers every family (and the store collector) in `registry`, which must
  // outlive this object. `clock` is the agent's (for failure → restart durations).
  AgentMetrics(metrics::Registry& registry, AgentMetricsOptions options, const Clock& clock);

  // /healthz: ok while the group is starting or running (joining, restarting included); an
  // error naming the outcome once the job is over.
  Status health() const;

  void on_joining(int attempt) override;
  void on_health_check_failed(const std::string& why) override;
  void on_node_checks(const std::vector<builtin::CheckOutcome>& outcomes) override;
  void on_stop_requested(int rank, const std::string& reason) override;
  void on_exclude_requested(int rank, const std::string& reason) override;
  void on_left_unfit(UnfitReason reason, const std::string& why) override;
  void on_stragglers(const rdzv::StragglerFinding& finding) override;
  void on_round_assigned(const RoundAssignment& assignment, Millis waited) override;
  void on_workers_started(const RoundAssignment& assignment, int workers,
                          std::optional<SteadyTime> failed_at) override;
  void on_worker_started(int local_rank, pid_t pid) override;
  void on_worker_exited(int local_rank, pid_t pid, const ExitStatus& status) override;
  void on_worker_unkillable(int local_rank, pid_t pid, const ProcessSnapshot& snapshot) override;
  void on_group_finished(const GroupResult& result) override;
  void on_job_finished(int exit_code) override;

 private:
  enum class State { kJoining, kStarting, kRunning, kStopping, kReporting, kSucceeded, kFailed };
  static constexpr int kStateCount = 7;
  static const char* state_name(State s);

  void set_state(State s);
  void collect_store(std::vector<metrics::FamilyData>& out) const;
  void collect_progress(std::vector<metrics::FamilyData>& out) const;
  void collect_stragglers(std::vector<metrics::FamilyData>& out) const;

  const AgentMetricsOptions options_;
  const Clock& clock_;
  const metrics::LabelValues job_;  // {job_id}

  metrics::Counter& worker_starts_;
  metrics::Family<metrics::Counter>& worker_exits_;
  metrics::Family<metrics::Counter>& restarts_;
  metrics::Counter& rounds_;
  metrics::Counter& health_check_failures_;
  metrics::Family<metrics::Counter>& node_checks_;
  metrics::Counter& stop_requests_;
  metrics::Counter& workers_unkillable_;
  metrics::Counter& exclude_requests_;
  metrics::Family<metrics::Counter>& exclusions_;
  metrics::Histogram& join_seconds_;
  metrics::Histogram& restart_seconds_;
  metrics::Gauge& world_size_;
  metrics::Gauge& nodes_;
  metrics::Gauge& workers_running_;
  metrics::Gauge& round_;
  metrics::Gauge& group_rank_;
  metrics::Gauge& restart_count_;
  metrics::Gauge& max_restarts_;
  metrics::Family<metrics::Gauge>& state_;

  State current_ = State::kJoining;
  int exit_code_ = 0;                          // once kSucceeded / kFailed
  std::optional<RoundAssignment> last_round_;  // the previous assignment, for restart reasons
  std::set<pid_t> stopped_;                    // stopped workers: their later exit is not counted
  // Store statistics of finished rounds' stores, and whether the live store's are in them.
  store::StoreStats store_totals_;
  bool live_store_folded_ = false;
  rdzv::StragglerFinding stragglers_;  // the last finding (threshold 0: none judged)
};

}  // namespace ddprun::agent
