// The rendezvous of one job, decided in one place: a pure, deterministic state machine.
//
// Inputs are events with explicit timestamps (join, leave, connection lost/regained, worker
// failure/success reports, and `advance(now)` for deadlines); outputs are Decisions — the
// pushes to send to named nodes. No I/O, no clock reads, no timers: the server owns a timer
// that calls advance() at next_deadline(), and unit tests drive it with a FakeClock.
//
// Lifecycle of a job: Gathering (round N open) → Running (round N closed, ranks assigned) →
// Gathering (round N+1, after a scale-up, a lost member or a worker failure) → ... →
// Succeeded or Failed (terminal; every known node is told).
//
// Rules (see docs/rendezvous.md):
//  - A round closes at once when max_nodes have joined; once min_nodes have joined a last call
//    of last_call_timeout starts; a re-rendezvous round also closes as soon as every survivor
//    of the previous round has re-joined. With fewer than min_nodes at join_timeout after the
//    round opened, the job fails.
//  - Group ranks: a valid, free node-rank hint first, then the node's previous group rank, then
//    the free ranks in join order. Global ranks are contiguous per node.
//  - A worker failure consumes one job-wide restart (max_restarts); scale-up and member loss
//    do not. Restarts exhausted → JobFailed with the failing round's first report.
//  - A member whose connection is lost (closed without a leave, or silent for heartbeat_timeout)
//    makes the survivors re-rendezvous at once (at the exit barrier, once some member has
//    finished, only when its grace ends); the next round does not wait for it. Its record
//    (group rank, membership token) is kept for heartbeat_timeout: a node that reconnects in
//    time resumes, gets the pushes it missed, and re-joins with its old rank. Otherwise it is
//    dropped. A node lost while waiting for a round keeps its place for that grace.
//
// Thread-safety: none; the owner (the server's io_context) serialises calls.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "rendezvous/wire/job_options.h"
#include "rendezvous/wire/messages.h"
#include "rendezvous/wire/node_info.h"

namespace ddprun::rdzv {

struct Outgoing {
  std::string node_id;
  Push push;
};
using Decisions = std::vector<Outgoing>;

// JobFailed's exit code when the rendezvous itself fails (too few nodes, exit barrier).
inline constexpr int32_t kRendezvousFailureExitCode = 1;

class RoundState {
 public:
  // Turns a RoundState into bytes and back (job_snapshot.h): the rendezvous's durable state.
  friend struct RoundStateCodec;

  enum class Phase { kGathering, kRunning, kSucceeded, kFailed };

  RoundState(std::string job_id, JobOptions options, SteadyTime now);

  // A node asks for a place in the next round. Errors: job finished, options that disagree
  // with the job's. A join while a round runs waits (standby) or triggers a scale-up.
  Result<Decisions> join(const NodeInfo& node, const JobOptions& asked, SteadyTime now);
  // A clean leave: dropped at once.
  Decisions leave(const std::string& node_id, SteadyTime now);
  // The node's connection is gone. A running member's loss restarts the survivors at once;
  // the node itself is dropped unless reattach() comes within heartbeat_timeout.
  Decisions detach(const std::string& node_id, SteadyTime now);
  // The node reconnected; false when it is no longer known (already dropped).
  bool reattach(const std::string& node_id);
  // Reports for `round`; reports for a round that already ended are ignored (ok, no decision).
  // A failure consumes one restart of options().max_restarts, or fails the job; its
  // `failure_report` (opaque JSON) travels with the push either way. A non-empty
  // `not_restartable` (why not) fails the job at once with kNotRestartable, whatever is left.
  Result<Decisions> report_failure(const std::string& node_id, uint64_t round,
                                   const std::string& failure_report, int32_t exit_code,
                                   SteadyTime now, const std::string& not_restartable = {});
  Result<Decisions> report_success(const std::string& node_id, uint64_t round, SteadyTime now);
  // Applies every deadline that has passed at `now`.
  Decisions advance(SteadyTime now);
  // When advance() next has something to do; nullopt when nothing is timed.
  std::optional<SteadyTime> next_deadline() const;

  Phase phase() const { return phase_; }
  bool finished() const { return phase_ == Phase::kSucceeded || phase_ == Phase::kFailed; }
  uint64_t round() const { return round_; }
  uint32_t restart_count() const { return restart_count_; }
  // The job moved to this server after its host was lost: it had used `used` restarts. Taken
  // (the largest named) only while the first round gathers.
  void adopt_restart_count(uint32_t used) {
    if (round_ == 0 && phase_ == Phase::kGathering) restart_count_ = std::max(restart_count_, used);
  }
  // The same job: `count` nodes of the last round it ran, the lost host excepted, are coming
  // (JoinMsg::survivors). The first round then closes once that many have joined, without a
  // last call, as a round after a lost member does once every survivor is back. Taken (the
  // largest named) only while the first round gathers; not kept in snapshots.
  void expect_survivors(uint32_t count) {
    if (round_ == 0 && phase_ == Phase::kGathering)
      moved_survivors_ = std::max(moved_survivors_, count);
  }
  const JobOptions& options() const { return options_; }
  bool knows(const std::string& node_id) const { return nodes_.count(node_id) != 0; }
  // The push that tells `node_id` where the job is now, for a node that may have missed the
  // pushes before a server restart (job_registry.cc, restore): its RoundAssigned while it is a
  // member of the running round, the RestartRequested of the round it was in while the next one
  // gathers without it, JobSucceeded or JobFailed (its message, report and exit code) once the
  // job has ended; nullopt otherwise (waiting nodes need nothing).
  std::optional<Push> catch_up(const std::string& node_id) const;
  // The same for several nodes at once, in O(nodes): those that need a push, in the order
  // asked (a restored job's, for every node).
  std::vector<std::pair<std::string, Push>> catch_up_all(
      const std::vector<std::string>& node_ids) const;
  // A member's group rank in the running round and the address it advertises.
  std::optional<std::pair<uint32_t, std::string>> member_placement(
      const std::string& node_id) const;
  bool empty() const { return nodes_.empty(); }
  size_t member_count() const { return member_count_; }
  size_t pending_count() const { return pending_count_; }
  // When the open round opened; once it closed, when the running round had opened.
  SteadyTime round_opened_at() const { return round_opened_at_; }

