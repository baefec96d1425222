#include "rendezvous/session.h"

#include <array>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "rendezvous/frame_io.h"
#include "rendezvous/status_report.h"

namespace ddprun::rdzv {
namespace {
// How long a refused or kicked peer may take to read our Error frame and hang up.
constexpr Millis kLinger{1000};
}  // namespace

Session::Session(tcp::socket socket, std::shared_ptr<JobRegistry> registry,
                 const ServerOptions& options, std::shared_ptr<ServerCounters> counters,
                 std::function<void(Session*)> on_end)
    : socket_(std::move(socket)),
      registry_holder_(std::move(registry)),
      registry_(*registry_holder_),
      options_(options),
      counters_(std::move(counters)),
      on_end_(std::move(on_end)),
      deadline_(socket_.get_executor()),
      writer_(socket_.get_executor(), options.max_outbox_bytes) {
  boost::system::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  peer_name_ = ec ? "unknown peer" : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

Session::~Session() = default;

void Session::start() {
  configure_socket(socket_);
  auto self = shared_from_this();
  asio::co_spawn(
      socket_.get_executor(), [self] { return self->read_loop(); },
      LogCoroutineEnd{"rendezvous session reader"});
  asio::co_spawn(
      socket_.get_executor(), [self] { return self->write_loop(); },
      LogCoroutineEnd{"rendezvous session writer"});
}

void Session::arm_deadline(Millis timeout) {
  deadline_.expires_after(timeout);
  deadline_.async_wait([weak = weak_from_this(), timeout](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || !self->open_) return;
    spdlog::info("rendezvous: dropping {}: silent for {} ms", self->peer_name_, timeout.count());
    ++self->counters_->deadline_drops;
    self->close_now();
  });
}

asio::awaitable<void> Session::read_loop() {
  std::vector<uint8_t> body;
  bool peer_gone = false;  // the peer hung up: there is nothing left to drain
  arm_deadline(options_.handshake_timeout);
  while (open_ && !closing_) {
    Status ok = co_await read_frame(socket_, options_.limits, body);
    if (!ok) {
      spdlog::debug("rendezvous: {} disconnected: {}", peer_name_, ok.message());
      // Only a frame we refused deserves an answer; a vanished peer gets none.
      if (open_ && ok.is_malformed()) close_with_error(ok.message());
      peer_gone = ok.is_closed();
      break;
    }
    auto message = decode_client_message(body, options_.limits);
    ok = message.status();
    if (ok) count_in(*message, body.size());
    if (ok && !job_) {
      const auto* query = std::get_if<StatusQuery>(&*message);
      ok = query ? answer_status(*query) : handshake(*message);
      if (!ok) ++counters_->rejected_handshake;
      if (ok && query) break;  // answered; closing once flushed
    } else if (ok) {
      handle(std::move(*message));
    }
    if (!ok) {
      spdlog::info("rendezvous: dropping {}: {}", peer_name_, ok.message());
      close_with_error(ok.message());
      break;
    }
    const bool member = !node_id_.empty() && job_->round;
    if (open_ && !closing_) {
      arm_deadline(member ? job_->round->options().heartbeat_timeout : options_.idle_timeout);
    }
  }
  // Only a peer we refused gets time to read our Error; a peer that hung up is gone now, and
  // its node's loss must reach the round at once. (Reading again after end of file would not
  // even complete: the reactor reported the hang-up once, so the linger deadline would have
  // to end it. That was the one-second tail at the end of multi-node jobs, when the hosting
  // agent's server shut down as the other agents hung up.)
  if (closing_ && !peer_gone) co_await drain();
  finish();
}

// After we refused a peer, its bytes are read and discarded until it hangs up or the linger
// deadline closes the socket: closing with unread input would reset the connection and could
// destroy the Error frame before the peer reads it.
asio::awaitable<void> Session::drain() {
  std::array<uint8_t, 4096> scratch{};
  boost::system::error_code ec;
  while (open_) {
    co_await socket_.async_read_some(asio::buffer(scratch),
                                     asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
}

void Session::count_in(const ClientMessage& message, size_t body_bytes) {
  ++counters_->messages_in[message.index()];
  counters_->bytes_in += kFrameHeaderBytes + body_bytes;
  last_heard_ = registry_.clock().steady_now();
}

Status Session::answer_status(const StatusQuery& query) {
  if (query.magic != kProtocolMagic) return Status::malformed("bad protocol magic");
  if (query.version != kProtocolVersion) {
    return Status::refused(fmt::format("protocol version {} is not supported (server speaks {})",
                                       query.version, kProtocolVersion));
  }
  send(build_status_report(registry_.snapshot(), registry_.clock().steady_now(),
                           options_.limits.max_frame_bytes));
  close_after_flush();
  return Status();
}

Status Session::handshake(const ClientMessage& first) {
  const auto* hello = std::get_if<Hello>(&first);
  if (!hello) {
    return Status::malformed(fmt::format("expected Hello, got {}", message_name(first)));
  }
  if (hello->magic != kProtocolMagic) return Status::malformed("bad protocol magic");
  if (hello->version != kProtocolVersion) {
    return Status::refused(fmt::format("protocol version {} is not supported (server speaks {})",
                                       hello->version, kProtocolVersion));
  }
  if (hello->job_id.empty()) return Status::malformed("Hello without a job id");
  job_ = &registry_.open_connection(hello->job_id);
  send(HelloAck{});
  return Status();
}

void Session::handle(ClientMessage&& message) {
  std::visit(
      [&](auto&& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Hello>) {
          close_with_error("a second Hello on one connection");
        } else if constexpr (std::is_same_v<M, StatusQuery>) {
          close_with_error("a status query must be a connection's first frame");
        } else if constexpr (std::is_same_v<M, JoinMsg>) {
          registry_.join(*job_, *this, m, node_id_);
        } else if constexpr (std::is_same_v<M, ResumeMsg>) {
          registry_.resume(*job_, *this, m, node_id_);
        } else if constexpr (std::is_same_v<M, HeartbeatMsg>) {
          send(HeartbeatAck{});
        } else if constexpr (std::is_same_v<M, ReportFailureMsg>) {
          registry_.report_failure(*job_, *this, m, node_id_);
        } else if constexpr (std::is_same_v<M, ReportSuccessMsg>) {
          registry_.report_success(*job_, *this, m, node_id_);
        } else if constexpr (std::is_same_v<M, LeaveMsg>) {
          registry_.leave(*job_, *this, m, node_id_);
        } else if constexpr (std::is_same_v<M, ProgressMsg>) {
          registry_.progress(*job_, m, node_id_);
        } else if constexpr (std::is_same_v<M, ProgressQueryMsg>) {
          registry_.query_progress(*job_, *this, m);
        }
      },
      std::move(message));
}

void Session::send(const ServerMessage& message) {
  if (!open_ || closing_) return;
  std::string frame = encode_frame(message);
  ++counters_->messages_out[message.index()];
  counters_->bytes_out += frame.size();
  if (!writer_.enqueue(std::move(frame))) {
    spdlog::warn("rendezvous: dropping {}: it reads too slowly (more than {} bytes queued)",
                 peer_name_, options_.max_outbox_bytes);
    close_now();
  }
}

asio::awaitable<void> Session::write_loop() {
  Status written = co_await writer_.run(socket_, [this] { return open_; });
  if (!written) {
    close_now();
  } else if (open_ && closing_) {
    // Flushed: half-close so the peer reads everything, then give it a moment to hang up.
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
  }
}

void Session::close_with_error(const std::string& why) {
  if (!open_ || closing_) return;
  send(ErrorMsg{why});
  close_after_flush();
}

void Session::close_after_flush() {
  if (!open_ || closing_) return;
  closing_ = true;
  writer_.finish_when_flushed();
  arm_deadline(kLinger);
}

void Session::close_now() {
  if (!open_) return;
  open_ = false;
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  deadline_.cancel();
  writer_.wake();
}

void Session::finish() {
  close_now();
  if (job_) {
    JobRegistry::Job* job = std::exchange(job_, nullptr);
    registry_.close_connection(*job, *this, node_id_);
  }
  if (on_end_) std::exchange(on_end_, nullptr)(this);
}

}  // namespace ddprun::rdzv
