// Naming a hang's culprit (pure): find_hang_culprits() looks across ALL nodes for the rank(s)
// that stopped first. Ranks waiting in a collective for a hung rank stop heartbeating too, so
// "silent" alone would name everyone, and in a synchronous job every rank reports the same step
// within microseconds, so heartbeat ages cannot tell them apart either. What each rank was doing
// when it was stopped can (rank_activity.h: its stack): a rank waiting in a collective is a victim,
// one that is not is the culprit. A rank at a lower step than the rest is behind whatever it was
// doing. When nothing tells the ranks apart, the finding says so instead of guessing. Then
// format_hang_root_cause() writes the report's root-cause line:
//   rank 3 (node b, local_rank 1) hung: no progress for 300 s after step 1234, in load at
//   data.py:88
#pragma once

#include <string>
#include <vector>

#include "agent/progress/rank_progress.h"
#include "common/clock.h"

namespace ddprun::agent {

struct CulpritFinding {
  enum class Basis {
    kNone,             // no ranks given
    kLowestStep,       // steps differ: the culprits are behind the others
    kNotInCollective,  // same step: the culprits were not waiting in a collective, the rest were
    kNotSeenWaiting,   // same step: the rest were seen waiting in a collective; these showed
                       // nothing (no stack), so they are the ones left
    kUndetermined,     // nothing tells the ranks apart: `culprits` holds every candidate
  };
  Basis basis = Basis::kNone;
  std::vector<RankProgress> culprits;  // by global rank
  // kUndetermined: why, as a clause ("every rank at step 7 was waiting in a collective").
  std::string undetermined_because;
};

// The rank(s) that stopped first among `ranks` (pass every rank of every node, with what each
// was doing): the ranks at the lowest last step (no step at all counts as lowest); among those,
// the ones not waiting in a collective when the others were. Pure.
CulpritFinding find_hang_culprits(const std::vector<RankProgress>& ranks);

// The root-cause line for one culprit of `finding`:
//   rank 3 (node b, local_rank 1) hung: no progress for 300 s after step 1234, in load at
//   data.py:88 rank 3 (node b, local_rank 1) hung: no progress for 300 s (it never reported a step)
//   rank 3 (node b, local_rank 1) hung: no heartbeat in 600 s since it started
// and, when the finding is undetermined, the reason after it:
//   rank 0 (node a, local_rank 0) hung: no progress for 4 s after step 3; which rank stopped
//   first cannot be told: every rank at step 3 was waiting in a collective
// Durations print in whole seconds, or with one decimal below 10 s ("1.5 s").
std::string format_hang_root_cause(const RankProgress& culprit, const CulpritFinding& finding = {});

// "300", "1.5", "0.2": seconds as the root-cause line prints them.
std::string format_hang_seconds(Millis duration);

}  // namespace ddprun::agent
