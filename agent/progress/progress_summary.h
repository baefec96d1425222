// A node's ranks' progress (last step, heartbeat age) condensed into one short phrase for the
// service manager's status line (agent/service_status.h), whatever the number of ranks:
//
//   steps 1234-1236, oldest heartbeat 2.1 s (rank 3)
//   step 1234, oldest heartbeat < 1 s
//   step 1234, oldest heartbeat 4.0 s (rank 5); 2 ranks without a heartbeat yet
//   no heartbeat yet (4 ranks)
//
// Bounded: the lowest and highest step and the single oldest heartbeat, never a list of ranks.
// Ages under a second show as "< 1 s" without a rank: when every rank is fresh, which one beat
// last is noise, and leaving it out keeps the line from changing for nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/progress/rank_progress.h"
#include "common/clock.h"

namespace ddprun::agent {

struct ProgressSummary {
  int ranks = 0;                         // ranks summarised (running ones)
  int awaiting_first = 0;                // of them, those that sent no heartbeat yet
  std::optional<std::int64_t> min_step;  // over the ranks that reported a step
  std::optional<std::int64_t> max_step;
  std::optional<int> oldest_rank;  // the global rank whose last heartbeat is oldest
  Millis oldest_age{0};            // its age; ties go to the lowest rank
};

// The summary of `ranks` (global ranks; a rank that never sent a heartbeat counts only in
// awaiting_first).
ProgressSummary summarize_progress(const std::vector<RankProgress>& ranks);

// The phrase above; empty when there are no ranks.
std::string describe(const ProgressSummary& summary);

// How the status line reads the running ranks' progress: this node's ranks by global rank,
// exited ones left out, empty when no worker runs (agent::Agent::progress()).
using ProgressQuery = std::function<std::vector<RankProgress>()>;

}  // namespace ddprun::agent
