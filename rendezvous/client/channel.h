// The transport under the rendezvous client: one reconnecting request/reply channel to a
// rendezvous server. It knows frames, request ids and liveness, not rounds or jobs.
//
//   connect()   deadline + backoff + jitter, then the Hello handshake (connector.h)
//   request()   sends a request; its Reply (matched by id) or an error comes back, never both;
//               a request the server does not answer within request_timeout fails
//   heartbeats  every keep_alive_interval; a server silent for heartbeat_timeout is lost
//   reconnect   on a lost connection the owner is asked for the request that re-attaches it
//               (a Resume); the channel reconnects within heartbeat_timeout, sends that
//               request, then every request still unanswered (same ids: the server answers a
//               request it already did from its log instead of doing it twice), then what was
//               queued meanwhile. Without a resume request and with nothing unanswered, or
//               when the resume fails, the channel gives up and tells the owner once.
//   gone server a connection the server's side closed (EOF, reset) whose reconnect the
//               server's kernel refuses (ECONNREFUSED: nothing listens there) means that the
//               server's process is gone, not a partition: with give_up_when_gone set and a
//               single address, the channel gives up at once instead of retrying for
//               heartbeat_timeout. A silent server or a connect that times out (a partition, a
//               stopped host) keeps the window.
//   pushes      every other message the server sends goes to the owner's on_message hook;
//               the channel counts pushes (messages.h, is_push) and acknowledges the count
//               in each heartbeat, and the owner puts it in its resume request, so that the
//               server replays exactly what a cut lost (protocol.md, "Delivery across
//               reconnects")
//
// Threading: lives on one io_context run by one thread; call every method on that thread.
// Callbacks run on that thread, never inline from the call that started them, and never after
// abort() (or close() completing). A callback that throws is logged, never propagated.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>  // before Boost 1.74's awaitable.hpp (see frame_io.h)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "rendezvous/client/connector.h"
#include "rendezvous/conf/rdzv_conf.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/frame_writer.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

