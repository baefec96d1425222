// The agent's response to a hang verdict, over the attempt that hung:
//   respond(): this node's workers are stopped with SIGABRT (each prints its stack): at once
//     on a single node; in a multi-node job once every node has its verdict, so that no rank
//     dies of a lost peer before its own node has seen the hang (HangInvestigation, bounded).
//   settle(): once they have exited, what each was doing is read from its stack, the other
//     nodes' stacks are awaited (bounded), and the report's failures become the culprits
//     (hang_report.h), named alike on every node.
// Silence alone does not say which rank stopped first (the ranks waiting for it fall silent
// too): the culprit is named once the stacks are read, and not before.
//
// Not thread-safe: the agent's event loop. A callback runs only while its attempt's
// `current()` holds, and never after reset() or destruction.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agent/coordination/coordinator.h"
#include "agent/failure_report.h"
#include "agent/process/deadline_timer.h"
#include "agent/progress/hang_investigation.h"
#include "agent/progress/rank_progress.h"
#include "common/clock.h"

namespace ddprun::agent {

struct HangResponseOptions {
  // After a verdict in a multi-node job: how long to wait for the other nodes' verdicts before
  // stopping this node's workers anyway (their ranks may still be heartbeating). Default 2 s.
  Millis agreement_timeout{2000};
  // How long to wait for the other nodes' stacks before naming culprits without them. It covers
  // a node stopping its workers (SIGABRT, the stack printed) and draining their output (the
  // agent's 2 s bound on that). Default 5 s.
  Millis stacks_timeout{5000};
  HangInvestigationOptions investigation;
};

class HangResponse {
 public:
  // The hung attempt, as the agent sees it.
  struct Attempt {
    int world_size = 1;        // ranks in the job
    int local_world_size = 1;  // ranks on this node
    // Whether the agent is still where the step left it (the same round, the same phase).
    std::function<bool()> current;
  };
  // Stops this node's hung workers with SIGABRT, recording `failures` (hung_failures).
  using Stop = std::function<void(std::vector<WorkerFailure> failures)>;
  // A worker's last stderr lines (its stack), by local rank.
  using StackOf = std::function<std::vector<std::string>(int local_rank)>;
  using Send = std::function<void(FailureReport report)>;

  // `coordinator`, `timer` and `clock` must outlive this (see HangInvestigation).
  HangResponse(Coordinator& coordinator, DeadlineTimer& timer, const Clock& clock,
               HangResponseOptions options = {});

  // Whether the current attempt had a verdict (until reset()): its failure is settled here.
  bool active() const { return !ranks_.empty(); }
  // A new attempt, or the job's end: forgets the verdict and drops a pending wait.
  void reset();

  // A verdict on this node's `ranks` (global ranks; marked stopping here): `stop` is called
  // once, at once or after the other nodes' verdicts. Ignored while active().
  void respond(std::vector<RankProgress> ranks, Attempt attempt, Stop stop);
  // The hung attempt's workers have exited with `report` (its failures): `send` gets it with
  // the culprits as its failures, at once or after the other nodes' stacks; reset() follows.
  void settle(FailureReport report, Attempt attempt, const StackOf& stack_of, Send send);

 private:
  bool multi_node(const Attempt& attempt) const;
  void name_culprits(FailureReport report, const std::vector<RankProgress>& job, const Send& send);

  Coordinator& coordinator_;
  const Clock& clock_;
  const HangResponseOptions options_;
  HangInvestigation investigation_;
  // This node's ranks as they stood at the verdict; empty when there was none.
  std::vector<RankProgress> ranks_;
};

}  // namespace ddprun::agent
