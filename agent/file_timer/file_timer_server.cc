#include "agent/file_timer/file_timer_server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include <spdlog/spdlog.h>
#include <boost/asio/buffer.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/process/exit_status.h"
#include "common/clock.h"
#include "common/posix_fd.h"

namespace ddprun::agent {

Status PosixSignalSender::send(pid_t pid, int signo) {
  if (::kill(pid, signo) == 0) return {};
  return Status::error("cannot send " + signal_name(signo) + " to pid " + std::to_string(pid) +
                       ": " + std::strerror(errno));
}

PosixSignalSender& PosixSignalSender::instance() {
  static PosixSignalSender sender;
  return sender;
}

struct FileTimerServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(boost::asio::io_context& io, FileTimerServerOptions opts, ExpiryHandler handler,
       SignalSender& sender)
      : options(std::move(opts)),
        on_expiry(std::move(handler)),
        signals(sender),
        fifo(io),
        timer(io),
        scopes(options.max_scopes) {}

  void read_more();
  void on_bytes(std::size_t n);
  void handle_request(std::string_view line);
  void rearm();
  void on_deadline();
  void log_bad_request(const Status& status);

  const FileTimerServerOptions options;
  const ExpiryHandler on_expiry;
  SignalSender& signals;
  std::string path;

  boost::asio::posix::stream_descriptor fifo;  // the read end
  UniqueFd keeper;                             // a write end, so that reads never see EOF
  boost::asio::steady_timer timer;
  std::optional<SteadyTime> armed_for;  // the deadline the timer waits for, if it waits
  unsigned generation = 0;              // bumps when re-armed: a stale completion does nothing

  std::array<char, 8192> buffer{};
  FileTimerLineSplitter lines;
  FileTimerScopes scopes;
  FileTimerServerStats stats;
  std::size_t errors_logged = 0;
};

void FileTimerServer::Impl::read_more() {
  std::weak_ptr<Impl> weak = weak_from_this();
  fifo.async_read_some(boost::asio::buffer(buffer),
                       [weak](const boost::system::error_code& ec, std::size_t n) {
                         auto self = weak.lock();
                         if (!self) return;  // the server is gone
                         if (n > 0) self->on_bytes(n);
                         if (ec) {
                           if (ec != boost::asio::error::operation_aborted) {
                             spdlog::error(
                                 "timer FIFO {}: read failed ({}); expiry timers of "
                                 "workers are no longer served",
                                 self->path, ec.message());
                           }
                           return;
                         }
                         self->read_more();
                       });
}

void FileTimerServer::Impl::on_bytes(std::size_t n) {
  for (Result<std::string>& line : lines.feed({buffer.data(), n})) {
    if (!line.ok()) {
      ++stats.malformed;
      log_bad_request(line.status());
      continue;
    }
    handle_request(*line);
  }
  rearm();  // once per read, however many requests it carried
}

void FileTimerServer::Impl::handle_request(std::string_view line) {
  Result<FileTimerRequest> request = parse_file_timer_request(line);
  if (!request) {
    ++stats.malformed;
    log_bad_request(request.status());
    return;
  }
  const Clock& clock = SystemClock::instance();
  Status applied = scopes.apply(*request, clock.steady_now(), clock.wall_now());
  if (!applied.ok()) {
    ++stats.refused;
    log_bad_request(applied);
    return;
  }
  ++stats.requests;
  spdlog::debug("timer FIFO {}: pid {} {} scope '{}'", path, request->pid,
                request->is_release() ? "released" : "acquired", request->scope_id);
}

void FileTimerServer::Impl::log_bad_request(const Status& status) {
  ++errors_logged;
  if (errors_logged <= options.max_logged_errors) {
    spdlog::warn("timer FIFO {}: {}", path, status.message());
    if (errors_logged == options.max_logged_errors) {
      spdlog::warn("timer FIFO {}: further bad timer requests are logged at debug level", path);
    }
  } else {
    spdlog::debug("timer FIFO {}: {}", path, status.message());
  }
}

void FileTimerServer::Impl::rearm() {
  const std::optional<SteadyTime> next = scopes.next_deadline();
  if (next == armed_for) return;
  ++generation;
  armed_for = next;
  if (!next) {
    timer.cancel();
    return;
  }
  timer.expires_at(*next);  // cancels the previous wait, if any
  std::weak_ptr<Impl> weak = weak_from_this();
  timer.async_wait([weak, generation = generation](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || generation != self->generation) return;
    self->armed_for.reset();
    self->on_deadline();
  });
}

