#include "rendezvous/server/session.h"

#include <array>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "rendezvous/server/status_report.h"
#include "rendezvous/wire/frame_io.h"

namespace ddprun::rdzv {
namespace {
// How long a refused or kicked peer may take to read our Error frame and hang up.
constexpr Millis kLinger{1000};
}  // namespace

namespace {
Stream make_stream(tcp::socket socket, const ServerOptions& options) {
  if (options.credentials && options.credentials->has_tls()) {
    return Stream(std::move(socket), options.credentials->tls());
  }
  return Stream(std::move(socket));
}

std::string describe(const boost::system::error_code& ec, const tcp::endpoint& ep) {
  return ec ? "unknown peer" : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}
}  // namespace

Session::Session(tcp::socket socket, std::shared_ptr<JobRegistry> registry,
                 const ServerOptions& options, std::shared_ptr<ServerCounters> counters,
                 std::shared_ptr<const std::optional<Redirect>> redirect,
                 std::function<void()> on_end)
    : stream_(make_stream(std::move(socket), options)),
      registry_holder_(std::move(registry)),
      registry_(*registry_holder_),
      options_(options),
      counters_(std::move(counters)),
      redirect_(std::move(redirect)),
      on_end_(std::move(on_end)),
      handshake_(options.credentials, ""),
      deadline_(stream_.tcp().get_executor()),
      writer_(stream_.tcp().get_executor(), options.max_outbox_bytes) {
  boost::system::error_code ec;
  const auto ep = stream_.tcp().remote_endpoint(ec);
  peer_name_ = describe(ec, ep);
  if (!ec) source_ = ep.address();
  handshake_ = ServerHandshake(options.credentials, peer_name_);
}

Session::~Session() = default;

void Session::start() {
  configure_socket(stream_.tcp());
  auto self = shared_from_this();
  const auto ex = stream_.tcp().get_executor();
  asio::co_spawn(
      ex, [self] { return self->read_loop(); }, LogCoroutineEnd{"rendezvous session reader"});
  asio::co_spawn(
      ex, [self] { return self->write_loop(); }, LogCoroutineEnd{"rendezvous session writer"});
}

void Session::start_refusing(std::string why) {
  refusal_.emplace(std::move(why));
  start();
}

void Session::log_refusal(const std::string& why) {
  uint64_t held_back = 0;
  if (!counters_->refusal_log.allow(registry_.clock().steady_now(), held_back)) return;
  if (held_back > 0) {
    spdlog::warn("rendezvous: {} ({} similar refusals not logged)", why, held_back);
  } else {
    spdlog::warn("rendezvous: {}", why);
  }
}

void Session::refuse(Limit limit, const std::string& why) {
  counters_->count_limit(limit);
  log_refusal(fmt::format("refused {}: {}", peer_name_, why));
  close_with_error(why);
}

// The TLS handshake, under the handshake deadline. False: it failed (counted and logged as an
// authentication failure: the peer has no or a bad certificate, or does not speak TLS).
asio::awaitable<bool> Session::open_tls() {
  if (!stream_.is_tls()) co_return true;
  if (!co_await speaks_tls()) co_return false;
  Status tls = co_await stream_.handshake(Stream::Role::kServer);
  if (tls) co_return true;
  if (open_) {  // not the deadline closing a silent peer (counted as such)
    ++counters_->rejected_auth;
    log_refusal(fmt::format("authentication failed from {} (before it named a job): {}", peer_name_,
                            tls.message()));
  }
  co_return false;
}

// A client speaking plain TCP to a TLS server opens with a frame, whose first byte is the high
// byte of its length, where TLS opens with a handshake record (0x16). It is told in its own
// language, so that its agent can say what to fix instead of retrying a closed connection.
asio::awaitable<bool> Session::speaks_tls() {
  constexpr uint8_t kTlsHandshakeRecord = 0x16;
  uint8_t first = 0;
  boost::system::error_code ec;
  co_await stream_.tcp().async_receive(asio::buffer(&first, 1), tcp::socket::message_peek,
                                       asio::redirect_error(asio::use_awaitable, ec));
  if (ec || first == kTlsHandshakeRecord) co_return !ec;
  const std::string why = fmt::format(
      "authentication failed from {}: this rendezvous server requires TLS and the client "
      "speaks plain TCP (give the agent --rdzv_conf tls_ca_file=...)",
      peer_name_);
  ++counters_->rejected_auth;
  log_refusal(why);
  const std::string frame = encode_frame(ServerMessage(ErrorMsg{why}));
  co_await asio::async_write(stream_.tcp(), asio::buffer(frame),
                             asio::redirect_error(asio::use_awaitable, ec));
  // Read what it sent until it hangs up (or the deadline): closing with unread input would
  // reset the connection and could destroy the Error before it is read.
  stream_.tcp().shutdown(tcp::socket::shutdown_send, ec);
  std::array<uint8_t, 512> scratch{};
  while (!ec && open_) {
    co_await stream_.tcp().async_read_some(asio::buffer(scratch),
                                           asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return false;
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
  if (!co_await open_tls()) {
    finish();
    co_return;
  }
  if (refusal_) close_with_error(*refusal_);
  while (open_ && !closing_) {
    Status ok = co_await read_frame(stream_, options_.limits, body);
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
      ok = handshake(*message);
      if (!ok) ++counters_->rejected_handshake;
    } else if (ok && writer_.queued_frames() >= options_.max_requests_in_flight) {
      refuse(Limit::kRequestsInFlight,
             fmt::format("too many requests in flight: {} answers queued that this connection "
                         "has not read (max_requests_in_flight)",
                         writer_.queued_frames()));
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
  if (closing_ && !peer_gone) {
    co_await drain();
  }
  finish();
}

// After we refused a peer, its bytes are read and discarded until it hangs up or the linger
// deadline closes the socket: closing with unread input would reset the connection and could
// destroy the Error frame before the peer reads it.
asio::awaitable<void> Session::drain() {
  std::array<uint8_t, 4096> scratch{};
  boost::system::error_code ec;
  while (open_) {
    co_await stream_.read_some(asio::buffer(scratch), ec);
    if (ec) break;
  }
}

void Session::count_in(const ClientMessage& message, size_t body_bytes) {
  ++counters_->messages_in[message.index()];
  counters_->bytes_in += kFrameHeaderBytes + body_bytes;
  last_heard_ = registry_.clock().steady_now();
}

// A status query that passed the handshake: one report of every job, then close; or, when it
// asks to release a host, the answer to that.
void Session::answer_status() {
  if (!release_host_.empty()) return answer_release();
  send(build_status_report(registry_.views(), registry_.clock().steady_now(),
                           options_.limits.max_frame_bytes, registry_.excluded_hosts()));
  close_after_flush();
}

void Session::answer_release() {
  Reply answer;
  answer.ok = registry_.release_host(release_host_);
  if (answer.ok) {
    spdlog::info("rendezvous: {} released host {}", peer_name_, release_host_);
  } else {
    answer.error = fmt::format(
        "host {} is not kept out of this server's jobs: nothing to release (`ddp-rendezvous "
        "status` lists the hosts kept out)",
        release_host_);
  }
  send(answer);
  close_after_flush();
}

Status Session::handshake(const ClientMessage& frame) {
  if (const auto* query = std::get_if<StatusQuery>(&frame)) release_host_ = query->release_host;
  const bool opening =
      std::holds_alternative<Hello>(frame) || std::holds_alternative<StatusQuery>(frame);
  if (*redirect_ && opening && !handshake_.awaiting_proof()) {
    // A replica that does not lead: before the token's challenge, since the leader proves the
    // token itself (protocol.md, "Replicas"). A status query is told where the leader is too:
    // this replica's jobs are not the cluster's.
    close_with(**redirect_);
    return Status();
  }
  ServerHandshake::Step step = handshake_.on_frame(frame);
  if (step.challenge) {
    send(*step.challenge);
    return Status();
  }
  if (step.authentication_failed) {
    ++counters_->rejected_auth;
    log_refusal(step.refusal.message());
    close_with_error(step.refusal.message());
    return Status();  // answered and closing; not a malformed frame
  }
  if (!step.refusal) return step.refusal;
  if (step.accepted_status_query) {
    answer_status();
    return Status();
  }
  const std::string& job_id = step.accepted_job;
  if (!registry_.has_job(job_id) && registry_.job_count() >= options_.max_jobs) {
    refuse(Limit::kJobs,
           fmt::format("too many jobs: this server already serves {} (max_jobs); job {} is "
                       "refused",
                       registry_.job_count(), job_id));
    return Status();
  }
  job_ = &registry_.open_connection(job_id);
  send(HelloAck{});
  return Status();
}

bool Session::join_within_limits(const JoinMsg& join) {
  const uint32_t limit = options_.max_nodes_per_job;
  std::string why;
  if (join.job.max_nodes > limit) {
    why = fmt::format(
        "join asks for up to {} nodes; this server allows {} per job "
        "(max_nodes_per_job)",
        join.job.max_nodes, limit);
  } else if (job_->links.size() >= limit && !job_->links.contains(join.node.node_id)) {
    why = fmt::format("job {} already has {} nodes (max_nodes_per_job)", job_->id, limit);
  }
  if (why.empty()) return true;
  counters_->count_limit(Limit::kNodesPerJob);
  log_refusal(fmt::format("refused a join from {}: {}", peer_name_, why));
  Reply refused;
  refused.request_id = join.request_id;
  refused.ok = false;
  refused.error = why;
  send(refused);
  return false;
}

void Session::handle(ClientMessage&& message) {
  std::visit(
      [&](auto&& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Hello>) {
          close_with_error("a second Hello on one connection");
        } else if constexpr (std::is_same_v<M, StatusQuery>) {
          close_with_error("a status query must be a connection's first frame");
        } else if constexpr (std::is_same_v<M, AuthProofMsg>) {
          close_with_error("AuthProof outside the handshake");
        } else if constexpr (std::is_same_v<M, JoinMsg>) {
          if (join_within_limits(m)) registry_.join(*job_, *this, m, node_id_);
        } else if constexpr (std::is_same_v<M, ResumeMsg>) {
          registry_.resume(*job_, *this, m, node_id_);
        } else if constexpr (std::is_same_v<M, HeartbeatMsg>) {
          if (Status ok = registry_.acknowledge(*job_, node_id_, m.pushes_received); !ok) {
            close_with_error(ok.message());
          } else {
            send(HeartbeatAck{});
          }
        } else if constexpr (std::is_same_v<M, ReportFailureMsg>) {
          registry_.report_failure(*job_, *this, m, node_id_);
        } else if constexpr (std::is_same_v<M, ReportSuccessMsg>) {
          registry_.report_success(*job_, *this, m, node_id_);
        } else if constexpr (std::is_same_v<M, LeaveMsg>) {
          registry_.leave(*job_, *this, m, node_id_);
        } else if constexpr (std::is_same_v<M, ProgressMsg>) {
          registry_.progress(*job_, *this, m, node_id_);
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
  Status written = co_await writer_.run(stream_, [this] { return open_; });
  if (!written) {
    close_now();
  } else if (open_ && closing_) {
    // Flushed: half-close so the peer reads everything, then give it a moment to hang up.
    stream_.shutdown_send();
  }
}

void Session::close_with_error(const std::string& why) { close_with(ErrorMsg{why}); }

void Session::close_with(const ServerMessage& last) {
  if (!open_ || closing_) return;
  send(last);
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
  stream_.close();
  deadline_.cancel();
  writer_.wake();
}

void Session::finish() {
  close_now();
  if (job_) {
    JobRegistry::Job* job = std::exchange(job_, nullptr);
    registry_.close_connection(*job, *this, node_id_);
  }
  if (on_end_) std::exchange(on_end_, nullptr)();
}

}  // namespace ddprun::rdzv
