#include "agent/progress/straggler_notices.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "progress/stragglers.h"

namespace ddprun::agent {
namespace {

bool named(const std::vector<rdzv::StragglerEntry>& stragglers, uint32_t rank) {
  return std::any_of(stragglers.begin(), stragglers.end(),
                     [rank](const rdzv::StragglerEntry& s) { return s.rank == rank; });
}

}  // namespace

bool StragglerNotices::update(const rdzv::StragglerFinding& finding) {
  bool changed = false;
  for (const rdzv::StragglerEntry& s : finding.stragglers) {
    if (named(current_.stragglers, s.rank)) continue;
    changed = true;
    spdlog::warn("straggler: {} (threshold {:g}x, {} ranks measured)",
                 progress::format_straggler(s, finding), finding.threshold_milli / 1000.0,
                 finding.ranks_measured);
  }
  for (const rdzv::StragglerEntry& s : current_.stragglers) {
    if (named(finding.stragglers, s.rank)) continue;
    changed = true;
    spdlog::info(
        "straggler no more: rank {} (node {}, local_rank {}) is within {:g}x the job's "
        "median busy time of {}",
        s.rank, s.node, s.local_rank, finding.threshold_milli / 1000.0,
        progress::format_busy(finding.median_us));
  }
  current_ = finding;
  return changed;
}

std::string StragglerNotices::summary() const {
  if (current_.threshold_milli == 0) return {};
  std::string named;
  for (const rdzv::StragglerEntry& s : current_.stragglers) {
    named += fmt::format("{}rank {} (node {})", named.empty() ? "" : ", ", s.rank, s.node);
  }
  return fmt::format(
      "stragglers: {} over {:g}x the job's median busy time of {} ({} ranks measured)",
      named.empty() ? "none" : named, current_.threshold_milli / 1000.0,
      progress::format_busy(current_.median_us), current_.ranks_measured);
}

}  // namespace ddprun::agent
