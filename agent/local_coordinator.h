// The coordinator of jobs whose shape is fixed up front, so no server is needed: a single-node
// job (this node alone), or torchrun's static rendezvous (--node_rank R of --nnodes N, every
// node with the same number of workers). Failed groups restart until max_restarts is used up,
// counted on this node.
#pragma once

#include <boost/asio/io_context.hpp>

#include "agent/coordinator.h"

namespace ddprun::agent {

// Callbacks are posted to `io`, never run inside the call, like a networked coordinator's.
struct LocalCoordinatorOptions {
  int max_restarts = 0;      // restarts allowed after failures
  int group_rank = 0;        // this node's rank (--node_rank)
  int group_world_size = 1;  // nodes in the job (--nnodes)
};

class LocalCoordinator final : public Coordinator {
 public:
  LocalCoordinator(boost::asio::io_context& io, LocalCoordinatorOptions options)
      : io_(io), options_(options) {}

  void join(const JoinOffer& offer, std::function<void(Result<RoundAssignment>)> done) override;
  void report_failure(const FailureReport& report,
                      std::function<void(FailureDecision)> done) override;
  void report_success(std::function<void(Status)> done) override;
  void set_event_handler(std::function<void(const CoordinatorEvent&)>) override {}
  void close() override { closed_ = true; }

 private:
  boost::asio::io_context& io_;
  const LocalCoordinatorOptions options_;
  int restarts_ = 0;  // failures so far
  int round_ = 0;
  bool closed_ = false;
};

}  // namespace ddprun::agent
