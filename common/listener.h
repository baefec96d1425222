// One way to serve a TCP socket, for every server of the project (the rendezvous server, the
// agent's store, the metrics endpoint): resolve and bind (or adopt a bound socket), accept with
// close-on-exec, limits on open connections in total and per source address with counts and
// throttled log lines, shedding instead of spinning when the process is out of descriptors,
// the registry of open connections, and a two-stage shutdown. What a connection does is the
// server's: it implements ServedConnection.
//
//   Listener listener(io, {.name = "store", .max_connections = 1024});
//   listener.listen("127.0.0.1", 0, [&](Listener::Accepted a) {
//     return std::make_shared<MyConnection>(std::move(a.socket), std::move(a.ended));
//   });
//   ...
//   listener.shutdown([] { /* every connection has ended */ });
//
// Out of descriptors (EMFILE/ENFILE), accept would fail at once for as long as the backlog
// holds connections, and a loop that retries spins a core. The listener keeps one spare
// descriptor: it gives it up to accept the oldest waiting connection, lets the server say
// goodbye (best effort), closes it, takes the spare back, then rests kDescriptorPause before
// the next accept, so the connections it serves keep their share of the one thread.
//
// Not thread-safe: use on the io_context's thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange without it
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/clock.h"
#include "common/log_coroutine_end.h"
#include "common/log_throttle.h"
#include "common/posix_fd.h"
#include "common/result.h"

namespace ddprun {

// A connection as its server serves it. The server calls Accepted::ended exactly once, when
// the connection has ended (its socket closed, nothing of it left running).
class ServedConnection {
 public:
  virtual ~ServedConnection() = default;
  virtual void start() = 0;
  // Stage one of a shutdown: finish or refuse what is in flight, tell the peer if the protocol
  // can, and close.
  virtual void close_gracefully(const std::string& reason) = 0;
  // Stage two, and close(): close now.
  virtual void close_now() = 0;
};

// Why a connection was not served.
enum class Refusal : uint8_t {
  kConnections,           // max_connections open
  kConnectionsPerSource,  // max_connections_per_source open from its address
  kDescriptors,           // the process is out of file descriptors
};
inline constexpr size_t kRefusalKinds = 3;
const char* to_string(Refusal refusal);

struct ListenerOptions {
  std::string name = "server";  // starts every log line and error ("store", ...)
  int backlog = 4096;
  // Listening sockets on the one port (SO_REUSEPORT; listen() only, an adopted socket is one):
  // the kernel spreads new connections over their accept queues, each `backlog` deep. For a
  // server a whole job connects to at once: a full queue makes the kernel drop handshakes,
  // which clients retry only after a second or more. Sockets that can share the port must
  // belong to this process's user (Linux's rule for SO_REUSEPORT).
  size_t acceptors = 1;
  size_t max_connections = 65'536;
  size_t max_connections_per_source = SIZE_MAX;
  // A connection over a limit is still handed to the server, with Accepted::refusal set, so it
  // can tell the peer why (the rendezvous server's Error frame), while fewer than
  // max_connections + refusal_slack are open; past that, and always when the slack is 0, it
  // is closed unanswered.
  size_t refusal_slack = 0;
  // How long stage one of shutdown() lasts before the rest are closed.
  Millis shutdown_grace{2'000};
  // Options every accepted socket should carry, set once on the listening sockets: Linux
  // copies them into each socket it accepts, which saves two system calls per connection (a
  // job's ranks all connect at once). TCP_NODELAY for small latency-bound replies; SO_KEEPALIVE
  // so that a peer whose host vanished does not hold its connection forever.
  bool accepted_no_delay = false;
  bool accepted_keep_alive = false;
};

struct ListenerCounters {
  uint64_t accepted = 0;                          // served (not refused)
  std::array<uint64_t, kRefusalKinds> refused{};  // by Refusal
  uint64_t accept_errors = 0;                     // other accept failures (logged)
  // Accepts that failed for lack of descriptors, whether or not a connection waited to be
  // shed; each is followed by a rest of Listener::kDescriptorPause on its socket, so a
  // listener tries at most (wall time / the pause + 1) times per accepting socket.
  uint64_t out_of_descriptor_accepts = 0;
  uint64_t refused_total() const { return refused[0] + refused[1] + refused[2]; }
};

class Listener {
 public:
  struct Accepted {
    boost::asio::ip::tcp::socket socket;  // close-on-exec already (accept4's SOCK_CLOEXEC)
    boost::asio::ip::address source;
    std::optional<Refusal> refusal;  // set: tell the peer why if the protocol can, then end
    std::function<void()> ended;     // call once when the connection has ended
  };
  // Makes the server's connection for an accepted socket; the listener starts it.
  using MakeConnection = std::function<std::shared_ptr<ServedConnection>(Accepted)>;
  // Writes a short goodbye on a connection shed for lack of descriptors, just before it is
  // closed (non-blocking, best effort). Optional.
  using Goodbye = std::function<void(boost::asio::ip::tcp::socket&)>;

