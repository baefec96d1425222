#include "agent/agent_metrics.h"

#include <algorithm>
#include <chrono>

namespace ddprun::agent {
namespace {

using metrics::FamilyData;
using metrics::MetricType;

// Seconds, from a few milliseconds (a local round, a restart on one machine) to minutes (a
// rendezvous waiting for nodes to be scheduled).
const std::vector<double> kDurationBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                              2.5,   5,    10,    30,   60,  120,  300};

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

const char* exit_reason(const ExitStatus& s) {
  if (s.stopped) return "stopped";
  if (s.signal != 0) return "signal";
  return s.code == 0 ? "success" : "failure";
}

// Counters of a finished round's store, added to the job's totals.
void add_counters(store::StoreStats& total, const store::StoreStats& s) {
  for (size_t i = 0; i < total.operations.size(); ++i) total.operations[i] += s.operations[i];
  total.connections_accepted += s.connections_accepted;
  total.connections_legacy += s.connections_legacy;
  total.connections_validated += s.connections_validated;
  total.connections_refused += s.connections_refused;
  total.connections_shed += s.connections_shed;
  total.protocol_errors += s.protocol_errors;
  total.limit_refusals += s.limit_refusals;
  total.slow_readers_dropped += s.slow_readers_dropped;
  total.stalled_dropped += s.stalled_dropped;
}

}  // namespace

