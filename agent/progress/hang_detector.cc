#include "agent/progress/hang_detector.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ddprun::agent {

HangDetector::HangDetector(HangDetectorOptions options, int local_world_size)
    : options_(options), ranks_(static_cast<std::size_t>(std::max(local_world_size, 0))) {}

void HangDetector::start(SteadyTime now) {
  if (phase_ != Phase::kIdle) return;
  phase_ = Phase::kWatching;
  started_ = now;
}

bool HangDetector::heartbeat(int local_rank, std::optional<std::int64_t> step, SteadyTime now,
                             std::optional<std::chrono::microseconds> busy) {
  if (phase_ == Phase::kIdle || local_rank < 0 || local_rank >= static_cast<int>(ranks_.size())) {
    return false;
  }
  Rank& rank = ranks_[static_cast<std::size_t>(local_rank)];
  if (rank.state == RankState::kExited) return false;
  rank.state = RankState::kHeartbeating;
  // Events of one wake-up share a time; never let a late-delivered one move time backwards.
  rank.last_heartbeat = rank.last_heartbeat ? std::max(*rank.last_heartbeat, now) : now;
  if (step) rank.last_step = step;
  if (busy) rank.busy.add(*busy);
  ++rank.heartbeats;
  return true;
}

void HangDetector::worker_exited(int local_rank) {
  if (local_rank < 0 || local_rank >= static_cast<int>(ranks_.size())) return;
  ranks_[static_cast<std::size_t>(local_rank)].state = RankState::kExited;
}

std::optional<SteadyTime> HangDetector::deadline_of(const Rank& rank) const {
  switch (rank.state) {
    case RankState::kHeartbeating:
      return *rank.last_heartbeat + options_.hang_timeout;
    case RankState::kAwaitingFirstHeartbeat:
      if (options_.first_heartbeat_timeout <= Millis(0)) return std::nullopt;
      return started_ + std::max(options_.first_heartbeat_timeout, options_.hang_timeout);
    case RankState::kExited:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<SteadyTime> HangDetector::next_deadline() const {
  if (!enabled() || phase_ != Phase::kWatching) return std::nullopt;
  std::optional<SteadyTime> earliest;
  for (const Rank& rank : ranks_) {
    std::optional<SteadyTime> deadline = deadline_of(rank);
    if (deadline && (!earliest || *deadline < *earliest)) earliest = deadline;
  }
  return earliest;
}

std::optional<HangVerdict> HangDetector::check(SteadyTime now) {
  if (!enabled() || phase_ != Phase::kWatching) return std::nullopt;
  HangVerdict verdict{now, {}};
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    std::optional<SteadyTime> deadline = deadline_of(ranks_[i]);
    if (deadline && *deadline <= now) verdict.hung.push_back(progress_of(static_cast<int>(i), now));
  }
  if (verdict.hung.empty()) return std::nullopt;
  phase_ = Phase::kTripped;
  return verdict;
}

LocalRankProgress HangDetector::progress_of(int local_rank, SteadyTime now) const {
  const Rank& rank = ranks_[static_cast<std::size_t>(local_rank)];
  LocalRankProgress p;
  p.local_rank = local_rank;
  p.state = rank.state;
  p.last_step = rank.last_step;
  p.last_heartbeat = rank.last_heartbeat;
  p.heartbeats = rank.heartbeats;
  p.busy = rank.busy.mean();
  if (phase_ != Phase::kIdle) {
    const SteadyTime since = rank.last_heartbeat.value_or(started_);
    p.silent_for = std::max(Millis(0), std::chrono::duration_cast<Millis>(now - since));
  }
  return p;
}

std::vector<LocalRankProgress> HangDetector::progress(SteadyTime now) const {
  std::vector<LocalRankProgress> out;
  out.reserve(ranks_.size());
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    out.push_back(progress_of(static_cast<int>(i), now));
  }
  return out;
}

}  // namespace ddprun::agent
