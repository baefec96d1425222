// Hang detection, in two pure parts (no I/O, no clock reads: times come in, decisions go out).
//
// 1. HangDetector: one node's ranks in one attempt. Heartbeats (HeartbeatWatcher) and worker
//    exits come in; next_deadline() says when to look again (the agent arms one timer there);
//    check(now) returns a verdict once some rank is hung:
//      * a rank that sent at least one heartbeat and then none for hang_timeout, or
//      * a rank that sent none within first_heartbeat_timeout of start() (start-up, data
//        loading and compilation take longer than a step, so that limit is separate).
//    Per rank:  kAwaitingFirstHeartbeat --heartbeat--> kHeartbeating --exit--> kExited
//               (and kAwaitingFirstHeartbeat --exit--> kExited)
//    Detector:  kIdle --start()--> kWatching --check() finds a hung rank--> kTripped
//    Progress (last step, heartbeat age) is kept even with detection off, for status lines and
//    metrics.
//
// 2. find_hang_culprits(): across ALL nodes, which rank(s) stopped first. Ranks waiting in a
//    collective for a hung rank stop heartbeating too, so "silent" alone would name everyone,
//    and in a synchronous job every rank reports the same step within microseconds, so heartbeat
//    ages cannot tell them apart either. What each rank was doing when it was stopped can
//    (rank_activity.h: its stack): a rank waiting in a collective is a victim, one that is not
//    is the culprit. A rank at a lower step than the rest is behind whatever it was doing.
//    When nothing tells the ranks apart, the finding says so instead of guessing. Then
//    format_hang_root_cause() writes the report's root-cause line:
//      rank 3 (node b, local_rank 1) hung: no progress for 300 s after step 1234, in load at
//      data.py:88
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/busy_window.h"
#include "agent/rank_activity.h"
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
