// A STATUS= line for the service manager that follows a program's state without hooks into
// it: a timer on the event loop asks `describe` every `period` and sends the line when it
// changed. For the ddp-rendezvous daemon (jobs and connections); the agent reports on events
// instead (agent/service_status.h).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/service_notifier.h"

namespace ddprun {

// Not thread-safe: use on the loop's thread. `notifier` must outlive it.
class PeriodicStatus {
 public:
  PeriodicStatus(boost::asio::io_context& io, ServiceNotifier& notifier,
                 std::chrono::milliseconds period, std::function<std::string()> describe);
  ~PeriodicStatus() { stop(); }
  PeriodicStatus(const PeriodicStatus&) = delete;
  PeriodicStatus& operator=(const PeriodicStatus&) = delete;

  // Sends the line now and checks again every period; `with_ready`: the first line goes with
  // READY=1, in one message. Does nothing when the notifier is inactive: nobody would read it.
  void start(bool with_ready = false);
  // Sends the line now if it changed (e.g. right after an event the caller knows of).
  void refresh();
  void stop();
  // The last line sent (or that would have been).
  const std::string& last() const { return last_; }

 private:
  void schedule();

  ServiceNotifier& notifier_;
  boost::asio::steady_timer timer_;
  const std::chrono::milliseconds period_;
  const std::function<std::string()> describe_;
  std::string last_;
  bool running_ = false;
};

}  // namespace ddprun
