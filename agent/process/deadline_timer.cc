#include "agent/process/deadline_timer.h"

namespace ddprun::agent {

void AsioDeadlineTimer::arm(Millis after, std::function<void()> on_expiry) {
  const unsigned generation = ++generation_;
  timer_.expires_after(after);
  timer_.async_wait(
      [this, generation, cb = std::move(on_expiry)](const boost::system::error_code& ec) {
        // A cancelled wait may still complete without an error if it had already expired.
        if (!ec && generation == generation_) cb();
      });
}

void AsioDeadlineTimer::cancel() {
  ++generation_;
  timer_.cancel();
}

}  // namespace ddprun::agent
