#include "common/service_watchdog.h"

#include <algorithm>

namespace ddprun {

ServiceWatchdog::ServiceWatchdog(boost::asio::io_context& io, ServiceNotifier& notifier)
    : notifier_(notifier), timer_(io) {
  if (auto timeout = notifier_.watchdog_timeout()) {
    interval_ = std::max<std::chrono::microseconds>(*timeout / 2, std::chrono::milliseconds(1));
  }
}

void ServiceWatchdog::start() {
  if (running_ || !interval_) return;
  running_ = true;
  notifier_.watchdog();
  schedule();
}

void ServiceWatchdog::stop() {
  running_ = false;
  timer_.cancel();
}

void ServiceWatchdog::schedule() {
  timer_.expires_after(*interval_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !running_) return;  // cancelled by stop() (or the loop is being destroyed)
    notifier_.watchdog();
    schedule();
  });
}

}  // namespace ddprun
