#include "agent/progress/hang_culprits.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

namespace ddprun::agent {

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
