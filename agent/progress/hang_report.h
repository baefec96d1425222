// The hang's side of the failure report, from the verdict to the culprits (pure): which
// workers a verdict stops and how they are recorded, what each one's stack says it was doing,
// and the failures that name the culprits once every rank of the job is known. The agent does
// the stopping and the waiting (agent.cc, hang_investigation.h); these say what.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "agent/failure_report.h"
#include "agent/progress/rank_progress.h"
#include "common/clock.h"

namespace ddprun::agent {

// A hung worker's stack dump (every thread's) is longer than an ordinary error's tail: how
// many of its last stderr lines are read and reported.
inline constexpr std::size_t kHungStackLines = 120;

// The failures a hang verdict records for this node's `ranks`: each by rank, local rank and
// node, marked hung, with no exit yet (they are stopped with SIGABRT).
std::vector<WorkerFailure> hung_failures(const std::vector<RankProgress>& ranks);

// Sets each rank's activity and where from the stack it printed when it was stopped:
// `stack_of(local_rank)` gives that worker's last stderr lines (read_activity, rank_activity.h).
void read_hung_stacks(std::vector<RankProgress>& ranks,
                      const std::function<std::vector<std::string>(int local_rank)>& stack_of);

// The culprits among every rank of the job (`job`, find_hang_culprits) as failures: this node's
// from `report` (its exit, its stderr tail), the other nodes' by node and rank as killed by
// SIGABRT at `now`; each hung, with the root-cause line as its message. Empty when no rank is
// known (the report's own failures then stand).
std::vector<WorkerFailure> hang_culprit_failures(const FailureReport& report,
                                                 const std::vector<RankProgress>& job,
                                                 WallTime now);

}  // namespace ddprun::agent
