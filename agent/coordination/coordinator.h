// The agent's view of the rest of the job: who is in each round, whether a failed group is
// restarted, and when the job is done. Single-node jobs decide locally (LocalCoordinator);
// multi-node jobs ask the rendezvous server. All calls are made on the agent's event loop and
// complete through callbacks on that loop; none blocks.
#pragma once

#include <functional>
#include <string>

#include "agent/failure_report.h"
#include "agent/progress/rank_progress.h"
#include "common/result.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::agent {

// This node's place in one round, as decided by the rendezvous.
struct RoundAssignment {
  int round = 0;
  int group_rank = 0;        // this node among nodes
  int group_world_size = 1;  // nodes in the round
  int rank_offset = 0;       // global rank of this node's local rank 0
  int world_size = 1;        // workers in the round
  std::string master_addr;   // where rank 0's worker (or the agent store) listens
  int master_port = 0;
  int restart_count = 0;  // job-wide failures so far: TORCHELASTIC_RESTART_COUNT
  // The job's restart budget as the deciding coordinator agreed it (the rendezvous server, or
  // the local coordinator): TORCHELASTIC_MAX_RESTARTS.
  int max_restarts = 0;
  bool use_agent_store = false;
};

// What this node brings to a round.
struct JoinOffer {
  int local_world_size = 1;
  std::string master_addr;  // offered to the job if this node becomes group rank 0
  int master_port = 0;
};

// Pushed by a coordinator between calls.
struct CoordinatorEvent {
  enum class Kind {
    // Stop workers and join the next round: membership changed (scale-up, a node lost; not a
    // restart) or another node's workers failed (the coordinator has counted that restart).
    kRejoin,
    // The job is over elsewhere (restarts exhausted, too few nodes, coordinator lost): stop
    // workers, print `report` (when it has failures) or `reason`, exit with `exit_code`.
    kJobFailed,
  };
  Kind kind = Kind::kRejoin;
  std::string reason;    // one sentence for the log
  FailureReport report;  // for kJobFailed: the job's first failure, identical on every node
  int exit_code = 1;     // for kJobFailed
  // kRejoin: the round ended because another node's workers failed (a counted restart), not for
  // membership; --max_no_progress_restarts counts those attempts as failed ones, and `report`
  // is then the job's report of that failure (--node_failure_limit reads its root cause; may be
  // empty).
  bool worker_failure = false;
};

class Coordinator {
 public:
  virtual ~Coordinator() = default;

  // Joins the next round. `done` gets the assignment, or an error that ends the job.
  virtual void join(const JoinOffer& offer, std::function<void(Result<RoundAssignment>)> done) = 0;

  struct FailureDecision {
    bool restart = false;  // true: join again; false: the job has failed
    FailureReport report;  // the job's report (every node prints the same one); may be empty
    int exit_code = 1;
    // restart == true: whether this failure consumed a restart (false when the round had
    // already ended for another reason, e.g. a node was lost at the same time).
    bool counted = true;
  };
  // This node's workers failed with `report`.
  virtual void report_failure(const FailureReport& report,
                              std::function<void(FailureDecision)> done) = 0;
  // This node's workers all succeeded. `done` gets ok when the whole job has (exit barrier),
  // or an error when it failed elsewhere or the barrier timed out. A kRejoin event instead
  // means the round did not finish everywhere (a node was lost or failed): `done` is dropped
  // and the agent joins the next round, as every member does.
  virtual void report_success(std::function<void(Status)> done) = 0;
  // Receives pushed events. Set once, before join().
  virtual void set_event_handler(std::function<void(const CoordinatorEvent&)> handler) = 0;

  // Hang detection across nodes. Whether progress is shared with other nodes (a multi-node job).
  virtual bool shares_progress() const { return false; }
  using StragglerHandler = std::function<void(const rdzv::StragglerFinding&)>;
  // This node's ranks' progress in the current round. With a straggler threshold (thousandths,
  // progress/stragglers.h; 0: none), `on_stragglers` then gets the job's stragglers by it, as
  // far as this coordinator sees the job (a networked one: every node; a local one: this node's
  // ranks), unless the answer is lost (the next share asks again).
  // Overrides keep `on_stragglers`, by value.
  // NOLINTBEGIN(performance-unnecessary-value-param)
  virtual void share_progress(const std::vector<RankProgress>& ranks,
                              uint32_t straggler_threshold_milli, StragglerHandler on_stragglers) {}
  // NOLINTEND(performance-unnecessary-value-param)
  // The latest progress every node shared in the current round (this node's too), or an error.
  // Only called when shares_progress().
  // NOLINTNEXTLINE(performance-unnecessary-value-param): overrides keep `done`, by value.
  virtual void job_progress(std::function<void(Result<std::vector<RankProgress>>)> done) {}
  // Leaves the job; no callback fires afterwards.
  virtual void close() = 0;
  // As close(), saying that this node leaves unfit to train and why (`reason`: one sentence:
  // its workers caused the job's failures, it failed its health check, a rank asked to exclude
  // it, a worker could not be killed), so that the rendezvous keeps its host out for a while and
  // a spare takes its place. A coordinator with no one to tell (LocalCoordinator) just closes.
  virtual void close_excluded(const std::string& reason) { close(); }
};

}  // namespace ddprun::agent
