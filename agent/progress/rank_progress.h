// A rank's progress, as the agent holds it: where one local rank stands at a given time
// (LocalRankProgress: HangDetector keeps it, heartbeats move it), and one rank of the whole job
// as its node saw it (RankProgress: what the status lines, metrics and the naming of a hang's
// culprits read). The wire's form of the same is progress::RankProgressEntry (progress_entry.h
// converts).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "agent/progress/rank_activity.h"
#include "common/clock.h"

namespace ddprun::agent {

enum class RankState {
  kAwaitingFirstHeartbeat,  // started, silent so far
  kHeartbeating,            // has sent at least one heartbeat
  kExited,                  // its worker exited: no longer watched
};

// Where one local rank stands at a given time.
struct LocalRankProgress {
  int local_rank = 0;
  RankState state = RankState::kAwaitingFirstHeartbeat;
  std::optional<std::int64_t> last_step;     // the last step reported, if any ever was
  std::optional<SteadyTime> last_heartbeat;  // nullopt: none yet
  Millis silent_for{0};                      // since the last heartbeat, or since start()
  std::uint64_t heartbeats = 0;
  // Its mean busy time per step over its last reports (busy_window.h); nullopt: it reports none.
  std::optional<std::chrono::microseconds> busy;
};

// One rank of the whole job, as its node saw it, for naming culprits across nodes.
struct RankProgress {
  int rank = 0;  // global rank
  std::string node;
  int local_rank = 0;
  std::optional<std::int64_t> last_step;  // nullopt: it never reported a step
  Millis heartbeat_age{0};     // since its last heartbeat (since start when none), at a common time
  bool heartbeat_seen = true;  // false: it never sent a heartbeat
  // What it was doing when it was stopped (read from its stack once it was); kUnknown before.
  RankActivity activity = RankActivity::kUnknown;
  std::string where;  // the frame that showed it (ActivityFinding::where); may be empty
  std::optional<std::chrono::microseconds> busy;  // LocalRankProgress::busy
};

// `progress` of local rank as global rank `rank` on `node`.
RankProgress to_rank_progress(const LocalRankProgress& progress, int rank, std::string node);

}  // namespace ddprun::agent
