// Carries workers' piped output to the console (whole lines, prefixed "[<role><rank>]:") and
// to their log files, on the agent's Asio loop.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "agent/logs/line_assembler.h"
#include "agent/logs/line_tail.h"
#include "common/posix_fd.h"
#include "common/result.h"

namespace ddprun::agent {

// Thread-safety: use from the io_context's thread only. Must outlive the io_context's
// handlers that it starts (destroy it before the io_context, or after run() returned).
class OutputRouter {
 public:
  explicit OutputRouter(boost::asio::io_context& io) : io_(io) {}
  ~OutputRouter();

  // Where a stream's lines that contain one of `filters` are copied as well (prefixed), shared
  // by the streams of every rank (torchrun's --duplicate-*-filters).
  struct Duplicate {
    std::shared_ptr<UniqueFd> file;
    std::vector<std::string> filters;
  };

  // Where one stream goes.
  struct Sinks {
    int console_fd = -1;             // 1 or 2: each whole line, behind `prefix`; -1: not shown
    std::string prefix;              // "[<role><rank>]:" for tee'd streams; "" passes lines through
    std::string file_path;           // the raw bytes; "" for none
    Duplicate duplicate;             // the lines matching its filters, when it has a file
    std::shared_ptr<LineTail> tail;  // the last lines, kept in memory; may be null
  };

  // Routes everything read from `pipe` until EOF to `sinks`.
  Status attach(UniqueFd pipe, Sinks sinks);
  // Calls `done` once every attached pipe has reached end of file (at once if none is open).
  // Workers' grandchildren can hold a pipe open; close_all() bounds that wait.
  void when_drained(std::function<void()> done);
  // Stops reading every pipe, flushing what was read; then fires when_drained's callback.
  void close_all();

 private:
  struct Stream {
    explicit Stream(boost::asio::io_context& io) : pipe(io) {}
    boost::asio::posix::stream_descriptor pipe;
    int console_fd = -1;
    std::string prefix;
    UniqueFd file;
    Duplicate duplicate;
    std::shared_ptr<LineTail> tail;
    LineAssembler lines;
    std::vector<char> buffer = std::vector<char>(std::size_t{16} * 1024);
    bool open = true;
  };

  void read_more(const std::shared_ptr<Stream>& stream);
  void deliver(Stream& stream, const char* data, std::size_t size);
  void emit_line(Stream& stream, const std::string& line);
  void finish(Stream& stream);
  void notify_if_drained();

  boost::asio::io_context& io_;
  std::vector<std::shared_ptr<Stream>> streams_;
  std::function<void()> on_drained_;
};

}  // namespace ddprun::agent
