#include "common/periodic_status.h"

namespace ddprun {

PeriodicStatus::PeriodicStatus(boost::asio::io_context& io, ServiceNotifier& notifier,
                               std::chrono::milliseconds period,
                               std::function<std::string()> describe)
    : notifier_(notifier), timer_(io), period_(period), describe_(std::move(describe)) {}

void PeriodicStatus::start(bool with_ready) {
  if (running_ || !notifier_.active()) return;
  running_ = true;
  if (with_ready) {
    last_ = describe_();
    notifier_.ready(last_);
  } else {
    refresh();
  }
  schedule();
}

void PeriodicStatus::refresh() {
  std::string line = describe_();
  if (line == last_) return;
  last_ = std::move(line);
  notifier_.status(last_);
}

void PeriodicStatus::stop() {
  running_ = false;
  timer_.cancel();
}

void PeriodicStatus::schedule() {
  timer_.expires_after(period_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !running_) return;
    refresh();
    schedule();
  });
}

}  // namespace ddprun
