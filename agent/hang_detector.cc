#include "agent/hang_detector.h"

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

RankProgress to_rank_progress(const LocalRankProgress& progress, int rank, std::string node) {
  RankProgress out;
  out.rank = rank;
  out.node = std::move(node);
  out.local_rank = progress.local_rank;
  out.last_step = progress.last_step;
  out.heartbeat_age = progress.silent_for;
  out.heartbeat_seen = progress.last_heartbeat.has_value();
  out.busy = progress.busy;
  return out;
}

namespace {

// Orders "further behind" first: no step before any step, then lower steps.
bool behind(const std::optional<std::int64_t>& a, const std::optional<std::int64_t>& b) {
  if (!a || !b) return !a && b;
  return *a < *b;
}

}  // namespace

namespace {

std::vector<RankProgress> with_activity(const std::vector<RankProgress>& ranks,
                                        RankActivity activity) {
  std::vector<RankProgress> out;
  for (const RankProgress& r : ranks) {
    if (r.activity == activity) out.push_back(r);
  }
  return out;
}

std::string step_text(const std::optional<std::int64_t>& step) {
  return step ? "at step " + std::to_string(*step) : "without a step";
}

}  // namespace

CulpritFinding find_hang_culprits(const std::vector<RankProgress>& ranks) {
  CulpritFinding finding;
  if (ranks.empty()) return finding;
  std::optional<std::int64_t> lowest = ranks.front().last_step;
  for (const RankProgress& r : ranks) {
    if (behind(r.last_step, lowest)) lowest = r.last_step;
  }
  std::vector<RankProgress> candidates;
  for (const RankProgress& r : ranks) {
    if (r.last_step == lowest) candidates.push_back(r);
  }
  const bool steps_differ = candidates.size() < ranks.size();
  std::vector<RankProgress> elsewhere = with_activity(candidates, RankActivity::kElsewhere);
  std::vector<RankProgress> waiting_ranks = with_activity(candidates, RankActivity::kInCollective);
  std::vector<RankProgress> unknown;  // no stack read: unreadable, or never stopped
  for (const RankProgress& r : candidates) {
    if (r.activity != RankActivity::kElsewhere && r.activity != RankActivity::kInCollective) {
      unknown.push_back(r);
    }
  }
  const std::size_t waiting = waiting_ranks.size();
  if (steps_differ) {
    // Behind the others whatever it was doing; narrowed to the ones not waiting, if any.
    finding.basis = CulpritFinding::Basis::kLowestStep;
    finding.culprits = elsewhere.empty() ? candidates : elsewhere;
  } else if (!elsewhere.empty() && elsewhere.size() < candidates.size()) {
    finding.basis = CulpritFinding::Basis::kNotInCollective;
    finding.culprits = std::move(elsewhere);
  } else if (!unknown.empty() && waiting > 0 && elsewhere.empty()) {
    finding.basis = CulpritFinding::Basis::kNotSeenWaiting;
    finding.culprits = std::move(unknown);
  } else {
    finding.basis = CulpritFinding::Basis::kUndetermined;
    finding.culprits = candidates;
    const std::string at = step_text(lowest);
    if (waiting == candidates.size()) {
      finding.undetermined_because = "every rank " + at + " was waiting in a collective";
    } else if (elsewhere.size() == candidates.size()) {
      finding.undetermined_because = "no rank " + at + " was waiting in a collective";
    } else {
      finding.undetermined_because = "no rank " + at + " showed where it was (no stack)";
    }
  }
  std::sort(finding.culprits.begin(), finding.culprits.end(),
            [](const RankProgress& a, const RankProgress& b) { return a.rank < b.rank; });
  return finding;
}

std::string format_hang_seconds(Millis duration) {
  const long long ms = std::max<long long>(duration.count(), 0);
  const long long tenths = std::llround(static_cast<double>(ms) / 100.0);
  if (ms >= 10'000 || tenths % 10 == 0) {
    return std::to_string(std::llround(static_cast<double>(ms) / 1000.0));
  }
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10);
}

std::string format_hang_root_cause(const RankProgress& culprit, const CulpritFinding& finding) {
  std::string line = "rank " + std::to_string(culprit.rank) + " (node " + culprit.node +
                     ", local_rank " + std::to_string(culprit.local_rank) + ") hung: ";
  const std::string seconds = format_hang_seconds(culprit.heartbeat_age);
  if (!culprit.heartbeat_seen) {
    line += "no heartbeat in " + seconds + " s since it started";
  } else {
    line += "no progress for " + seconds + " s";
    line += culprit.last_step ? " after step " + std::to_string(*culprit.last_step)
                              : " (it never reported a step)";
  }
  if (!culprit.where.empty()) {
    line += culprit.activity == RankActivity::kInCollective ? ", waiting in " : ", in ";
    line += culprit.where;
  }
  if (finding.basis == CulpritFinding::Basis::kUndetermined) {
    line += "; which rank stopped first cannot be told: " + finding.undetermined_because;
  }
  return line;
}

}  // namespace ddprun::agent
