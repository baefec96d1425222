// The coordinator of multi-node (c10d backend) and --standalone jobs: the rendezvous server
// decides rounds, ranks, restarts and the job's outcome, and pushes them to every node at once.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "agent/coordinator.h"
#include "rendezvous/client.h"

namespace ddprun::agent {

struct RendezvousCoordinatorOptions {
  rdzv::ClientOptions client;  // server endpoint, job id, connect/heartbeat timeouts
  std::string node_id;         // unique within the job, e.g. "<host>:<pid>:<random>"
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;  // job-wide
  std::optional<int> node_rank_hint;
  Millis join_timeout{600'000};
  Millis last_call_timeout{30'000};
  Millis heartbeat_timeout{15'000};
  Millis exit_barrier_timeout{300'000};  // how long a finished node waits for the others
};

// Not thread-safe: use on `io`'s thread. Callbacks run on that thread, never inline.
class RendezvousCoordinator final : public Coordinator {
 public:
  RendezvousCoordinator(boost::asio::io_context& io, RendezvousCoordinatorOptions options);
  ~RendezvousCoordinator() override;

  void join(const JoinOffer& offer, std::function<void(Result<RoundAssignment>)> done) override;
  void report_failure(const FailureReport& report,
                      std::function<void(FailureDecision)> done) override;
  void report_success(std::function<void(Status)> done) override;
  void set_event_handler(std::function<void(const CoordinatorEvent&)> handler) override;
  void close() override;
  // Leaves cleanly, then calls `done` (bounded by the client's request deadline).
  void close_gracefully(std::function<void()> done);

 private:
  void on_event(const rdzv::RendezvousEvent& event);
  void send_join(const JoinOffer& offer, std::function<void(Result<RoundAssignment>)> done);
  void fail_job(std::string reason, FailureReport report, int exit_code);

  RendezvousCoordinatorOptions options_;
  rdzv::RendezvousClient client_;
  bool connected_ = false;
  bool closed_ = false;
  std::function<void(const CoordinatorEvent&)> handler_;
  // At most one of these waits at a time: the outcome of a report comes as a pushed event.
  std::function<void(FailureDecision)> pending_failure_;
  std::function<void(Status)> pending_success_;
};

}  // namespace ddprun::agent
