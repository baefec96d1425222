// Why a failed attempt must not be restarted, as this node sees it (issue 36):
//
//  - a rank asked to stop the job for good (ddprun.stop_job / ddp::stop_job through the worker
//    channel): "rank 3 asked to stop the job: NaN loss at step 1200";
//  - --max_no_progress_restarts K: K attempts in a row ended in a failure without any of this
//    node's ranks getting past the highest step the job had reached ("3 attempts in a row failed
//    at step 1234: not restarting"). The attempt that first reached that step counts as the
//    first of them, so with K = 3 a job that keeps failing at step 1234 stops at its third
//    failure there.
//
// Multi-node jobs: every node keeps its own ranks' steps and counts every attempt that ended in
// a worker failure, its own or another node's (the job-wide restart it hears of); the node that
// reports the K-th failure says it is not restartable and the rendezvous fails the job at once.
// Data-parallel ranks move in lockstep (each step ends in a collective), so one node's ranks
// are a faithful view of the job's progress; no server-side bookkeeping is needed.
//
// Steps are what the ranks report: ddprun.heartbeat(step), the SDK's heartbeats, or a Python
// worker's automatic progress (which counts from 0 in each process: a script that resumes from a
// checkpoint should report its real step with heartbeat()). A rank that reports no step makes
// no progress. Pure; not thread-safe (the agent's loop).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/progress/rank_progress.h"

namespace ddprun::agent {

class RestartGuard {
 public:
  // `max_no_progress_attempts`: K above; 0 (the default) turns that rule off.
  explicit RestartGuard(uint32_t max_no_progress_attempts = 0)
      : max_no_progress_(max_no_progress_attempts) {}

  // A new attempt's workers start: a stop request of an earlier attempt is forgotten.
  void attempt_started() { stop_request_.clear(); }
  // Global rank `rank` asked to stop the job, for `reason`. The first request of an attempt is
  // kept.
  void stop_requested(int rank, const std::string& reason);
  bool stop_requested() const { return !stop_request_.empty(); }
  // The attempt ended in a worker failure (this node's, or another node's that restarts the
  // job); `ranks`: this node's ranks' progress at its end.
  void attempt_failed(const std::vector<LocalRankProgress>& ranks);
  // Why the failure just ended must not be restarted; empty: it may be.
  std::string not_restartable() const;

  // Failed attempts in a row without progress so far.
  uint32_t attempts_without_progress() const { return streak_; }

 private:
  const uint32_t max_no_progress_;
  std::string stop_request_;          // "rank R asked to stop the job: <reason>"
  std::optional<std::int64_t> best_;  // the highest step any rank has reached, all attempts
  uint32_t streak_ = 0;               // failed attempts in a row that did not get past best_
};

}  // namespace ddprun::agent
