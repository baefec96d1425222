// The client side of the rendezvous: what an agent uses to take part in a job's rendezvous.
// `RendezvousClient` is the interface (the agent's coordinator is unit-tested against a
// scripted one); `TcpRendezvousClient` speaks the wire protocol over a reconnecting Channel.
//
// Threading and callbacks: a client lives on the io_context it is given, which one thread
// runs (the agent's). Call every method on that thread. Nothing blocks; every result comes
// back through a callback invoked on that thread, never inline from the call that started it.
// After close() completes, or once the client is destroyed, no callback runs any more.
//
// Agent lifecycle:
//   client.set_event_handler(on_event);           // RestartRequested / JobFailed / ...
//   client.connect([&](Status s) {                // deadline + backoff + jitter
//     client.join(request, [&](Result<RoundAssignment> a) { start workers from *a });
//   });
//   on worker failure:   client.report_worker_failure(report_json, exit_code);
//                        → every member (this one too) gets RestartRequested{kWorkerFailure}
//                          and calls join() again, or JobFailed when restarts are exhausted.
//   on RestartRequested: stop workers, join() again (scale-up and member loss count no restart).
//   on worker success:   client.report_success();  → JobSucceeded once every member succeeded.
//   at the end:          client.close(done);        // a clean leave
//
// Connection loss: see channel.h. The membership token from the join reply lets a reconnected
// client resume its place within heartbeat_timeout (the server keeps it that long); the pushes
// it missed (made meanwhile, or lost with the old connection) come after the resume, and
// requests left unanswered are sent again and answered once. If that fails, the handler gets
// ConnectionLost and a pending join fails: treat it as fatal.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include <boost/asio/io_context.hpp>

#include "common/result.h"
#include "rendezvous/client/channel.h"
#include "rendezvous/wire/job_options.h"
#include "rendezvous/wire/messages.h"
#include "rendezvous/wire/node_info.h"

namespace ddprun::rdzv {

// What a node asks for: its own facts, and the job's terms (which must agree across the job;
// the first node to join fixes them and a node that disagrees gets an error).
struct JoinRequest {
  NodeInfo node;
  JobOptions job;
  uint16_t standby_port = 0;   // JoinMsg::standby_port
  uint32_t restarts_used = 0;  // JoinMsg::restarts_used
  uint32_t survivors = 0;      // JoinMsg::survivors
};

// The outcome of a round for this node (see messages.h): round, group_rank,
// group_world_size (nodes), local_world_size, rank_offset (first global rank of this node),
// world_size (all workers), master_addr/port, restart_count (job-wide, for
// TORCHELASTIC_RESTART_COUNT), max_restarts (the job's agreed budget) and job_id.
using RoundAssignment = RoundAssigned;

// The server could not be reached again within heartbeat_timeout: the job is lost to us.
struct ConnectionLost {
  std::string message;
};
// Pushed events. RestartRequested: stop workers, join() the next round. JobFailed: stop
// workers, print its failure report (the job's first, identical on every node) and exit with
// its exit code. JobSucceeded: every member reported success; exit 0.
using RendezvousEvent = std::variant<RestartRequested, JobFailed, JobSucceeded, ConnectionLost>;

class RendezvousClient {
 public:
  virtual ~RendezvousClient() = default;

