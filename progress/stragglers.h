// Stragglers: the ranks that make every step of a synchronous job wait. In such a job every
// rank's step RATE is the same (each waits for the slowest at every synchronisation), so rates
// cannot tell them apart; each rank's BUSY time can: the time from the end of one step's
// synchronisation to its arrival at the next one's (the heartbeat's `step busy_s`,
// heartbeat_watcher.h). A rank whose mean busy time over its last steps is more than the
// threshold times the job's median is a straggler. Reporting only: nothing is stopped.
//
// Judged wherever every rank's busy time meets: the rendezvous server for a multi-node job
// (each Progress message is answered with the finding), the agent itself for a single node.
// Pure; O(ranks) per finding (one selection for the median, one pass for the stragglers).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/result.h"
#include "progress/records.h"

namespace ddprun::progress {

// The most a threshold may be (a rank 1000 times slower than the median is stopped, not slow).
inline constexpr double kMaxStragglerThreshold = 1000.0;

// One node's ranks, as its agent shared them.
struct NodeRanks {
  std::string_view node;  // as StragglerEntry::node
  std::span<const RankProgressEntry> ranks;
};

// The stragglers among `nodes`' ranks by `threshold_milli` (1500: 1.5× the median): ranks with
// a busy time (busy_us > 0) are measured; the median is the lower median of theirs (so with two
// ranks, the faster one's: the slower is named when it is over the threshold times the other);
// fewer than two measured ranks name nobody. threshold_milli 0: nothing judged (an empty
// finding). Stragglers come by rank.
StragglerFinding find_stragglers(std::span<const NodeRanks> nodes, uint32_t threshold_milli);

// --straggler_threshold R as thousandths: R must be above 1 (a ratio of 1 or less would name
// about half of every job) and at most kMaxStragglerThreshold; the error says so.
Result<uint32_t> straggler_threshold_milli(double ratio);

// One straggler as the logs, the status line and `ddp-rendezvous status` print it:
//   rank 3 (node b, local_rank 1): busy 0.42 s per step, 2.1x the job's median of 0.20 s
std::string format_straggler(const StragglerEntry& straggler, const StragglerFinding& finding);

// The finding every node of a job is told, so that each states the job's figures, not the
// moment it asked at: `published` while `fresh` names the same ranks (at least one) by the same
// threshold (its median and measured ranks stay those first judged, though more ranks report
// meanwhile), else `fresh`, which becomes the published one. Pure.
const StragglerFinding& publish_stragglers(StragglerFinding& published, StragglerFinding fresh);

// "0.42 s", "12 ms", "3.1 s": a busy time in microseconds as the lines above print it.
std::string format_busy(uint64_t busy_us);

}  // namespace ddprun::progress
