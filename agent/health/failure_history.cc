#include "agent/health/failure_history.h"

#include <algorithm>

#include <fmt/format.h>

namespace ddprun::agent {

bool FailureHistory::caused_by(const FailureReport& report, int first_rank, int ranks) {
  // A cause outside the workers (a lost rendezvous) makes every worker failure a consequence.
  if (!report.cause.empty() || report.failures.empty()) return false;
  const int rank = report.root_cause().rank;
  return rank >= first_rank && rank < first_rank + ranks;
}

void FailureHistory::record(bool ours) {
  if (!enabled()) return;
  last_.push_back(ours);
  while (last_.size() > window_) last_.pop_front();
}

std::string FailureHistory::leave_reason() const {
  if (!enabled()) return {};
  const auto ours = static_cast<uint32_t>(std::count(last_.begin(), last_.end(), true));
  if (ours < limit_) return {};
  return fmt::format(
      "this node's workers were the root cause of {} of the job's last {} failures: leaving the "
      "job so that a spare can take its place",
      ours, last_.size());
}

}  // namespace ddprun::agent
