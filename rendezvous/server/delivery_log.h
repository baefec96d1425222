// What the server sent one node over its membership, kept so that a cut connection loses
// nothing (protocol.md, "Delivery across reconnects"):
//
//  - pushes: numbered 1, 2, ... per membership and kept until the node acknowledges them (its
//    Heartbeats and its Resume carry how many it has received). A node that resumes gets
//    exactly the pushes after its count, whether they were made while it was away or written
//    to the connection that was then cut.
//  - replies: the latest answers to its requests, by request id. A client re-sends a request
//    whose answer a cut lost; the server answers it again from here instead of doing it twice
//    (a join repeated after its round closed would otherwise restart the job).
//
// Both are bounded: a node more than kMaxUnacknowledged pushes behind cannot resume (it must
// join again), and only the last kMaxReplies answers are kept (a client has a handful of
// requests in flight at most).
//
// After a server restart (state restored from a store) the history is unknown: the node's next
// resume is believed, and what was pushed since the restart is replayed (see restored()).
//
// Thread-safety: none; owned by the registry's job link.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "common/result.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

class DeliveryLog {
 public:
  static constexpr size_t kMaxUnacknowledged = 256;
  static constexpr size_t kMaxReplies = 16;

  // A log whose earlier history is unknown (a server restored from its state store).
  static DeliveryLog restored();

  // Numbers `push` and keeps it until it is acknowledged.
  void record(Push push);
  // The node has received `count` pushes: those are forgotten. Error when `count` is more
  // than were sent (a confused or hostile client).
  Status acknowledge(uint64_t count);
  // A resume from a node that has received `count` pushes: the ones it missed, in order (and
  // `count` acknowledged). Error when some were already forgotten, or when `count` is more
  // than were sent. After restored(), `count` is believed and everything kept is replayed.
  Result<std::vector<Push>> resume(uint64_t count);

  // Keeps the answer to request `reply.request_id` (the oldest goes beyond kMaxReplies).
  void remember(const Reply& reply);
  // The answer already given to `request_id`, or null.
  const Reply* answered(uint32_t request_id) const;

  uint64_t sent() const { return first_kept_ + pushes_.size() - 1; }
  size_t unacknowledged() const { return pushes_.size(); }

 private:
  uint64_t first_kept_ = 1;  // the number of pushes_.front()
  std::deque<Push> pushes_;  // unacknowledged, oldest first
  bool history_known_ = true;
  std::deque<Reply> replies_;  // oldest first
};

}  // namespace ddprun::rdzv
