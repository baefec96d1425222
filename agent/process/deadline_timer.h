// A one-shot timer behind an interface, so that shutdown deadlines are tested without waiting.
#pragma once

#include <functional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/clock.h"

namespace ddprun::agent {

// Thread-safety: use from the owning event loop's thread only.
class DeadlineTimer {
 public:
  virtual ~DeadlineTimer() = default;
  // Calls `on_expiry` once, `after` from now, unless cancelled or re-armed first.
  virtual void arm(Millis after, std::function<void()> on_expiry) = 0;
  virtual void cancel() = 0;
};

// The real timer, on an Asio event loop.
class AsioDeadlineTimer final : public DeadlineTimer {
 public:
  explicit AsioDeadlineTimer(boost::asio::io_context& io) : timer_(io) {}
  void arm(Millis after, std::function<void()> on_expiry) override;
  void cancel() override;

 private:
  boost::asio::steady_timer timer_;
  unsigned generation_ = 0;  // bumps on every arm/cancel so that a stale expiry does nothing
};

}  // namespace ddprun::agent
