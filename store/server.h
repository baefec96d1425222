// The job's store: a server that c10d's TCPStore clients (torch 1.13 and 2.x, Python and
// LibTorch) connect to when the launcher sets TORCHELASTIC_USE_AGENT_STORE=True. The agent
// hosts one per round on its own loop; it outlives every worker. Protocol: protocol.md.
//
// Usage (on the agent's io_context thread):
//   StoreServer store(io, {});
//   if (Status s = store.adopt(std::move(reserved_socket)); !s) ...;  // or listen(addr, 0)
//   ... workers connect to MASTER_ADDR:store.port() ...
//   store.close();
//
// Threading: one io_context, run by exactly one thread; every method must be called on that
// thread (or before it runs). Nothing here blocks the loop: each connection is a chain of read
// handlers whose replies go out by non-blocking sends, waits are callbacks, no call does
// blocking I/O (listen() may resolve a host name).
// Sockets are close-on-exec (workers the agent forks never inherit them) with TCP_NODELAY.
// Accepting, limits and running out of descriptors are the common Listener's (common/listener.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "common/listener.h"
#include "common/posix_fd.h"
#include "common/result.h"
#include "store/server_options.h"

namespace ddprun::store {

namespace detail {
class Connection;  // NOLINT(bugprone-forward-declaration-namespace): store/connection.h
struct SharedState;
}  // namespace detail

class StoreServer {
 public:
  StoreServer(boost::asio::io_context& io, StoreServerOptions options);
  // close(), then forgets the data.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // Binds `address` (an IP literal or a host name; the first address it resolves to) and
  // `port` (0 picks a free one) with SO_REUSEADDR, and starts accepting. Errors name the
  // address and the failing step. Once only, and not after adopt().
  Status listen(const std::string& address, uint16_t port);
  // Starts accepting on `bound_socket`: a TCP socket already bound (e.g. the agent's port
  // reservation) and not listening yet. Takes ownership; on error the socket is closed.
  Status adopt(UniqueFd bound_socket);
  // The port clients connect to; 0 before listen()/adopt() succeeded.
  uint16_t port() const { return listener_.port(); }

  // Stops accepting and closes every connection now (pending waits are dropped, clients see
  // the connection end). The data stays readable through stats() until destruction.
  // Idempotent.
  void close();

  // Operations by type, connections, keys, bytes, refusals (see StoreStats).
  StoreStats stats() const;

 private:
  // Makes the connection for a socket the listener accepted.
  std::shared_ptr<ServedConnection> make_connection(Listener::Accepted accepted);

  std::shared_ptr<detail::SharedState> state_;  // shared with connections
  Listener listener_;
};

}  // namespace ddprun::store