AgentMetrics::AgentMetrics(metrics::Registry& r, AgentMetricsOptions options, const Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      job_{options_.job_id},
      worker_starts_(r.counter("ddprun_agent_worker_starts_total",
                               "Worker processes this agent started.", {"job_id"})
                         .with(job_)),
      worker_exits_(r.counter("ddprun_agent_worker_exits_total",
                              "Worker processes that ended, by reason (success, failure: a "
                              "non-zero exit code, signal, stopped: by job control) and signal.",
                              {"job_id", "reason", "signal"})),
      restarts_(r.counter("ddprun_agent_group_restarts_total",
                          "Worker group restarts: worker_failure (a worker failed anywhere in "
                          "the job; uses a restart) or membership_change (a node joined or was "
                          "lost; does not).",
                          {"job_id", "reason"})),
      rounds_(r.counter("ddprun_agent_rendezvous_rounds_total",
                        "Rendezvous rounds this node was assigned to.", {"job_id"})
                  .with(job_)),
      health_check_failures_(
          r.counter("ddprun_agent_health_check_failures_total",
                    "Health checks (--health_check) this node failed or that timed out.",
                    {"job_id"})
              .with(job_)),
      node_checks_(r.counter("ddprun_agent_node_checks_total",
                             "Built-in node checks (--health_check builtin:...) run, by check "
                             "(gpu, nic, path) and outcome (pass, fail).",
                             {"job_id", "check", "outcome"})),
      stop_requests_(r.counter("ddprun_agent_stop_requests_total",
                               "Ranks that asked to stop the job for good (ddprun.stop_job): it "
                               "ended without a restart, exit 79.",
                               {"job_id"})
                         .with(job_)),
      workers_unkillable_(r.counter("ddprun_agent_workers_unkillable_total",
                                    "Workers not reaped --kill_wait_timeout after SIGKILL (stuck "
                                    "in the kernel); the node left the job.",
                                    {"job_id"})
                              .with(job_)),
      exclude_requests_(r.counter("ddprun_agent_exclude_requests_total",
                                  "Ranks that asked to take this node out of the job "
                                  "(ddprun.exclude_node): the node left, exit 69.",
                                  {"job_id"})
                            .with(job_)),
      exclusions_(r.counter("ddprun_agent_node_exclusions_total",
                            "Times this node left the job unfit to train, or was kept out of it, "
                            "by reason: failures (--node_failure_limit), health_check, "
                            "exclude_request, unkillable (exit 71), kept_out (the rendezvous "
                            "refused its host).",
                            {"job_id", "reason"})),
      join_seconds_(r.histogram("ddprun_agent_rendezvous_join_seconds",
                                "Time from asking to join a round to being assigned to one.",
                                {"job_id"}, kDurationBuckets)
                        .with(job_)),
      restart_seconds_(r.histogram("ddprun_agent_restart_duration_seconds",
                                   "Time from a worker failure on this node to the restarted "
                                   "worker group running.",
                                   {"job_id"}, kDurationBuckets)
                           .with(job_)),
      world_size_(
          r.gauge("ddprun_agent_world_size", "Workers in the current round, job-wide.", {"job_id"})
              .with(job_)),
      nodes_(r.gauge("ddprun_agent_nodes", "Nodes in the current round.", {"job_id"}).with(job_)),
      workers_running_(r.gauge("ddprun_agent_workers_running",
                               "Worker processes of this node running now.", {"job_id"})
                           .with(job_)),
      round_(r.gauge("ddprun_agent_round", "The current rendezvous round's number.", {"job_id"})
                 .with(job_)),
      group_rank_(
          r.gauge("ddprun_agent_group_rank", "This node's rank in the current round.", {"job_id"})
              .with(job_)),
      restart_count_(r.gauge("ddprun_agent_job_restarts",
                             "Restarts the job has used (TORCHELASTIC_RESTART_COUNT).", {"job_id"})
                         .with(job_)),
      max_restarts_(r.gauge("ddprun_agent_job_max_restarts",
                            "The job's restart budget (TORCHELASTIC_MAX_RESTARTS).", {"job_id"})
                        .with(job_)),
      state_(r.gauge("ddprun_agent_state",
                     "1 for the agent's current state (joining, starting, running, stopping, "
                     "reporting, succeeded, failed), 0 for the others.",
                     {"job_id", "state"})) {
  for (const char* reason : {"worker_failure", "membership_change"}) {
    restarts_.with({options_.job_id, reason});  // present at 0 from the start, for rate()
  }
  set_state(State::kJoining);
  if (options_.store) {
    r.add_collector([this](std::vector<FamilyData>& out) { collect_store(out); });
  }
  if (options_.progress) {
    r.add_collector([this](std::vector<FamilyData>& out) { collect_progress(out); });
  }
  r.add_collector([this](std::vector<FamilyData>& out) { collect_stragglers(out); });
}

const char* AgentMetrics::state_name(State s) {
  static constexpr const char* kNames[kStateCount] = {
      "joining", "starting", "running", "stopping", "reporting", "succeeded", "failed"};
  return kNames[static_cast<int>(s)];
}

void AgentMetrics::set_state(State s) {
  current_ = s;
  for (int i = 0; i < kStateCount; ++i) {
    state_.with({options_.job_id, state_name(static_cast<State>(i))})
        .set(i == static_cast<int>(s) ? 1 : 0);
  }
}

Status AgentMetrics::health() const {
  if (current_ == State::kSucceeded) return Status::error("the job is over: it succeeded");
  if (current_ == State::kFailed) {
    return Status::error("the job is over: it failed (exit code " + std::to_string(exit_code_) +
                         ")");
  }
  return {};
}

void AgentMetrics::on_joining(int attempt) {
  set_state(State::kJoining);
  live_store_folded_ = false;  // the round's new store
}

void AgentMetrics::on_health_check_failed(const std::string&) { health_check_failures_.inc(); }

void AgentMetrics::on_node_checks(const std::vector<builtin::CheckOutcome>& outcomes) {
  for (const builtin::CheckOutcome& outcome : outcomes) {
    node_checks_.with({options_.job_id, outcome.check, outcome.passed() ? "pass" : "fail"}).inc();
  }
}

void AgentMetrics::on_stop_requested(int, const std::string&) { stop_requests_.inc(); }

void AgentMetrics::on_exclude_requested(int, const std::string&) { exclude_requests_.inc(); }

void AgentMetrics::on_left_unfit(UnfitReason reason, const std::string&) {
  exclusions_.with({options_.job_id, to_string(reason)}).inc();
}

void AgentMetrics::on_worker_unkillable(int, pid_t, const ProcessSnapshot&) {
  workers_unkillable_.inc();
}

void AgentMetrics::on_stragglers(const rdzv::StragglerFinding& finding) { stragglers_ = finding; }

void AgentMetrics::on_round_assigned(const RoundAssignment& a, Millis waited) {
  set_state(State::kStarting);
  rounds_.inc();
  join_seconds_.observe(seconds(waited));
  if (last_round_) {
    const int failures = a.restart_count - last_round_->restart_count;
    restarts_.with({options_.job_id, failures > 0 ? "worker_failure" : "membership_change"})
        .inc(failures > 0 ? failures : 1);
  }
  last_round_ = a;
  world_size_.set(a.world_size);
  nodes_.set(a.group_world_size);
  round_.set(a.round);
  group_rank_.set(a.group_rank);
  restart_count_.set(a.restart_count);
  max_restarts_.set(a.max_restarts);
}

void AgentMetrics::on_workers_started(const RoundAssignment&, int,
                                      std::optional<SteadyTime> failed_at) {
  set_state(State::kRunning);
  if (failed_at) restart_seconds_.observe(seconds(clock_.steady_now() - *failed_at));
}

void AgentMetrics::on_worker_started(int, pid_t) {
  worker_starts_.inc();
  workers_running_.inc();
}

void AgentMetrics::on_worker_exited(int, pid_t pid, const ExitStatus& status) {
  if (stopped_.erase(pid) != 0) {
    workers_running_.dec();  // counted when it was stopped; now it is gone too
    return;
  }
  if (status.stopped) {
    stopped_.insert(pid);
  } else {
    workers_running_.dec();
  }
  const std::string signal = status.signal != 0 ? signal_name(status.signal) : "";
  worker_exits_.with({options_.job_id, exit_reason(status), signal}).inc();
  if (!status.success() && current_ == State::kRunning) set_state(State::kStopping);
}

void AgentMetrics::on_group_finished(const GroupResult&) {
  set_state(State::kReporting);
  stopped_.clear();
  workers_running_.set(0);
  // The round's store is closed right after this (StoreHost::end_round): keep its counts.
  if (const store::StoreServer* store = options_.store ? options_.store() : nullptr;
      store && !live_store_folded_) {
    add_counters(store_totals_, store->stats());
    live_store_folded_ = true;
  }
}

void AgentMetrics::on_job_finished(int exit_code) {
  exit_code_ = exit_code;
  set_state(exit_code == 0 ? State::kSucceeded : State::kFailed);
}

void AgentMetrics::collect_store(std::vector<FamilyData>& out) const {
  const store::StoreServer* live = options_.store();
  store::StoreStats now;
  if (live && !live_store_folded_) now = live->stats();
  store::StoreStats total = store_totals_;
  add_counters(total, now);
  const metrics::Labels job = {{"job_id", options_.job_id}};
  auto family = [&](const char* name, const char* help, MetricType type) -> FamilyData& {
    out.push_back({name, help, type, {}});
    return out.back();
  };
  family("ddprun_store_hosted", "1 while this node hosts the job's store (group rank 0).",
         MetricType::kGauge)
      .add(job, live ? 1 : 0);
  FamilyData& ops =
      family("ddprun_store_operations_total",
             "Queries the job's store served on this node, by operation.", MetricType::kCounter);
  for (size_t i = 0; i < total.operations.size(); ++i) {
    ops.add({{"job_id", options_.job_id}, {"op", store::op_name(static_cast<store::Op>(i))}},
            static_cast<double>(total.operations[i]));
  }
  family("ddprun_store_connections_accepted_total", "Client connections the store accepted.",
         MetricType::kCounter)
      .add(job, static_cast<double>(total.connections_accepted));
  FamilyData& dropped = family("ddprun_store_connections_dropped_total",
                               "Connections the store closed, by reason.", MetricType::kCounter);
  const std::pair<const char*, uint64_t> reasons[] = {
      {"max_connections", total.connections_refused},
      {"out_of_descriptors", total.connections_shed},
      {"protocol_error", total.protocol_errors},
      {"limit", total.limit_refusals},
      {"slow_reader", total.slow_readers_dropped},
      {"stalled", total.stalled_dropped}};
  for (const auto& [reason, count] : reasons) {
    dropped.add({{"job_id", options_.job_id}, {"reason", reason}}, static_cast<double>(count));
  }
  family("ddprun_store_connections", "Client connections open now.", MetricType::kGauge)
      .add(job, static_cast<double>(now.connections_open));
  family("ddprun_store_keys", "Keys (and non-empty queues) in the store.", MetricType::kGauge)
      .add(job, static_cast<double>(now.keys));
  family("ddprun_store_bytes", "Bytes of keys, values and queued items in the store.",
         MetricType::kGauge)
      .add(job, static_cast<double>(now.bytes));
  family("ddprun_store_pending_waits", "Clients blocked in wait() now.", MetricType::kGauge)
      .add(job, static_cast<double>(now.pending_waits));
}

// A rank's series appear with what it reported: last_step once it named a step, the heartbeat
// age once it sent a heartbeat (before that the first-heartbeat timeout watches it, and an age
// "since start" would read like silence).
void AgentMetrics::collect_progress(std::vector<FamilyData>& out) const {
  out.push_back({"ddprun_worker_last_step",
                 "The last step each rank reported in its heartbeats (hang detection).",
                 MetricType::kGauge,
                 {}});
  out.push_back({"ddprun_worker_heartbeat_age_seconds",
                 "Seconds since each rank's last heartbeat (hang detection).",
                 MetricType::kGauge,
                 {}});
  out.push_back({"ddprun_worker_step_busy_seconds",
                 "Each rank's mean busy time per step over its last steps, from its heartbeats "
                 "(the time from the end of one step's synchronisation to the next one's).",
                 MetricType::kGauge,
                 {}});
  const bool judged = stragglers_.threshold_milli > 0;
  if (judged) {
    out.push_back({"ddprun_worker_straggler",
                   "1 for a rank of this node named a straggler (--straggler_threshold), 0 for "
                   "its other ranks that report a busy time.",
                   MetricType::kGauge,
                   {}});
  }
  FamilyData* straggler = judged ? &out.back() : nullptr;
  FamilyData& busy = out[out.size() - (judged ? 2 : 1)];
  FamilyData& age = out[out.size() - (judged ? 3 : 2)];
  FamilyData& step = out[out.size() - (judged ? 4 : 3)];
  for (const RankProgress& p : options_.progress()) {
    metrics::Labels labels = {{"job_id", options_.job_id},
                              {"local_rank", std::to_string(p.local_rank)},
                              {"rank", std::to_string(p.rank)}};
    if (p.last_step) step.add(labels, static_cast<double>(*p.last_step));
    if (p.heartbeat_seen) age.add(labels, seconds(p.heartbeat_age));
    if (!p.busy) continue;
    busy.add(labels, static_cast<double>(p.busy->count()) / 1e6);
    if (straggler) {
      const bool named = std::any_of(
          stragglers_.stragglers.begin(), stragglers_.stragglers.end(),
          [&](const rdzv::StragglerEntry& s) { return s.rank == static_cast<uint32_t>(p.rank); });
      straggler->add(std::move(labels), named ? 1.0 : 0.0);
    }
  }
}

// Job-wide, the same on every node: what the last finding said.
void AgentMetrics::collect_stragglers(std::vector<FamilyData>& out) const {
  if (stragglers_.threshold_milli == 0) return;
  out.push_back({"ddprun_job_stragglers",
                 "Ranks of the whole job named stragglers now (--straggler_threshold).",
                 MetricType::kGauge,
                 {}});
  out.back().add({{"job_id", options_.job_id}}, static_cast<double>(stragglers_.stragglers.size()));
  out.push_back({"ddprun_job_step_busy_median_seconds",
                 "The job's median busy time per step, over the ranks that report one.",
                 MetricType::kGauge,
                 {}});
  out.back().add({{"job_id", options_.job_id}}, static_cast<double>(stragglers_.median_us) / 1e6);
}

}  // namespace ddprun::agent
