// The cross-node half of naming a hang's culprit: every node's ranks are stopped together, and
// every node names the culprit from every rank's stack.
//
// A hang stops every rank of a synchronous job; each node's detector trips within milliseconds
// of the others'. Were a node to stop its workers the moment its own verdict is in, another
// node's ranks could die of the lost connection before that node's verdict, and be stopped
// with SIGTERM (no stack) or counted as an ordinary failure. So:
//   1. await_verdicts: the node shares its ranks as kStopping and waits (bounded) until every
//      rank of the job is reported stopping or read by its node; then it stops its workers with
//      SIGABRT (they print their stacks).
//   2. await_stacks: once its workers' stacks are read (rank_activity.h), the node shares them
//      and waits (bounded) until every rank of the job has been read; then every node holds the
//      same picture and names the same culprit (find_hang_culprits).
// Waiting means asking the rendezvous for the job's progress every `poll_interval`: the server
// does not push progress, and the wait is short and bounded. The pause between two asks is
// `timer` and the deadline is read from `clock` (both AgentParts), so that the lifecycle tests
// run an investigation on a fake clock.
//
// Not thread-safe: the agent's event loop. One investigation at a time; cancel() (or the next
// await) drops a pending one without calling it.
#pragma once

#include <functional>
#include <vector>

#include "agent/coordination/coordinator.h"
#include "agent/process/deadline_timer.h"
#include "agent/progress/hang_culprits.h"
#include "agent/progress/rank_progress.h"
#include "common/clock.h"

namespace ddprun::agent {

struct HangInvestigationOptions {
  // How often the job's progress is read while waiting. Default 50 ms.
  Millis poll_interval{50};
};

class HangInvestigation {
 public:
  using Done = std::function<void(std::vector<RankProgress>)>;

  // `coordinator`, `timer` and `clock` must outlive the investigation; it owns `timer` (arms
  // and cancels it) while it exists.
  HangInvestigation(Coordinator& coordinator, DeadlineTimer& timer, const Clock& clock,
                    HangInvestigationOptions options = {});
  ~HangInvestigation();  // cancels: the timer outlives it

  // Stage 1. Shares `local` (this node's ranks, marked kStopping) and calls `done` with every
  // rank known (this node's as given, the others' as last shared) once all `world_size` ranks
  // are stopping or read, or once `timeout` has passed.
  void await_verdicts(std::vector<RankProgress> local, int world_size, Millis timeout, Done done);
  // Stage 2. Shares `local` (read: kInCollective, kElsewhere or kUnreadable) and calls `done`
  // with every rank known once all `world_size` ranks are read, or once `timeout` has passed.
  void await_stacks(std::vector<RankProgress> local, int world_size, Millis timeout, Done done);
  void cancel();

 private:
  using Ready = bool (*)(RankActivity);
  void await(std::vector<RankProgress> local, int world_size, Millis timeout, Ready ready,
             Done done);
  void poll();

  Coordinator& coordinator_;
  DeadlineTimer& timer_;  // the pause between two reads of the job's progress
  const Clock& clock_;
  const HangInvestigationOptions options_;
  // The pending wait; generation_ tells a stale answer from the current one.
  unsigned generation_ = 0;
  std::vector<RankProgress> local_;
  int world_size_ = 0;
  SteadyTime deadline_;
  Ready ready_ = nullptr;
  Done done_;
};

}  // namespace ddprun::agent