// Where the server is and how patient to be with it.
struct ClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 29400;
  // More addresses of the same rendezvous (ddp-rendezvous replicas sharing their state in
  // etcd): host:port and these are tried in turn, on the first connect and on every reconnect
  // (starting after the server just lost), and a Redirect is followed. Default none.
  std::vector<ServerAddress> more_servers;
  // The job (torchrun's --rdzv_id) this connection belongs to, sent in Hello.
  std::string job_id;
  // Source address to bind ("" = any); tests give each node its own 127.0.0.N.
  std::string local_address;
  // The first connect() gives up after this. Default 600 s (join_timeout).
  Millis connect_timeout{600'000};
  // One connection attempt (connect + handshake). Default 10 s.
  Millis attempt_timeout{10'000};
  // Backoff between attempts: doubles from initial to max, scaled by ±jitter.
  Millis initial_backoff{100};
  Millis max_backoff{3'000};
  double jitter = 0.5;
  // Heartbeat period. Default 5 s (torchrun's keep_alive_interval).
  Millis keep_alive_interval{5'000};
  // A server silent this long is lost; also the window to reconnect and keep membership.
  // Default 15 s (keep_alive_interval × keep_alive_max_attempt).
  Millis heartbeat_timeout{15'000};
  // A request the server has not answered within this fails with an error naming it, even
  // while the connection stays alive (a stuck server still answering heartbeats). Default
  // 60 s (torchrun's read_timeout).
  Millis request_timeout{60'000};
  CodecLimits limits;
  // Token and TLS (security/credentials.h); null = neither.
  std::shared_ptr<const ClientCredentials> credentials;

  // Timeouts from --rdzv_conf: connect_timeout = join_timeout, attempt_timeout =
  // min(read_timeout, 10 s), request_timeout = read_timeout, keep_alive_interval,
  // heartbeat_timeout.
  static ClientOptions from_conf(const RendezvousConf& conf, std::string host, uint16_t port,
                                 std::string job_id);
};

class Channel : public std::enable_shared_from_this<Channel> {
 public:
  using ReplyHandler = std::function<void(const Reply&)>;
  struct Hooks {
    // Every message that is not a Reply or an acknowledgement: pushes and Error frames.
    std::function<void(ServerMessage&&)> on_message;
    // The connection was lost: the request that re-attaches this client, built with `id` and
    // the count of pushes received so far (sent first on the next connection), or nullopt
    // when there is no membership to keep (then the channel reconnects only to send requests
    // still unanswered, and otherwise gives up at once).
    std::function<std::optional<ClientMessage>(uint32_t id, uint64_t pushes_received)>
        resume_request;
    // The channel gave up (could not reconnect within heartbeat_timeout, or the server
    // refused to resume). `why` starts with "lost the rendezvous server at <host:port>".
    std::function<void(const std::string& why)> on_lost;
  };

  // `clock` (which must outlive the channel) times the server's silence and the connect
  // deadline, as the server's Clock does on its side.
  static std::shared_ptr<Channel> create(boost::asio::io_context& io, ClientOptions options,
                                         Hooks hooks, const Clock& clock = SystemClock::instance());
  Channel(boost::asio::io_context& io, ClientOptions options, Hooks hooks,
          const Clock& clock);  // use create()

  // Connects with deadline, backoff and jitter and does the handshake. Once only.
  void connect(std::function<void(Status)> done);
  uint32_t next_request_id() {
    if (next_request_ == 0) ++next_request_;  // 0 means "none"
    return next_request_++;
  }
  // Sends `message`, whose request id is `id`. `on_reply` gets the server's Reply, or a failed
  // Reply when the request cannot be sent, the channel gives up before the answer, or no
  // answer comes within request_timeout + `extra_time`. A connection lost before the answer
  // is not an error: the request is sent again after the reconnect. While reconnecting, the
  // request waits behind the resume request.
  void request(const ClientMessage& message, uint32_t id, ReplyHandler on_reply,
               Millis extra_time = Millis(0));
  // Sends a message that gets no reply (Progress). Dropped when not connected or reconnecting.
  void send(const ClientMessage& message);
  // From now on a lost connection is expected (the job is over): it is logged quietly.
  void expect_close() { quiet_ = true; }
  // See "gone server" above. The rendezvous client sets it while the last round named a
  // successor to move to (client.cc); off by default (a restarted ddp-rendezvous comes back
  // at the same address, and the window lets its nodes wait for it).
  void set_give_up_when_gone(bool on) { give_up_when_gone_ = on; }
  // Sends the request `farewell` builds (a Leave) when connected, then closes once it is
  // answered or after attempt_timeout, and calls `done`. Idempotent.
  void close(const std::function<ClientMessage(uint32_t id)>& farewell, std::function<void()> done);
  // Closes at once; no callback runs afterwards.
  void abort();

  bool connected() const { return state_ == State::kConnected; }
  // How long the server had been silent when the connection was last lost: beyond
  // heartbeat_timeout, this node was cut off (stopped, partitioned) and the server has dropped
  // it, rather than the server having gone away under a node in good standing.
  Millis silence_at_loss() const { return silence_at_loss_; }
  const ClientOptions& options() const { return options_; }

  // Runs `fn` later on the io_context unless the channel has closed by then; never throws.
  template <class F>
  void deliver(F fn) {
    boost::asio::post(executor_, [self = shared_from_this(), fn = std::move(fn)]() mutable {
      if (self->state_ == State::kClosed) return;
      self->guarded(fn);
    });
  }

 private:
  enum class State { kIdle, kConnecting, kConnected, kReconnecting, kLost, kClosed };
  struct PendingRequest {
    ReplyHandler on_reply;
    std::string frame;  // sent again on the next connection if this one is lost first
    // Destroyed (so cancelled) with the entry, when the answer comes or the connection dies.
    std::unique_ptr<boost::asio::steady_timer> deadline;
  };

  // Every address, starting with the one after `current_` when `after_current`.
  ConnectOptions connect_options(Millis deadline, bool after_current) const;
  std::string server_name() const { return to_string(current_); }
  void start_connection(Stream stream);
  boost::asio::awaitable<void> read_loop(uint64_t generation);
  boost::asio::awaitable<void> write_loop(uint64_t generation);
  boost::asio::awaitable<void> reconnect(std::optional<ClientMessage> resume, uint32_t resume_id);
  void tick(uint64_t generation);
  void on_frame(ServerMessage&& message);
  // `peer_closed`: the server's side ended the connection (a read saw EOF or a reset).
  void on_connection_lost(const std::string& why, bool peer_closed = false);
  void give_up(const std::string& why);
  void drop_socket();
  void fail_all_requests(const std::string& why);
  // Registers the handler of request `id` (encoded as `frame`) and arms its deadline.
  void track(uint32_t id, std::string what, std::string frame, ReplyHandler on_reply,
             Millis timeout);
  void fail_request(uint32_t id, const std::string& why);
  void guarded(const std::function<void()>& fn) const;

  boost::asio::any_io_executor executor_;
  const ClientOptions options_;
  const Clock& clock_;
  const std::vector<ServerAddress> servers_;  // host:port, then more_servers
  ServerAddress current_;                     // the server connected last (or the first)
  Hooks hooks_;
  std::mt19937_64 rng_;
  std::shared_ptr<bool> stop_ = std::make_shared<bool>(false);  // ends connect retries
  State state_ = State::kIdle;
  std::shared_ptr<Stream> socket_;  // shared with the connection's read and write loops
  uint64_t generation_ = 0;         // connection generation: coroutines of an older one do nothing
  SteadyTime last_rx_;
  Millis silence_at_loss_{0};         // see silence_at_loss()
  boost::asio::steady_timer ticker_;  // heartbeats, and the silence check
  boost::asio::steady_timer close_timer_;
  FrameWriter writer_;
  std::unordered_map<uint32_t, PendingRequest> requests_;
  uint32_t next_request_ = 1;     // the constructor starts it at a random id
  uint32_t pending_resume_ = 0;   // id of the resume request of the current reconnect
  uint64_t pushes_received_ = 0;  // acknowledged in heartbeats, named in resume requests
  bool closing_ = false;
  bool quiet_ = false;
  bool give_up_when_gone_ = false;  // set_give_up_when_gone()
  bool peer_closed_ = false;        // the last loss was the server's side closing (see there)
};

}  // namespace ddprun::rdzv
