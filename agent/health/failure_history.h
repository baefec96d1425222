// Whether this node keeps failing the job (issue 36, "bad nodes kept out"): a node whose workers
// are the root cause of K of the job's last M failures (--node_failure_limit K,
// --node_failure_window M) is most likely the problem itself (a flaky GPU, a bad NIC, a full
// local disk) rather than the program, and restarting the job with it in would only fail again.
// It then leaves the job, saying so to the rendezvous (which keeps its host out for a cool-down),
// and a waiting spare takes its place as after a lost node.
//
// Every node keeps its own history of the job failures it learns of: the answer to its own
// failure report, and another node's failure that restarts the job. The job's report names one
// root cause rank (the same on every node); a failure is this node's when that rank is one of
// this node's ranks in the round that failed. A cause outside the workers (the rendezvous was
// lost) is nobody's. So every node sees the same window, and only the node at fault leaves.
//
// Pure; not thread-safe (the agent's loop).
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "agent/failure_report.h"

namespace ddprun::agent {

class FailureHistory {
 public:
  // `limit`: K above, 0 turns the rule off; `window`: M, at least `limit` (the launcher checks).
  FailureHistory(uint32_t limit, uint32_t window) : limit_(limit), window_(window) {}

  bool enabled() const { return limit_ > 0; }
  // Whether `report`'s root cause is one of the ranks [first_rank, first_rank + ranks): a worker
  // failure with no cause outside the workers.
  static bool caused_by(const FailureReport& report, int first_rank, int ranks);
  // One job failure this node learned of; `ours`: this node's workers were its root cause.
  void record(bool ours);
  // Why this node must leave the job now: "this node's workers were the root cause of 2 of the
  // job's last 3 failures: leaving the job so that a spare can take its place"; empty while
  // fewer than K of the last M failures were its own (or the rule is off).
  std::string leave_reason() const;

 private:
  const uint32_t limit_;
  const uint32_t window_;
  std::deque<bool> last_;  // the job's last failures, oldest first, at most window_: ours or not
};

}  // namespace ddprun::agent