  // A read-only view of the job, for status queries and metrics.
  struct NodeView {
    std::string node_id;
    NodePhase phase = NodePhase::kPending;
    std::optional<uint32_t> group_rank;  // in the running round, or the last one it was in
    uint32_t local_world_size = 0;
    bool detached = false;  // its connection is gone; kept for heartbeat_timeout
  };
  struct Snapshot {
    Phase phase = Phase::kGathering;
    uint64_t round = 0;
    uint32_t restart_count = 0;
    JobOptions options;
    SteadyTime round_opened_at;
    std::vector<NodeView> nodes;  // by group rank (nodes without one last), then node id
  };
  Snapshot snapshot() const;

  // The nodes whose stored fields (job_snapshot.h: info, state, join order, group rank,
  // expected, succeeded; or the node itself, added or removed) changed since the last call:
  // what a save must write (issue 25: a save writes what changed, not the whole job).
  std::vector<std::string> take_changed_nodes();
  // Marks a node changed for a reason outside the round (its membership token, kept by the
  // registry). Unknown nodes are ignored.
  void mark_changed(const std::string& node_id);

 private:
  enum class NodeState {
    kIdle,     // known, not in a round: a previous member that has not re-joined yet
    kPending,  // joined the open round
    kStandby,  // joined while a full or finishing round runs; enters the next round
    kMember,   // member of the running round
  };
  struct NodeRecord {
    NodeInfo info;
    NodeState state = NodeState::kPending;
    uint64_t join_seq = 0;                     // join order, for rank assignment
    std::optional<uint32_t> last_group_rank;   // kept across rounds where possible
    std::optional<SteadyTime> grace_deadline;  // set while detached
    bool expected = false;                     // a survivor the open round waits for
    bool succeeded = false;                    // reported success in the running round
  };

  Status check_options(const NodeInfo& node, const JobOptions& asked) const;
  // Every change of a node's state, expected or succeeded goes through set_node(), which keeps
  // the counts below in step; count_node() adds (+1) or takes away (-1) one node's share.
  void set_node(NodeRecord& rec, NodeState state, bool expected, bool succeeded);
  void count_node(const NodeRecord& rec, int sign);
  void join_gathering(NodeRecord& rec, SteadyTime now, Decisions& out);
  void join_running(NodeRecord& rec, SteadyTime now, Decisions& out);
  // Ends the running round (telling its members why) and opens the next one. `failure_report`
  // travels with a kWorkerFailure restart.
  void open_round(SteadyTime now, RestartReason reason, const std::string& why, Decisions& out,
                  const std::string& failure_report = {});
  void maybe_close(SteadyTime now, Decisions& out);
  void close_round(Decisions& out);
  void admit_standby();
  std::vector<std::pair<uint32_t, NodeRecord*>> assign_ranks();
  void drop(const std::string& node_id, SteadyTime now, const std::string& why, Decisions& out);
  void maybe_succeed(Decisions& out);
  void fail_job(JobFailureReason reason, const std::string& message,
                const std::string& failure_report, int32_t exit_code, Decisions& out);
  void push_to_all(const Push& push, Decisions& out) const;

  const std::string job_id_;
  const JobOptions options_;
  Phase phase_ = Phase::kGathering;
  uint64_t round_ = 0;          // the open or running round
  uint32_t restart_count_ = 0;  // worker-failure restarts consumed, job-wide
  uint64_t next_join_seq_ = 0;
  std::unordered_map<std::string, NodeRecord> nodes_;
  std::set<std::pair<SteadyTime, std::string>> graces_;  // detached nodes by drop deadline
  std::unordered_set<std::string> changed_;              // since take_changed_nodes(); see there

  // Counts over nodes_, kept by set_node() and count_node() only (never assigned elsewhere):
  //   pending_count_    nodes in kPending          member_count_      nodes in kMember
  //   succeeded_count_  members that succeeded     expected_missing_  expected nodes, still kIdle
  //   standby_count_    nodes in kStandby (waiting spares)
  size_t pending_count_ = 0;
  size_t standby_count_ = 0;
  size_t member_count_ = 0;
  size_t succeeded_count_ = 0;
  size_t expected_missing_ = 0;
  // Gathering: the survivors of the last round this round waits for (those lost meanwhile
  // taken off), whether or not they have joined yet.
  SteadyTime round_opened_at_;
  std::optional<SteadyTime> min_reached_at_;
  size_t expected_total_ = 0;
  // Gathering the first round of a job that moved here: the survivors coming (expect_survivors).
  uint32_t moved_survivors_ = 0;
  std::optional<SteadyTime> barrier_deadline_;
  // Failed: what every node was told (kept durable: job_snapshot.h; catch_up() repeats it).
  std::optional<JobFailed> failure_;
};

}  // namespace ddprun::rdzv
