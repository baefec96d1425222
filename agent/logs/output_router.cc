#include "agent/logs/output_router.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <boost/asio/buffer.hpp>

namespace ddprun::agent {
namespace {

// Writes all of `data`; the console may be a pipe that accepts it in parts.
void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // console gone (EPIPE): nothing useful left to do with this output
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace

OutputRouter::~OutputRouter() {
  for (auto& s : streams_) {
    boost::system::error_code ignored;
    s->pipe.close(ignored);
  }
}

Status OutputRouter::attach(UniqueFd pipe, Sinks sinks) {
  auto stream = std::make_shared<Stream>(io_);
  if (!sinks.file_path.empty()) {
    int fd = ::open(sinks.file_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      return Status::error("cannot open log file " + sinks.file_path + ": " + std::strerror(errno));
    }
    stream->file.reset(fd);
  }
  stream->console_fd = sinks.console_fd;
  stream->prefix = std::move(sinks.prefix);
  stream->tail = std::move(sinks.tail);
  if (sinks.duplicate.file && sinks.duplicate.file->valid() && !sinks.duplicate.filters.empty()) {
    stream->duplicate = std::move(sinks.duplicate);
  }
  boost::system::error_code ec;
  stream->pipe.assign(pipe.release(), ec);
  if (ec) return Status::error("cannot watch a worker's output pipe: " + ec.message());
  streams_.push_back(stream);
  read_more(stream);
  return {};
}

void OutputRouter::read_more(const std::shared_ptr<Stream>& stream) {
  stream->pipe.async_read_some(boost::asio::buffer(stream->buffer),
                               [this, stream](const boost::system::error_code& ec, std::size_t n) {
                                 if (n > 0) deliver(*stream, stream->buffer.data(), n);
                                 if (ec || !stream->open) {  // EOF, or closed by close_all()
                                   finish(*stream);
                                   return;
                                 }
                                 read_more(stream);
                               });
}

void OutputRouter::deliver(Stream& stream, const char* data, std::size_t size) {
  if (stream.file.valid()) write_all(stream.file.get(), data, size);
  if (stream.console_fd < 0 && !stream.duplicate.file && !stream.tail) return;
  for (const std::string& line : stream.lines.feed({data, size})) emit_line(stream, line);
}

void OutputRouter::emit_line(Stream& stream, const std::string& line) {
  // One write per prefixed line keeps lines of different workers from interleaving.
  const std::string out = stream.prefix + line;
  if (stream.console_fd >= 0) write_all(stream.console_fd, out.data(), out.size());
  if (stream.tail) stream.tail->add(line);
  if (!stream.duplicate.file) return;
  for (const auto& filter : stream.duplicate.filters) {
    if (line.find(filter) != std::string::npos) {
      write_all(stream.duplicate.file->get(), out.data(), out.size());
      return;
    }
  }
}

void OutputRouter::finish(Stream& stream) {
  if (!stream.open && !stream.pipe.is_open()) return;
  stream.open = false;
  if (stream.console_fd >= 0 || stream.duplicate.file || stream.tail) {
    const std::string rest = stream.lines.flush();
    if (!rest.empty()) emit_line(stream, rest);
  }
  boost::system::error_code ignored;
  stream.pipe.close(ignored);
  stream.file.reset();
  notify_if_drained();
}

void OutputRouter::when_drained(std::function<void()> done) {
  on_drained_ = std::move(done);
  notify_if_drained();
}

void OutputRouter::close_all() {
  const auto streams = streams_;  // finish() shrinks streams_
  for (const auto& s : streams) {
    if (s->pipe.is_open()) finish(*s);  // its pending read completes with operation_aborted
  }
}

void OutputRouter::notify_if_drained() {
  streams_.erase(std::remove_if(streams_.begin(), streams_.end(),
                                [](const auto& s) { return !s->pipe.is_open(); }),
                 streams_.end());
  if (streams_.empty() && on_drained_) {
    auto done = std::move(on_drained_);
    on_drained_ = nullptr;
    done();
  }
}

}  // namespace ddprun::agent
