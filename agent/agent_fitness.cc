// Agent: this node's fitness to train, and how it leaves the job when it is not fit (issues 23
// and 36): the health check before each round and while the workers run, a rank's request to
// exclude the node (ddprun.exclude_node), K of the job's last M failures caused by its workers
// (--node_failure_limit), a worker that outlived SIGKILL. Each leaves through
// Coordinator::close_excluded with one sentence saying why, so that the rendezvous keeps the
// host out for a while and a waiting spare takes its place; none is charged as a restart. The
// rest of the lifecycle is agent.cc.
#include <csignal>
#include <cstdio>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/worker_launches.h"
#include "common/exit_codes.h"

namespace ddprun::agent {

// Where the check of this attempt writes its output: beside the run's logs.
std::string Agent::health_check_output() const {
  return log_dir_->path() + "/health_check_" + std::to_string(attempt_);
}

// --health_check: a node that is not fit to train does not join; the others go on without it
// and ddprun exits kExitUnhealthy for the node manager.
void Agent::check_health_then_join() {
  health_check_.run(
      health_check_env(base_env_, options_, attempt_), health_check_output(),
      [this](const Status& healthy) {
        if (phase_ != Phase::kJoining) return;
        if (healthy) return join_round();
        notify([&](AgentObserver& o) { o.on_health_check_failed(healthy.message()); });
        leave_unfit(UnfitReason::kHealthCheck, healthy.message(), {}, kExitUnhealthy);
      });
}

// The periodic check failed while the workers ran: stop them and leave the job (the others go
// on as after a lost node); not a worker failure, so no restart is charged.
void Agent::on_unhealthy(const Status& why) {
  if (phase_ != Phase::kSupervising && phase_ != Phase::kDraining) return;
  spdlog::error("{}; stopping the workers and leaving the job", why.message());
  notify([&](AgentObserver& o) { o.on_health_check_failed(why.message()); });
  Interrupt unhealthy{Interrupt::Kind::kUnfit, 0, {}, UnfitReason::kHealthCheck};
  unhealthy.event.report.cause = why.message();
  unhealthy.event.exit_code = kExitUnhealthy;
  interrupt(std::move(unhealthy));
  if (phase_ == Phase::kSupervising) group_->stop(SIGTERM);
}

// A rank says this node is unfit ("ECC errors on GPU 3"): the workers are stopped as for a
// failure (the rank that asked is exiting already) and the node leaves the job once they have
// exited, with the request as the report's cause. The first request is the cause.
void Agent::on_exclude_request(const WorkerNotice& notice) {
  if ((phase_ != Phase::kSupervising && phase_ != Phase::kDraining) || !assignment_) return;
  const int rank = assignment_->rank_offset + std::max(0, notice.local_rank);
  const std::string why =
      fmt::format("rank {} asked to exclude this node: {}", rank, notice.message);
  spdlog::error("{} (pid {}); stopping the workers and leaving the job", why, notice.pid);
  notify([&](AgentObserver& o) { o.on_exclude_requested(rank, notice.message); });
  Interrupt unfit{Interrupt::Kind::kUnfit, 0, {}, UnfitReason::kExcludeRequest};
  unfit.event.report.cause = why;
  unfit.event.exit_code = kExitUnhealthy;
  interrupt(std::move(unfit));
  if (phase_ != Phase::kSupervising) return;  // the workers are ending already
  if (!failed_at_) failed_at_ = clock_.steady_now();
  // The rank itself: the others are stopped while it finishes. A process of the rank's (a data
  // loader's) asked: its rank is failed too. Neither escalates a stop already under way.
  if (group_->worker_failing(notice.pid)) return;
  WorkerFailure asked;
  asked.rank = rank;
  asked.local_rank = std::max(0, notice.local_rank);
  asked.error_message = "asked to exclude this node: " + notice.message;
  group_->fail_running({asked}, SIGTERM);
}

// The workers of an attempt that ended for a kUnfit or kUnkillable interrupt have exited: their
// failures are reported under the interrupt's cause, and the node leaves.
void Agent::leave_unfit_interrupted(const GroupResult& result) {
  FailureReport report = build_report(result);
  report.cause = interrupt_.event.report.cause;
  leave_unfit(interrupt_.unfit, report.cause, report, interrupt_.event.exit_code);
}

// --node_failure_limit: a job failure this node learned of (`job_report`, the job's report of
// it, of the round that just ended); when its workers caused K of the job's last M failures, it
// leaves rather than restart with the others. True when it leaves.
bool Agent::leaves_for_failures(const FailureReport& job_report) {
  if (!failure_history_.enabled() || !assignment_) return false;
  failure_history_.record(
      FailureHistory::caused_by(job_report, assignment_->rank_offset, options_.nproc_per_node));
  const std::string why = failure_history_.leave_reason();
  if (why.empty()) return false;
  leave_unfit(UnfitReason::kFailures, why, job_report, kExitUnhealthy);
  return true;
}

// The rendezvous refused this node's host: it left a job unfit and is kept out for a while.
void Agent::kept_out(const Status& refused) {
  spdlog::error("rendezvous: {}", refused.message());
  notify([&](AgentObserver& o) { o.on_left_unfit(UnfitReason::kKeptOut, refused.message()); });
  finish(kExitUnhealthy);
}

// Prints the report (when it says anything) and why the node leaves, tells the rendezvous why,
// and ends with `exit_code`.
void Agent::leave_unfit(UnfitReason reason, const std::string& why, const FailureReport& report,
                        int exit_code) {
  if (!report.failures.empty() || !report.cause.empty()) {
    (void)std::fputs(report.render().c_str(), stderr);
  }
  if (report.cause != why) spdlog::error("{}", why);
  notify([&](AgentObserver& o) { o.on_left_unfit(reason, why); });
  coordinator_.close_excluded(why);
  finish(exit_code);
}

}  // namespace ddprun::agent
