#include "rendezvous/session.h"

#include <array>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "rendezvous/frame_io.h"

namespace ddprun::rdzv {
namespace {
// How long a refused or kicked peer may take to read our Error frame and hang up.
constexpr Millis kLinger{1000};
}  // namespace

Session::Session(tcp::socket socket, std::shared_ptr<JobRegistry> registry,
                 const ServerOptions& options, std::function<void(Session*)> on_end)
    : socket_(std::move(socket)),
      registry_holder_(std::move(registry)),
      registry_(*registry_holder_),
      options_(options),
      on_end_(std::move(on_end)),
      deadline_(socket_.get_executor()),
      wake_(socket_.get_executor()) {
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
    self->close_now();
  });
}

asio::awaitable<void> Session::read_loop() {
  std::vector<uint8_t> body;
  arm_deadline(options_.handshake_timeout);
  while (open_ && !closing_) {
    Status ok = co_await read_frame(socket_, options_.limits, body);
    if (!ok) {
      spdlog::debug("rendezvous: {} disconnected: {}", peer_name_, ok.message());
      // Only a frame we refused deserves an answer; a vanished peer gets none.
      if (open_ && ok.message().rfind("bad frame header", 0) == 0) close_with_error(ok.message());
      break;
    }
    auto message = decode_client_message(body, options_.limits);
    ok = message.status();
    if (ok && !job_) {
      ok = handshake(*message);
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
  // its node's loss must reach the round at once.
  if (closing_) co_await drain();
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

Status Session::handshake(const ClientMessage& first) {
  const auto* hello = std::get_if<Hello>(&first);
  if (!hello) return Status::error(fmt::format("expected Hello, got {}", message_name(first)));
  if (hello->magic != kProtocolMagic) return Status::error("bad protocol magic");
  if (hello->version != kProtocolVersion) {
    return Status::error(fmt::format("protocol version {} is not supported (server speaks {})",
                                     hello->version, kProtocolVersion));
  }
  if (hello->job_id.empty()) return Status::error("Hello without a job id");
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
        } else if constexpr (std::is_same_v<M, KvMsg>) {
          handle_kv(std::move(m));
        }
      },
      std::move(message));
}

void Session::handle_kv(KvMsg&& kv) {
  Reply reply;
  reply.request_id = kv.request_id;
  KvStore& store = job_->kv;
  const bool one_key = kv.keys.size() == 1;
  const std::string key = one_key ? kv.keys.front() : std::string();
  switch (kv.op) {
    case KvOp::kWait:
      if (kv.keys.empty()) break;
      return start_wait(kv);
    case KvOp::kNumKeys:
      reply.integer = store.num_keys(kv.scope);
      return send(reply);
    default:
      break;
  }
  if (!one_key) {
    reply.ok = false;
    reply.error = "key-value request needs exactly one key";
    return send(reply);
  }
  switch (kv.op) {
    case KvOp::kSet:
      store.set(kv.scope, key, std::move(kv.value));
      break;
    case KvOp::kGet: {
      auto value = store.get(kv.scope, key);
      reply.found = value.has_value();
      reply.value = value.value_or("");
      break;
    }
    case KvOp::kAdd: {
      auto sum = store.add(kv.scope, key, kv.delta);
      reply.ok = sum.ok();
      reply.error = sum.error_message();
      reply.integer = sum.ok() ? *sum : 0;
      break;
    }
    case KvOp::kCompareSet:
      reply.value = store.compare_set(kv.scope, key, kv.value, std::move(kv.desired));
      break;
    case KvOp::kDelete:
      reply.integer = store.erase(kv.scope, key) ? 1 : 0;
      break;
    default:
      break;
  }
  send(reply);
}

void Session::start_wait(const KvMsg& kv) {
  const uint32_t request_id = kv.request_id;
  auto done = [this, request_id] {
    if (auto it = waits_.find(request_id); it != waits_.end()) {
      it->second.timer->cancel();
      waits_.erase(it);
    }
    Reply r;
    r.request_id = request_id;
    send(r);
  };
  const KvStore::WaitId id = job_->kv.wait(kv.scope, kv.keys, done);
  if (id == 0) return;  // already answered
  auto timer = std::make_shared<asio::steady_timer>(socket_.get_executor());
  waits_[request_id] = PendingWait{id, timer};
  timer->expires_after(Millis(kv.timeout_ms));
  timer->async_wait([weak = weak_from_this(), request_id,
                     timeout = kv.timeout_ms](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || !self->job_) return;
    auto it = self->waits_.find(request_id);
    if (it == self->waits_.end()) return;
    self->job_->kv.cancel_wait(it->second.id);
    self->waits_.erase(it);
    Reply r;
    r.request_id = request_id;
    r.ok = false;
    r.error = fmt::format("wait for keys timed out after {} ms", timeout);
    self->send(r);
  });
}

void Session::send(const ServerMessage& message) { enqueue(encode_frame(message)); }

void Session::enqueue(std::string frame) {
  if (!open_ || closing_) return;
  outbox_bytes_ += frame.size();
  if (outbox_bytes_ > options_.max_outbox_bytes) {
    spdlog::warn("rendezvous: dropping {}: it reads too slowly ({} bytes queued)", peer_name_,
                 outbox_bytes_);
    return close_now();
  }
  outbox_.push_back(std::move(frame));
  wake_.cancel();
}

asio::awaitable<void> Session::write_loop() {
  boost::system::error_code ec;
  std::vector<std::string> batch;
  std::vector<asio::const_buffer> buffers;
  while (open_) {
    if (outbox_.empty()) {
      if (closing_) break;
      wake_.expires_at(asio::steady_timer::time_point::max());
      co_await wake_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    batch.assign(std::make_move_iterator(outbox_.begin()), std::make_move_iterator(outbox_.end()));
    outbox_.clear();
    outbox_bytes_ = 0;
    buffers.clear();
    for (const auto& f : batch) buffers.push_back(asio::buffer(f));
    co_await asio::async_write(socket_, buffers, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      close_now();
      co_return;
    }
  }
  if (open_ && closing_) {
    // Flushed: half-close so the peer reads everything, then give it a moment to hang up.
    socket_.shutdown(tcp::socket::shutdown_send, ec);
  }
}

void Session::close_with_error(const std::string& why) {
  if (!open_ || closing_) return;
  send(ErrorMsg{why});
  closing_ = true;
  wake_.cancel();
  arm_deadline(kLinger);
}

void Session::close_now() {
  if (!open_) return;
  open_ = false;
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  deadline_.cancel();
  wake_.cancel();
}

void Session::finish() {
  close_now();
  if (job_) {
    for (auto& [request_id, wait] : waits_) {
      job_->kv.cancel_wait(wait.id);
      wait.timer->cancel();
    }
    waits_.clear();
    JobRegistry::Job* job = std::exchange(job_, nullptr);
    registry_.close_connection(*job, *this, node_id_);
  }
  if (on_end_) std::exchange(on_end_, nullptr)(this);
}

}  // namespace ddprun::rdzv
