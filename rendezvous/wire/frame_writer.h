// The outgoing half of a framed connection, shared by the server's sessions and the client's
// channel: a queue of whole frames and one writer coroutine that sends whatever is queued in
// one batch (a vectored write), so a burst of pushes costs one system call.
//
// Not thread-safe: the owner and the writer coroutine run on one io_context thread. The owner
// keeps the FrameWriter alive while run() is suspended (the coroutine holds the owner).
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <limits>
#include <string>
#include <utility>  // before Boost 1.74's awaitable.hpp (see frame_io.h)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/result.h"
#include "rendezvous/wire/stream.h"

namespace ddprun::rdzv {

class FrameWriter {
 public:
  // enqueue() refuses a frame that would leave more than `max_queued_bytes` unsent.
  explicit FrameWriter(const boost::asio::any_io_executor& executor,
                       size_t max_queued_bytes = std::numeric_limits<size_t>::max());

  // Queues a whole frame behind the others. False, and nothing queued, when the queue would
  // exceed max_queued_bytes: the peer reads too slowly and the caller should drop it.
  bool enqueue(std::string frame);
  // Queues a frame ahead of everything queued (a reconnecting client's Resume).
  void enqueue_front(std::string frame);
  // Forgets every frame not yet handed to the socket.
  void clear();
  bool empty() const { return queue_.empty(); }
  size_t queued_bytes() const { return queued_bytes_; }
  // Frames queued and not yet handed to the stream (a peer that does not read its replies
  // makes this grow: the server bounds it per connection).
  size_t queued_frames() const { return queue_.size(); }

  // Writes queued frames to `stream` while `current()` holds, waiting for frames when the
  // queue is empty. Returns ok when current() turns false (checked after every wait and
  // write) or, after finish_when_flushed(), once the queue is empty; a failed write returns
  // its error (kind kClosed).
  boost::asio::awaitable<Status> run(Stream& stream, std::function<bool()> current);
  // The writer returns once everything queued so far has been written.
  void finish_when_flushed();
  // Wakes a waiting writer so that it re-checks current().
  void wake() { wake_.cancel(); }

 private:
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  const size_t max_queued_bytes_;
  bool finishing_ = false;
  boost::asio::steady_timer wake_;  // a waiting writer sleeps on it until cancelled
};

}  // namespace ddprun::rdzv
