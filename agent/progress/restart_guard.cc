#include "agent/progress/restart_guard.h"

#include <algorithm>

#include <fmt/format.h>

namespace ddprun::agent {

void RestartGuard::stop_requested(int rank, const std::string& reason) {
  if (!stop_request_.empty()) return;
  stop_request_ = fmt::format("rank {} asked to stop the job: {}", rank, reason);
}

void RestartGuard::attempt_failed(const std::vector<LocalRankProgress>& ranks) {
  std::optional<std::int64_t> reached;
  for (const LocalRankProgress& r : ranks) {
    if (r.last_step && (!reached || *r.last_step > *reached)) reached = r.last_step;
  }
  if (reached && (!best_ || *reached > *best_)) {
    // Past every step before: this attempt made progress, and is the first to fail here.
    best_ = reached;
    streak_ = 1;
    return;
  }
  ++streak_;
}

std::string RestartGuard::not_restartable() const {
  if (!stop_request_.empty()) return stop_request_;
  if (max_no_progress_ == 0 || streak_ < max_no_progress_) return {};
  const std::string where = best_ ? fmt::format("at step {}", *best_) : "before any step";
  return fmt::format("{} attempts in a row failed {}: not restarting", streak_, where);
}

}  // namespace ddprun::agent
