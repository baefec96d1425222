// The coordinator of multi-node (c10d backend) and --standalone jobs: the rendezvous server
// decides rounds, ranks, restarts and the job's outcome, and pushes them to every node at once.
// This class translates between the agent's Coordinator calls and a RendezvousClient.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "agent/coordination/coordinator.h"
#include "rendezvous/client/client.h"
#include "rendezvous/wire/job_options.h"

namespace ddprun::agent {

struct RendezvousCoordinatorOptions {
  // The job's terms, built once from the command line and sent whole with every join; the
  // server's RoundState decides with them.
  rdzv::JobOptions job;
  std::string node_id;  // unique within the job, e.g. "<host>:<pid>:<random>"
  std::optional<int> node_rank_hint;
  std::string server;  // "host:port", for error messages
  // This node's standby rendezvous server (JoinMsg::standby_port): where the rendezvous moves
  // if this node becomes the successor of a lost host. 0: none.
  uint16_t standby_port = 0;
};

// Not thread-safe: use on the client's io_context thread. Callbacks run on that thread, never
// inline. `client` must outlive the coordinator.
class RendezvousCoordinator final : public Coordinator {
 public:
  RendezvousCoordinator(RendezvousCoordinatorOptions options, rdzv::RendezvousClient& client);
  ~RendezvousCoordinator() override;

  void join(const JoinOffer& offer, std::function<void(Result<RoundAssignment>)> done) override;
  void report_failure(const FailureReport& report,
                      std::function<void(FailureDecision)> done) override;
  void report_success(std::function<void(Status)> done) override;
  void set_event_handler(std::function<void(const CoordinatorEvent&)> handler) override;
  bool shares_progress() const override { return true; }
  // The server judges the job's stragglers and answers with them.
  void share_progress(const std::vector<RankProgress>& ranks, uint32_t straggler_threshold_milli,
                      StragglerHandler on_stragglers) override;
  void job_progress(std::function<void(Result<std::vector<RankProgress>>)> done) override;
  void close() override;
  // Nothing reaches the agent afterwards; the leave that close_gracefully() then sends carries
  // `reason` (LeaveMsg::exclude_reason), for the server to keep this node's host out.
  void close_excluded(const std::string& reason) override;
  // Leaves cleanly (saying why this node is unfit, after close_excluded()), then calls `done`
  // (bounded by the client's request deadline).
  void close_gracefully(std::function<void()> done);

 private:
  void on_event(const rdzv::RendezvousEvent& event);
  void on_restart(const rdzv::RestartRequested& restart);
  void send_join(const JoinOffer& offer, std::function<void(Result<RoundAssignment>)> done);
  void fail_job(std::string reason, FailureReport report, int exit_code);
  bool fail_over(const std::string& why);
  void end_with_lost_server(const std::string& why);

  const RendezvousCoordinatorOptions options_;
  rdzv::RendezvousClient& client_;
  bool connected_ = false;
  bool closed_ = false;
  std::function<void(const CoordinatorEvent&)> handler_;
  // At most one of these waits at a time: the outcome of a report comes as a pushed event.
  std::function<void(FailureDecision)> pending_failure_;
  std::function<void(Status)> pending_success_;
  // From the last round: where the rendezvous moves if its server is lost, how many nodes the
  // round had and the job's restarts so far (carried to the successor).
  std::optional<rdzv::ServerAddress> successor_;
  int last_group_world_size_ = 0;
  uint32_t restart_count_ = 0;
  // After a move: the nodes of the last round other than the lost host, all coming to the
  // successor (JoinMsg::survivors), whose round then closes without a last call. 0 otherwise.
  uint32_t survivors_ = 0;
  std::string current_server_;  // for messages: options_.server, then the successor
  std::string exclude_reason_;  // close_excluded(): why this node leaves unfit; empty: it is fit
};

}  // namespace ddprun::agent
