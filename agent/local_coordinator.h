// The coordinator of a single-node job: every round holds this node alone, and failed groups
// restart until max_restarts is used up.
#pragma once

#include <boost/asio/io_context.hpp>

#include "agent/coordinator.h"

namespace ddprun::agent {

// Callbacks are posted to `io`, never run inside the call, like a networked coordinator's.
class LocalCoordinator final : public Coordinator {
 public:
  LocalCoordinator(boost::asio::io_context& io, int max_restarts)
      : io_(io), max_restarts_(max_restarts) {}

  void join(const JoinOffer& offer, std::function<void(Result<RoundAssignment>)> done) override;
  void report_failure(const FailureReport& report,
                      std::function<void(FailureDecision)> done) override;
  void report_success(std::function<void(Status)> done) override;
  void set_event_handler(std::function<void(const CoordinatorEvent&)>) override {}
  void close() override { closed_ = true; }

 private:
  boost::asio::io_context& io_;
  const int max_restarts_;
  int restarts_ = 0;  // failures so far
  int round_ = 0;
  bool closed_ = false;
};

}  // namespace ddprun::agent