void FileTimerServer::Impl::on_deadline() {
  for (const TimerExpiry& expiry : scopes.take_expired(SystemClock::instance().steady_now())) {
    ++stats.expiries;
    Status sent;
    if (expiry.signal > 0) {
      sent = signals.send(expiry.pid, expiry.signal);
      if (sent.ok()) ++stats.signals_sent;
    }
    if (expiry.signal <= 0) {
      spdlog::warn(
          "worker pid {} (local_rank {}): timer scope '{}' expired; it names no signal, "
          "so the worker is not killed",
          expiry.pid, expiry.local_rank, expiry.scope_id);
    } else if (sent.ok()) {
      spdlog::warn("worker pid {} (local_rank {}): timer scope '{}' expired; sent {}", expiry.pid,
                   expiry.local_rank, expiry.scope_id, signal_name(expiry.signal));
    } else {
      spdlog::error("worker pid {} (local_rank {}): timer scope '{}' expired; {}", expiry.pid,
                    expiry.local_rank, expiry.scope_id, sent.message());
    }
    if (on_expiry) on_expiry(expiry, sent);
  }
  rearm();
}

namespace {

// Makes `path` a fresh FIFO: an old FIFO is replaced, anything else is left alone.
Status make_fifo(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISFIFO(st.st_mode)) {
      return Status::invalid_argument("cannot create the timer FIFO " + path +
                                      ": a file that is not a FIFO is in the way");
    }
    ::unlink(path.c_str());
  }
  if (::mkfifo(path.c_str(), 0600) != 0) {
    return Status::error("cannot create the timer FIFO " + path + ": " + std::strerror(errno));
  }
  return {};
}

Result<UniqueFd> open_fifo(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return Status::error("cannot open the timer FIFO " + path + ": " + std::strerror(errno));
  }
  UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
    return Status::error("the timer FIFO " + path + " was replaced by something else");
  }
  return owned;
}

}  // namespace

Result<std::unique_ptr<FileTimerServer>> FileTimerServer::create(boost::asio::io_context& io,
                                                                 const std::string& dir,
                                                                 FileTimerServerOptions options,
                                                                 ExpiryHandler on_expiry,
                                                                 SignalSender& signals) {
  if (options.fifo_name.empty() || options.fifo_name.find('/') != std::string::npos) {
    return Status::invalid_argument("timer FIFO name '" + options.fifo_name +
                                    "' must be a plain file name");
  }
  const std::string path = dir + "/" + options.fifo_name;
  if (Status made = make_fifo(path); !made.ok()) return made;
  // Read end first: a non-blocking open for writing fails (ENXIO) while no reader exists.
  Result<UniqueFd> read_end = open_fifo(path, O_RDONLY);
  Result<UniqueFd> write_end = read_end ? open_fifo(path, O_WRONLY) : read_end.status();
  if (!write_end) {
    ::unlink(path.c_str());
    return write_end.status();
  }
  auto impl = std::make_shared<Impl>(io, std::move(options), std::move(on_expiry), signals);
  impl->path = path;
  impl->keeper = std::move(*write_end);
  boost::system::error_code ec;
  impl->fifo.assign(read_end->get(), ec);
  if (ec) {
    ::unlink(path.c_str());  // read_end still owns the descriptor and closes it
    return Status::error("cannot watch the timer FIFO " + path + ": " + ec.message());
  }
  read_end->release();  // the stream descriptor owns it now
  impl->read_more();
  spdlog::debug("timer FIFO {}: serving FileTimerClient requests", path);
  return std::unique_ptr<FileTimerServer>(new FileTimerServer(path, std::move(impl)));
}

FileTimerServer::FileTimerServer(std::string path, std::shared_ptr<Impl> impl)
    : path_(std::move(path)), impl_(std::move(impl)) {}

FileTimerServer::~FileTimerServer() {
  boost::system::error_code ignored;
  impl_->fifo.close(ignored);
  impl_->timer.cancel();
  ::unlink(path_.c_str());
}

void FileTimerServer::add_worker(pid_t pid, int local_rank) {
  impl_->scopes.add_worker(pid, local_rank);
}

void FileTimerServer::remove_worker(pid_t pid) {
  impl_->scopes.remove_worker(pid);
  impl_->rearm();
}

const FileTimerServerStats& FileTimerServer::stats() const { return impl_->stats; }

}  // namespace ddprun::agent
