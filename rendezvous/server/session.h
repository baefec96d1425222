// One client connection on the server: one reader coroutine, one writer coroutine, a deadline
// on every read.
//
// The opening: the TLS handshake (when the server has TLS), then Hello and, for a job with a
// token, the challenge-response (server_handshake.h); a refusal is an Error frame, counted
// and logged (rate-limited), and no other connection waits on it.
//
// Deadlines: handshake_timeout until the opening is done, then idle_timeout, then (once the
// connection carries a member) the job's heartbeat_timeout. A frame that is malformed, oversized or
// of the wrong kind ends the connection with an Error frame; no other connection notices.
//
// A connection whose first frame is a StatusQuery (instead of Hello) gets, once authenticated
// like a Hello (server_handshake.h), one StatusReport of every job (or, when it names a host to
// release, one Reply) and is closed: it never belongs to a job.
//
// Lifetime: owned by shared_ptr; both coroutines hold one. When the reader ends the session
// leaves the registry and calls `on_end` (the server forgets it).
// Thread-safety: none; runs on the server's io_context.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>  // before Boost 1.74's awaitable.hpp (see frame_io.h)
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/listener.h"
#include "rendezvous/server/job_registry.h"
#include "rendezvous/server/server_counters.h"
#include "rendezvous/server/server_handshake.h"
#include "rendezvous/server/server_options.h"
#include "rendezvous/wire/frame_writer.h"
#include "rendezvous/wire/stream.h"

namespace ddprun::rdzv {

class Session final : public Peer,
                      public ServedConnection,
                      public std::enable_shared_from_this<Session> {
 public:
  // The session shares the registry so that it can leave it cleanly even when it ends after
  // the server object is gone.
  // `redirect` is the server's (RendezvousServer::redirect_clients): while it holds a
  // Redirect, a Hello or a StatusQuery is answered with it and the connection closed.
  Session(boost::asio::ip::tcp::socket socket, std::shared_ptr<JobRegistry> registry,
          const ServerOptions& options, std::shared_ptr<ServerCounters> counters,
          std::shared_ptr<const std::optional<Redirect>> redirect, std::function<void()> on_end);
  ~Session() override;

  void start() override;
  // Starts a connection that a limit refused (counted and logged by the listener): it gets the
  // Error frame `why` (after the TLS handshake, so that a TLS client can read it) and is closed.
  void start_refusing(std::string why);
  const boost::asio::ip::address& source() const { return source_; }
  // Peer: queue a frame; a reader that falls max_outbox_bytes behind is disconnected.
  void send(const ServerMessage& message) override;
  void kick(const std::string& why) override { close_with_error(why); }
  std::string address() const override { return peer_name_; }
  std::optional<SteadyTime> last_heard() const override { return last_heard_; }
  // Shutdown stage one: say why, flush, then close.
  void close_with_error(const std::string& why);
  void close_gracefully(const std::string& why) override { close_with_error(why); }
  // The same with another last frame (a Redirect).
  void close_with(const ServerMessage& last);
  // Shutdown stage two: close now.
  void close_now() override;

 private:
  boost::asio::awaitable<void> read_loop();
  boost::asio::awaitable<void> write_loop();
  boost::asio::awaitable<void> drain();
  boost::asio::awaitable<bool> open_tls();
  boost::asio::awaitable<bool> speaks_tls();
  Status handshake(const ClientMessage& frame);
  void answer_status();
  void answer_release();
  void count_in(const ClientMessage& message, size_t body_bytes);
  void close_after_flush();
  // A limit refuses the request or connection: count, log (rate-limited) and say why.
  void refuse(Limit limit, const std::string& why);
  void log_refusal(const std::string& why);
  bool join_within_limits(const JoinMsg& join);
  void handle(ClientMessage&& message);
  void arm_deadline(Millis timeout);
  void finish();

  Stream stream_;
  std::shared_ptr<JobRegistry> registry_holder_;
  JobRegistry& registry_;
  const ServerOptions options_;
  std::shared_ptr<ServerCounters> counters_;  // shared with the server; outlives either
  std::shared_ptr<const std::optional<Redirect>> redirect_;  // the server's; see the constructor
  std::function<void()> on_end_;
  std::string peer_name_;  // "ip:port" for logs
  boost::asio::ip::address source_;
  ServerHandshake handshake_;
  std::optional<std::string> refusal_;  // start_refusing()
  std::string release_host_;            // a status query's StatusQuery::release_host

  JobRegistry::Job* job_ = nullptr;       // set by Hello; valid until finish()
  std::string node_id_;                   // the node this connection carries, if any
  Millis member_timeout_{0};              // the job's heartbeat_timeout once joined
  std::optional<SteadyTime> last_heard_;  // when the last whole frame arrived

  boost::asio::steady_timer deadline_;  // closes the stream when a read stalls
  FrameWriter writer_;                  // bounded by max_outbox_bytes: a slow reader is dropped
  bool closing_ = false;                // no more frames accepted; the writer closes after flushing
  bool open_ = true;
};

}  // namespace ddprun::rdzv
