#include "rendezvous/wire/frame_writer.h"

#include <iterator>
#include <vector>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace ddprun::rdzv {

namespace asio = boost::asio;

FrameWriter::FrameWriter(const asio::any_io_executor& executor, size_t max_queued_bytes)
    : max_queued_bytes_(max_queued_bytes), wake_(executor) {}

bool FrameWriter::enqueue(std::string frame) {
  if (frame.size() > max_queued_bytes_ - queued_bytes_) return false;
  queued_bytes_ += frame.size();
  queue_.push_back(std::move(frame));
  wake_.cancel();
  return true;
}

void FrameWriter::enqueue_front(std::string frame) {
  queued_bytes_ += frame.size();
  queue_.push_front(std::move(frame));
  wake_.cancel();
}

void FrameWriter::clear() {
  queue_.clear();
  queued_bytes_ = 0;
}

void FrameWriter::finish_when_flushed() {
  finishing_ = true;
  wake_.cancel();
}

asio::awaitable<Status> FrameWriter::run(Stream& stream, std::function<bool()> current) {
  boost::system::error_code ec;
  std::vector<std::string> batch;
  std::vector<asio::const_buffer> buffers;
  while (current()) {
    if (queue_.empty()) {
      if (finishing_) break;
      wake_.expires_at(asio::steady_timer::time_point::max());
      co_await wake_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
    clear();
    buffers.clear();
    for (const auto& frame : batch) buffers.push_back(asio::buffer(frame));
    co_await stream.write(buffers, ec);
    if (ec) co_return Status::closed(ec.message());
  }
  co_return Status();
}

}  // namespace ddprun::rdzv
