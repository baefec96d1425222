// Hang detection for one node's ranks in one attempt. Pure: no I/O, no clock reads (times come
// in, decisions go out). Heartbeats (HeartbeatWatcher) and worker exits come in;
// next_deadline() says when to look again (the agent arms one timer there); check(now)
// returns a verdict once some rank is hung:
//   * a rank that sent at least one heartbeat and then none for hang_timeout, or
//   * a rank that sent none within first_heartbeat_timeout of start() (start-up, data loading
//     and compilation take longer than a step, so that limit is separate).
// Per rank:  kAwaitingFirstHeartbeat --heartbeat--> kHeartbeating --exit--> kExited
//            (and kAwaitingFirstHeartbeat --exit--> kExited)
// Detector:  kIdle --start()--> kWatching --check() finds a hung rank--> kTripped
// Progress (last step, heartbeat age) is kept even with detection off, for status lines and
// metrics. Which rank of the whole job stopped first is hang_culprits.h's question.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/progress/busy_window.h"
#include "agent/progress/rank_progress.h"
#include "common/clock.h"

namespace ddprun::agent {

struct HangDetectorOptions {
  // A rank that has sent a heartbeat and then none for this long is hung. 0 (the default):
  // detection is off; check() never gives a verdict and next_deadline() is nullopt.
  Millis hang_timeout{0};
  // A rank that has sent no heartbeat this long after start() is hung. Never shorter than
  // hang_timeout (the longer of the two applies). 0: no limit, so only ranks that have sent a
  // heartbeat are watched (for programs that never send one). Default 600 s.
  Millis first_heartbeat_timeout{600'000};
};

// What check() found: every watched rank past its deadline at `at`, by local rank.
struct HangVerdict {
  SteadyTime at;
  std::vector<LocalRankProgress> hung;
};

// Not thread-safe: one owner (the agent's event loop). Cheap; one per attempt.
class HangDetector {
 public:
  enum class Phase { kIdle, kWatching, kTripped };

  HangDetector(HangDetectorOptions options, int local_world_size);

  bool enabled() const { return options_.hang_timeout > Millis(0); }
  Phase phase() const { return phase_; }

  // The workers started at `now`: the first-heartbeat clocks start. Once only.
  void start(SteadyTime now);
  // A heartbeat from `local_rank`. A heartbeat without a step keeps the last known step (it is
  // a touch, or a read that raced a rewrite); one with a step replaces it; a busy time joins the
  // rank's window. Returns false (and does nothing) before start() or for a local rank out of
  // range or exited.
  bool heartbeat(int local_rank, std::optional<std::int64_t> step, SteadyTime now,
                 std::optional<std::chrono::microseconds> busy = std::nullopt);
  // The worker of `local_rank` exited (whatever the reason): it is no longer watched.
  void worker_exited(int local_rank);

  // When check() should next run: the earliest deadline of a watched rank. nullopt when
  // detection is off, before start(), after a verdict, or when no rank has a deadline.
  std::optional<SteadyTime> next_deadline() const;
  // The verdict, once: when a watched rank's deadline is <= now. Then the phase is kTripped and
  // later calls return nullopt (the agent stops the group; a new attempt gets a new detector).
  std::optional<HangVerdict> check(SteadyTime now);

  // Every rank's progress at `now` (exited ranks included, with their state), by local rank.
  std::vector<LocalRankProgress> progress(SteadyTime now) const;

 private:
  struct Rank {
    RankState state = RankState::kAwaitingFirstHeartbeat;
    std::optional<std::int64_t> last_step;
    std::optional<SteadyTime> last_heartbeat;
    std::uint64_t heartbeats = 0;
    BusyWindow busy;
  };

  std::optional<SteadyTime> deadline_of(const Rank& rank) const;
  LocalRankProgress progress_of(int local_rank, SteadyTime now) const;

  HangDetectorOptions options_;
  Phase phase_ = Phase::kIdle;
  SteadyTime started_{};  // valid from start()
  std::vector<Rank> ranks_;
};

}  // namespace ddprun::agent
