#include "rendezvous/server/delivery_log.h"

#include <algorithm>

#include <fmt/format.h>

namespace ddprun::rdzv {

DeliveryLog DeliveryLog::restored() {
  DeliveryLog log;
  log.history_known_ = false;
  return log;
}

void DeliveryLog::record(Push push) {
  pushes_.push_back(std::move(push));
  if (pushes_.size() > kMaxUnacknowledged) {
    // The node has not acknowledged for that long: it is gone or broken. Its resume will be
    // refused for the push forgotten here.
    pushes_.pop_front();
    ++first_kept_;
  }
}

Status DeliveryLog::acknowledge(uint64_t count) {
  if (count > sent()) {
    return Status::malformed(
        fmt::format("acknowledges {} pushes; only {} were sent to this node", count, sent()));
  }
  while (!pushes_.empty() && first_kept_ <= count) {
    pushes_.pop_front();
    ++first_kept_;
  }
  // Acknowledging what was already forgotten (count < first_kept_ - 1) changes nothing here;
  // resume() is where that matters.
  return Status();
}

Result<std::vector<Push>> DeliveryLog::resume(uint64_t count) {
  if (!history_known_) {
    // Everything kept was pushed after the restart, while the node was away.
    history_known_ = true;
    first_kept_ = count + 1;
  }
  if (count > sent()) {
    return Status::refused(
        fmt::format("it says it received {} pushes; this server sent it {}", count, sent()));
  }
  if (count + 1 < first_kept_) {
    return Status::refused(fmt::format("it missed {} pushes and this server keeps at most {}",
                                       sent() - count, kMaxUnacknowledged));
  }
  if (Status ok = acknowledge(count); !ok) return ok;
  return std::vector<Push>(pushes_.begin(), pushes_.end());
}

void DeliveryLog::remember(const Reply& reply) {
  replies_.push_back(reply);
  if (replies_.size() > kMaxReplies) replies_.pop_front();
}

const Reply* DeliveryLog::answered(uint32_t request_id) const {
  auto it = std::find_if(replies_.rbegin(), replies_.rend(),
                         [&](const Reply& r) { return r.request_id == request_id; });
  return it == replies_.rend() ? nullptr : &*it;
}

}  // namespace ddprun::rdzv
