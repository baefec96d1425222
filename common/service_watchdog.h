// Keeps the service manager's watchdog fed from the event loop itself: a timer on the loop
// sends WATCHDOG=1 every half of the watchdog timeout (systemd's advice in sd_watchdog_enabled
// (3)). Since the ping is an ordinary handler on the loop, a loop that wedges (a handler that
// never returns, a deadlock) stops the pings, and systemd restarts the service after
// WatchdogSec. A thread of its own would keep pinging a dead loop; this does not.
#pragma once

#include <chrono>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/service_notifier.h"

namespace ddprun {

// Not thread-safe: use on the loop's thread (or before it runs). `notifier` must outlive it.
class ServiceWatchdog {
 public:
  ServiceWatchdog(boost::asio::io_context& io, ServiceNotifier& notifier);
  ~ServiceWatchdog() { stop(); }
  ServiceWatchdog(const ServiceWatchdog&) = delete;
  ServiceWatchdog& operator=(const ServiceWatchdog&) = delete;

  // Sends a first ping now and then one every interval(), while the loop runs. Does nothing
  // when the notifier has no watchdog. Idempotent.
  void start();
  // No ping after this (call before STOPPING=1, so that it stays the last message).
  void stop();

  bool running() const { return running_; }
  // Half the watchdog timeout, at least 1 ms; nullopt without a watchdog.
  std::optional<std::chrono::microseconds> interval() const { return interval_; }

 private:
  void schedule();

  ServiceNotifier& notifier_;
  boost::asio::steady_timer timer_;
  std::optional<std::chrono::microseconds> interval_;
  bool running_ = false;
};

}  // namespace ddprun
