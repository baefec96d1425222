// The coordinator of jobs whose shape is fixed up front, so no server is needed: a single-node
// job (this node alone), or torchrun's static rendezvous (--node_rank R of --nnodes N, every
// node with the same number of workers). This coordinator decides restarts itself: failed
// groups restart until the job's max_restarts is used up, counted on this node; a failure that
// must not be restarted (FailureReport::not_restartable) ends the job at once, exit 79.
#pragma once

#include <boost/asio/io_context.hpp>

#include "agent/coordination/coordinator.h"
#include "rendezvous/wire/job_options.h"

namespace ddprun::agent {

// Callbacks are posted to `io`, never run inside the call, like a networked coordinator's.
class LocalCoordinator final : public Coordinator {
 public:
  // `job`: the job's terms (max_restarts, and max_nodes as the number of nodes); `group_rank`:
  // this node's rank (--node_rank), 0 for a single node.
  LocalCoordinator(boost::asio::io_context& io, rdzv::JobOptions job, int group_rank = 0)
      : io_(io), job_(job), group_rank_(group_rank) {}

  void join(const JoinOffer& offer, std::function<void(Result<RoundAssignment>)> done) override;
  void report_failure(const FailureReport& report,
                      std::function<void(FailureDecision)> done) override;
  void report_success(std::function<void(Status)> done) override;
  void set_event_handler(std::function<void(const CoordinatorEvent&)>) override {}
  // Judges this node's ranks alone: the job's, for a single node; for static multi-node jobs
  // (no server to meet at) only this node's share of them.
  void share_progress(const std::vector<RankProgress>& ranks, uint32_t straggler_threshold_milli,
                      StragglerHandler on_stragglers) override;
  void close() override { closed_ = true; }

 private:
  boost::asio::io_context& io_;
  const rdzv::JobOptions job_;
  const int group_rank_;
  int restarts_ = 0;  // failures so far
  int round_ = 0;
  bool closed_ = false;
};

}  // namespace ddprun::agent