  // Events of the job; set before join(). Replaces any previous handler.
  virtual void set_event_handler(std::function<void(const RendezvousEvent&)> handler) = 0;
  // Connects (deadline, backoff, jitter) and does the handshake.
  virtual void connect(std::function<void(Status)> done) = 0;
  // Joins the next round. Completes with the assignment when the round closes, or an error
  // (job finished, terms that disagree, too few nodes before join_timeout — then the handler
  // also gets JobFailed). One join at a time. A join refused because this node's host is kept
  // out of the server's jobs (kJoinRefusedHostExcluded) fails with kind ErrorKind::kExcluded,
  // the server's sentence (host, reason, until when) as its message.
  virtual void join(JoinRequest request, std::function<void(Result<RoundAssignment>)> done) = 0;
  // This node's workers failed in the current round. `failure_report` is the agent's JSON.
  // A non-empty `not_restartable` says why this failure must not be restarted: the job fails
  // at once (JobFailed, kNotRestartable).
  virtual void report_worker_failure(std::string failure_report, int32_t exit_code,
                                     std::function<void(Status)> done = {},
                                     std::string not_restartable = {}) = 0;
  // This node's workers all succeeded: enter the exit barrier (JobSucceeded when all have).
  virtual void report_success(std::function<void(Status)> done = {}) = 0;
  // This node's ranks' progress in the current round (hang detection across nodes). With a
  // straggler threshold (thousandths; 0: none), `done` gets the job's stragglers by it; without
  // one, an empty finding. `done` may be empty.
  virtual void share_progress(std::vector<RankProgressEntry> ranks,
                              uint32_t straggler_threshold_milli,
                              std::function<void(Result<StragglerFinding>)> done) = 0;
  // Every member's latest shared progress in the current round.
  virtual void job_progress(std::function<void(Result<std::vector<NodeProgress>>)> done) = 0;
  // Leaves the job cleanly (others see a membership change unless the job is over), then
  // disconnects. `done` runs once the server acknowledged or after attempt_timeout.
  virtual void close(std::function<void()> done = {}) = 0;
  // As close(), saying that this node is unfit to train and why (LeaveMsg::exclude_reason):
  // the server keeps its host out for a cool-down.
  virtual void close_excluded(std::string reason, std::function<void()> done) = 0;
  virtual bool connected() const = 0;
  // The server was lost for good: from now on the client talks to `server` (the successor a
  // RoundAssigned named), as a new client would. Pending calls are dropped without callbacks;
  // connect() and join() start over there.
  virtual void move_to(const ServerAddress& server) = 0;
  // Whether this node was in good standing when the server was lost: it had heard from the
  // server within heartbeat_timeout. A node that was itself cut off longer (stopped,
  // partitioned) has been dropped, and the job may have gone on, or ended, without it.
  virtual bool lost_in_good_standing(Millis heartbeat_timeout) const = 0;
};

class TcpRendezvousClient final : public RendezvousClient {
 public:
  // `clock` must outlive the client (rendezvous/client/channel.h).
  TcpRendezvousClient(boost::asio::io_context& io, ClientOptions options,
                      const Clock& clock = SystemClock::instance());
  // Drops the connection without a Leave (the server keeps the node for heartbeat_timeout);
  // no callback runs afterwards. Prefer close().
  ~TcpRendezvousClient() override;
  TcpRendezvousClient(const TcpRendezvousClient&) = delete;
  TcpRendezvousClient& operator=(const TcpRendezvousClient&) = delete;

  void set_event_handler(std::function<void(const RendezvousEvent&)> handler) override;
  void connect(std::function<void(Status)> done) override;
  void join(JoinRequest request, std::function<void(Result<RoundAssignment>)> done) override;
  void report_worker_failure(std::string failure_report, int32_t exit_code,
                             std::function<void(Status)> done = {},
                             std::string not_restartable = {}) override;
  void report_success(std::function<void(Status)> done = {}) override;
  void share_progress(std::vector<RankProgressEntry> ranks, uint32_t straggler_threshold_milli,
                      std::function<void(Result<StragglerFinding>)> done) override;
  void job_progress(std::function<void(Result<std::vector<NodeProgress>>)> done) override;
  void close(std::function<void()> done = {}) override;
  void close_excluded(std::string reason, std::function<void()> done) override;
  bool connected() const override;
  void move_to(const ServerAddress& server) override;
  bool lost_in_good_standing(Millis heartbeat_timeout) const override;
  // The last assignment received, if any.
  const std::optional<RoundAssignment>& assignment() const;

 private:
  struct State;  // what the channel's hooks reach; outlives this object while they may run
  void open_channel();

  boost::asio::io_context& io_;
  ClientOptions options_;
  const Clock& clock_;
  std::shared_ptr<State> state_;
  std::shared_ptr<Channel> channel_;
};

}  // namespace ddprun::rdzv
