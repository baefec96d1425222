#include "progress/stragglers.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace ddprun::progress {

StragglerFinding find_stragglers(std::span<const NodeRanks> nodes, uint32_t threshold_milli) {
  StragglerFinding finding;
  if (threshold_milli == 0) return finding;
  finding.threshold_milli = threshold_milli;
  std::vector<uint64_t> busy;
  size_t ranks = 0;
  for (const NodeRanks& node : nodes) ranks += node.ranks.size();
  busy.reserve(ranks);
  for (const NodeRanks& node : nodes) {
    for (const RankProgressEntry& rank : node.ranks) {
      if (rank.busy_us > 0) busy.push_back(rank.busy_us);
    }
  }
  finding.ranks_measured = static_cast<uint32_t>(busy.size());
  if (busy.empty()) return finding;
  const auto lower_median = busy.begin() + static_cast<std::ptrdiff_t>((busy.size() - 1) / 2);
  std::nth_element(busy.begin(), lower_median, busy.end());
  finding.median_us = *lower_median;
  if (busy.size() < 2) return finding;
  // In floating point: busy times come from peers, and busy × 1000 may not fit 64 bits.
  const double limit = static_cast<double>(finding.median_us) * threshold_milli / 1000.0;
  for (const NodeRanks& node : nodes) {
    for (const RankProgressEntry& rank : node.ranks) {
      if (rank.busy_us > 0 && static_cast<double>(rank.busy_us) > limit) {
        finding.stragglers.push_back(
            {rank.rank, rank.local_rank, std::string(node.node), rank.busy_us});
      }
    }
  }
  std::sort(finding.stragglers.begin(), finding.stragglers.end(),
            [](const StragglerEntry& a, const StragglerEntry& b) { return a.rank < b.rank; });
  return finding;
}

Result<uint32_t> straggler_threshold_milli(double ratio) {
  if (!std::isfinite(ratio) || ratio <= 1.0 || ratio > kMaxStragglerThreshold) {
    return Status::invalid_argument(fmt::format(
        "straggler threshold {} is out of range: give a ratio to the job's median busy time "
        "above 1 and at most {:g} (e.g. 1.5), or leave it out to name no stragglers",
        ratio, kMaxStragglerThreshold));
  }
  return static_cast<uint32_t>(std::lround(ratio * 1000.0));
}

const StragglerFinding& publish_stragglers(StragglerFinding& published, StragglerFinding fresh) {
  auto same_ranks = [](const StragglerFinding& a, const StragglerFinding& b) {
    if (a.stragglers.size() != b.stragglers.size()) return false;
    for (std::size_t i = 0; i < a.stragglers.size(); ++i) {
      if (a.stragglers[i].rank != b.stragglers[i].rank) return false;
    }
    return true;
  };
  // With nobody named there is nothing to disagree about: the figures are the current ones.
  if (fresh.stragglers.empty() || fresh.threshold_milli != published.threshold_milli ||
      !same_ranks(fresh, published)) {
    published = std::move(fresh);
  }
  return published;
}

std::string format_busy(uint64_t busy_us) {
  if (busy_us < 10'000) return fmt::format("{:.1f} ms", static_cast<double>(busy_us) / 1e3);
  if (busy_us < 1'000'000) return fmt::format("{} ms", (busy_us + 500) / 1000);
  if (busy_us < 10'000'000) return fmt::format("{:.2f} s", static_cast<double>(busy_us) / 1e6);
  return fmt::format("{:.1f} s", static_cast<double>(busy_us) / 1e6);
}

std::string format_straggler(const StragglerEntry& straggler, const StragglerFinding& finding) {
  const double ratio = finding.median_us == 0 ? 0.0
                                              : static_cast<double>(straggler.busy_us) /
                                                    static_cast<double>(finding.median_us);
  return fmt::format(
      "rank {} (node {}, local_rank {}): busy {} per step, {:.1f}x the job's median of {}",
      straggler.rank, straggler.node, straggler.local_rank, format_busy(straggler.busy_us), ratio,
      format_busy(finding.median_us));
}

}  // namespace ddprun::progress
