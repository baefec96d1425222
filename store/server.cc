#include "store/server.h"

#include <sys/socket.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/tcp_listener.h"
#include "store/connection.h"

namespace ddprun::store {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// Workers are forked by the agent on this same thread, so setting close-on-exec right after
// the socket is made leaves no window in which a fork could inherit it.
void configure_accepted(tcp::socket& socket) {
  set_cloexec(socket.native_handle());
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // replies are small and latency-bound
  // A client whose host vanished would otherwise hold its connection (and wait) forever.
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
}

}  // namespace

StoreServer::StoreServer(asio::io_context& io, StoreServerOptions options)
    : io_(io), state_(std::make_shared<detail::SharedState>(options)), acceptor_(io) {}

StoreServer::~StoreServer() {
  *alive_ = false;
  close();
}

Status StoreServer::listen(const std::string& address, uint16_t port) {
  if (acceptor_.is_open()) return Status::invalid_argument("store server: already listening");
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  auto results = resolver.resolve(address, std::to_string(port), ec);
  if (ec || results.empty()) {
    return Status::invalid_argument(fmt::format("store server: cannot resolve '{}': {}", address,
                                                ec ? ec.message() : "no addresses"));
  }
  const tcp::endpoint endpoint = results.begin()->endpoint();
  auto fail = [&](const char* step) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    return Status::unavailable(fmt::format("store server: {} {}:{} failed: {}", step,
                                           endpoint.address().to_string(), port, ec.message()));
  };
  if (acceptor_.open(endpoint.protocol(), ec); ec) return fail("open");
  set_cloexec(acceptor_.native_handle());
  acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (acceptor_.bind(endpoint, ec); ec) return fail("bind");
  return start_accepting("listen on");
}

Status StoreServer::adopt(UniqueFd bound_socket) {
  if (acceptor_.is_open()) return Status::invalid_argument("store server: already listening");
  const int fd = bound_socket.get();
  int type = 0;
  socklen_t len = sizeof type;
  if (fd < 0 || ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
    return Status::invalid_argument(
        fmt::format("store server: descriptor {} is not a stream socket", fd));
  }
  sockaddr_storage addr{};
  len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      (addr.ss_family != AF_INET && addr.ss_family != AF_INET6)) {
    return Status::invalid_argument(
        fmt::format("store server: descriptor {} is not a TCP/IP socket", fd));
  }
  set_cloexec(fd);
  boost::system::error_code ec;
  acceptor_.assign(addr.ss_family == AF_INET ? tcp::v4() : tcp::v6(), bound_socket.release(), ec);
  if (ec) {
    return Status::invalid_argument(
        fmt::format("store server: cannot adopt descriptor {}: {}", fd, ec.message()));
  }
  const auto local = acceptor_.local_endpoint(ec);
  if (ec || local.port() == 0) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    return Status::invalid_argument(
        fmt::format("store server: descriptor {} is not bound to a port", fd));
  }
  return start_accepting("listen on adopted socket");
}

Status StoreServer::start_accepting(const char* what) {
  boost::system::error_code ec;
  acceptor_.listen(state_->options.backlog, ec);
  const auto local = ec ? tcp::endpoint() : acceptor_.local_endpoint(ec);
  if (ec) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    return Status::unavailable(fmt::format("store server: {} failed: {}", what, ec.message()));
  }
  port_ = local.port();
  closed_ = false;
  asio::co_spawn(io_, accept_loop(), [](std::exception_ptr e) {
    if (e) spdlog::error("store: the accept loop ended with an exception");
  });
  spdlog::debug("store: listening on {}:{}", local.address().to_string(), port_);
  return Status();
}

asio::awaitable<void> StoreServer::accept_loop() {
  auto alive = alive_;
  auto state = state_;
  boost::system::error_code ec;
  while (*alive && !closed_) {
    tcp::socket socket =
        co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (!*alive || closed_ || ec == asio::error::operation_aborted) break;
    if (ec) {
      // EMFILE and friends: keep serving the connections we have; try again on the next one.
      spdlog::warn("store: accept failed: {}", ec.message());
      continue;
    }
    if (connections_.size() >= state->options.max_connections) {
      ++state->counters.connections_refused;
      spdlog::warn("store: refusing a connection: max_connections ({}) reached",
                   state->options.max_connections);
      socket.close(ec);
      continue;
    }
    configure_accepted(socket);
    ++state->counters.connections_accepted;
    auto connection = std::make_shared<detail::Connection>(std::move(socket), state,
                                                           [this, alive](detail::Connection* c) {
                                                             if (*alive) on_connection_end(c);
                                                           });
    connections_.emplace(connection.get(), connection);
    connection->start();
  }
}

void StoreServer::on_connection_end(detail::Connection* connection) {
  connections_.erase(connection);
}

void StoreServer::close() {
  if (closed_ && !acceptor_.is_open() && connections_.empty()) return;
  closed_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  // Each connection leaves the registry from its own reader (on_connection_end) once its
  // socket is closed; the copy keeps the loop independent of that.
  auto connections = connections_;
  for (auto& [raw, connection] : connections) connection->close();
}

StoreStats StoreServer::stats() const {
  StoreStats s = state_->counters;
  const StoreEngine& engine = state_->engine;
  s.connections_open = connections_.size();
  s.limit_refusals = engine.refusals();
  s.keys = engine.keys();
  s.bytes = engine.bytes();
  s.queued_items = engine.queued_items();
  s.pending_waits = engine.pending_waits();
  s.watches = engine.watches();
  return s;
}

}  // namespace ddprun::store