  // How long an accepting socket rests after an accept failed for lack of descriptors.
  static constexpr Millis kDescriptorPause{50};

  Listener(boost::asio::io_context& io, ListenerOptions options,
           const Clock& clock = SystemClock::instance());
  // Closes the acceptor and every connection at once.
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds `address` (an IP literal or a host name: its first address, never a wildcard unless
  // asked for) and starts accepting. Port 0 picks a free port. Errors name the step.
  Status listen(const std::string& address, uint16_t port, MakeConnection make,
                Goodbye goodbye = {});
  // Adopts a bound (not yet listening) TCP socket, e.g. one held since the port was offered.
  Status adopt(UniqueFd bound_socket, MakeConnection make, Goodbye goodbye = {});

  // The bound port; 0 before listening.
  uint16_t port() const { return port_; }
  bool listening() const { return acceptor_.is_open(); }
  size_t connections() const { return connections_.size(); }
  const ListenerCounters& counters() const { return counters_; }
  // Calls `f` with each open connection (a copy of the registry: `f` may close them).
  void for_each_connection(const std::function<void(ServedConnection&)>& f) const;

  // Stops accepting and closes every connection now (one stage).
  void close();
  // Two stages: stop accepting and close_gracefully(reason) each connection; after
  // shutdown_grace, close_now() the rest. `done` runs (posted) once every connection has
  // ended; a second call while stopping runs its `done` at once.
  void shutdown(const std::string& reason, std::function<void()> done = {});
  bool stopping() const { return stopping_; }

 private:
  Status start(const char* what, MakeConnection make, Goodbye goodbye);
  // `alive` is alive_, copied when the loop is spawned (a parameter, so into the coroutine's
  // frame): its body first runs later, on the io_context, when the Listener may be gone.
  boost::asio::awaitable<void> accept_loop(boost::asio::ip::tcp::acceptor& acceptor,
                                           std::shared_ptr<bool> alive);
  Status open_siblings(const boost::asio::ip::tcp::endpoint& endpoint);
  void close_acceptors();
  // Takes one connection from `acceptor`'s backlog with accept4 (close-on-exec, and the peer's
  // address from the accept itself: no fcntl or getpeername per connection). ec: would_block
  // when the backlog is empty.
  std::optional<std::pair<boost::asio::ip::tcp::socket, boost::asio::ip::address>> accept_one(
      boost::asio::ip::tcp::acceptor& acceptor, boost::system::error_code& ec);
  void admit(boost::asio::ip::tcp::socket socket, const boost::asio::ip::address& source);
  void shed_one_connection(boost::asio::ip::tcp::acceptor& acceptor);
  void on_ended(ServedConnection* connection, const boost::asio::ip::address& source);
  void maybe_finish_shutdown();
  void log_refusal(Refusal refusal, const std::string& detail);

  boost::asio::io_context& io_;
  const ListenerOptions options_;
  const Clock& clock_;
  boost::asio::ip::tcp::acceptor acceptor_;
  // ListenerOptions::acceptors - 1 more sockets on acceptor_'s port (SO_REUSEPORT).
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> siblings_;
  boost::asio::steady_timer grace_timer_;
  MakeConnection make_;
  Goodbye goodbye_;
  std::unordered_map<ServedConnection*, std::shared_ptr<ServedConnection>> connections_;
  std::map<boost::asio::ip::address, size_t> per_source_;
  ListenerCounters counters_;
  LogThrottle refusal_log_{20, Millis(10'000)};
  UniqueFd spare_fd_;
  uint16_t port_ = 0;
  bool stopping_ = false;
  std::function<void()> shutdown_done_;
  // Set while the listener lives: connections may end (and call back) after it is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ddprun
