#include "common/listener.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace ddprun {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
// Connections taken from the backlog in one go before the loop lets others run. Enough to keep
// the backlog from filling when a whole job connects at once; few enough that the handshakes
// of those accepted are answered while the rest still queue, so clients and server work at the
// same time (4,096 clients of bench/store: 0.40 s to release all, against 0.51 s taking up to
// 1,024 at a time; 8 at a time cost more wake-ups: 0.44 s).
constexpr size_t kMostAcceptsPerWakeup = 64;

UniqueFd open_spare_descriptor() { return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

rlim_t descriptor_limit() {
  rlimit limit{};
  return ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 0;
}

bool out_of_descriptors(const boost::system::error_code& ec) {
  return ec == asio::error::no_descriptors || ec.value() == ENFILE;
}
}  // namespace

const char* to_string(Refusal refusal) {
  switch (refusal) {
    case Refusal::kConnections:
      return "max_connections";
    case Refusal::kConnectionsPerSource:
      return "max_connections_per_source";
    case Refusal::kDescriptors:
      return "file descriptors";
  }
  return "unknown";
}

Listener::Listener(asio::io_context& io, ListenerOptions options, const Clock& clock)
    : io_(io),
      options_(std::move(options)),
      clock_(clock),
      acceptor_(io),
      grace_timer_(io),
      spare_fd_(open_spare_descriptor()) {}

Listener::~Listener() {
  *alive_ = false;
  close_acceptors();
  grace_timer_.cancel();
  // Connections may finish on the io_context later; they no longer call back (alive_).
  auto connections = std::move(connections_);
  for (auto& [raw, connection] : connections) connection->close_now();
}

namespace {
// Lets several sockets of this process's user bind one port (see ListenerOptions::acceptors).
bool set_reuse_port(int fd, boost::system::error_code& ec) {
  const int on = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) == 0) return true;
  ec.assign(errno, boost::system::system_category());
  return false;
}
}  // namespace

Status Listener::listen(const std::string& address, uint16_t port, MakeConnection make,
                        Goodbye goodbye) {
  if (acceptor_.is_open()) return Status::invalid_argument(options_.name + ": already listening");
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  auto results = resolver.resolve(address, std::to_string(port), ec);
  if (ec || results.empty()) {
    return Status::invalid_argument(fmt::format("{}: cannot resolve '{}': {}", options_.name,
                                                address, ec ? ec.message() : "no addresses"));
  }
  const tcp::endpoint endpoint = results.begin()->endpoint();
  auto fail = [&](const char* step) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    return Status::unavailable(fmt::format("{}: {} {}:{} failed: {}", options_.name, step,
                                           endpoint.address().to_string(), port, ec.message()));
  };
  if (options_.acceptors > 1 && endpoint.port() != 0) {
    // A SO_REUSEPORT bind would join a group another process of this user already listens
    // in (another job given the same port), and the two would share each other's clients
    // silently. A plain bind first refuses an address in use, as with one socket.
    tcp::acceptor probe(io_);
    probe.open(endpoint.protocol(), ec);
    if (!ec) probe.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) probe.bind(endpoint, ec);
    if (ec) return fail("bind");
  }
  if (acceptor_.open(endpoint.protocol(), ec); ec) return fail("open");
  set_cloexec(acceptor_.native_handle());
  acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (options_.acceptors > 1 && !set_reuse_port(acceptor_.native_handle(), ec)) {
    return fail("SO_REUSEPORT on");
  }
  if (acceptor_.bind(endpoint, ec); ec) return fail("bind");
  if (Status s = open_siblings(acceptor_.local_endpoint(ec)); !s) {
    close_acceptors();
    return s;
  }
  return start("listen on", std::move(make), std::move(goodbye));
}

// The other sockets of a SO_REUSEPORT group, bound to the port the first one got.
Status Listener::open_siblings(const tcp::endpoint& bound) {
  for (size_t i = 1; i < options_.acceptors; ++i) {
    auto sibling = std::make_unique<tcp::acceptor>(io_);
    boost::system::error_code ec;
    sibling->open(bound.protocol(), ec);
    if (!ec) set_cloexec(sibling->native_handle());
    if (!ec) sibling->set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) set_reuse_port(sibling->native_handle(), ec);
    if (!ec) sibling->bind(bound, ec);
    if (ec) {
      return Status::unavailable(
          fmt::format("{}: binding listening socket {} of {} to {}:{}: {}", options_.name, i + 1,
                      options_.acceptors, bound.address().to_string(), bound.port(), ec.message()));
    }
    siblings_.push_back(std::move(sibling));
  }
  return Status();
}

void Listener::close_acceptors() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  // Closed, not destroyed: their accept loops still hold them until they see the abort.
  for (auto& sibling : siblings_) sibling->close(ignored);
}

Status Listener::adopt(UniqueFd bound_socket, MakeConnection make, Goodbye goodbye) {
  if (acceptor_.is_open()) return Status::invalid_argument(options_.name + ": already listening");
  const int fd = bound_socket.get();
  int type = 0;
  socklen_t len = sizeof type;
  if (fd < 0 || ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
    return Status::invalid_argument(
        fmt::format("{}: descriptor {} is not a stream socket", options_.name, fd));
  }
  sockaddr_storage addr{};
  len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      (addr.ss_family != AF_INET && addr.ss_family != AF_INET6)) {
    return Status::invalid_argument(
        fmt::format("{}: descriptor {} is not a TCP/IP socket", options_.name, fd));
  }
  set_cloexec(fd);
  boost::system::error_code ec;
  acceptor_.assign(addr.ss_family == AF_INET ? tcp::v4() : tcp::v6(), bound_socket.release(), ec);
  if (ec) {
    return Status::invalid_argument(
        fmt::format("{}: cannot adopt descriptor {}: {}", options_.name, fd, ec.message()));
  }
  const auto local = acceptor_.local_endpoint(ec);
  if (ec || local.port() == 0) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    return Status::invalid_argument(
        fmt::format("{}: descriptor {} is not bound to a port", options_.name, fd));
  }
  return start("listen on adopted socket", std::move(make), std::move(goodbye));
}

Status Listener::start(const char* what, MakeConnection make, Goodbye goodbye) {
  boost::system::error_code ec;
  // accept_loop drains the backlog without waiting; accepted sockets inherit the options.
  auto prepare = [&](tcp::acceptor& acceptor) {
    if (!ec) acceptor.listen(options_.backlog, ec);
    if (!ec) acceptor.non_blocking(true, ec);
    if (!ec && options_.accepted_no_delay) acceptor.set_option(tcp::no_delay(true), ec);
    if (!ec && options_.accepted_keep_alive) {
      acceptor.set_option(asio::socket_base::keep_alive(true), ec);
    }
  };
  prepare(acceptor_);
  for (auto& sibling : siblings_) prepare(*sibling);
  const auto local = ec ? tcp::endpoint() : acceptor_.local_endpoint(ec);
  if (ec) {
    close_acceptors();
    return Status::unavailable(fmt::format("{}: {} failed: {}", options_.name, what, ec.message()));
  }
  make_ = std::move(make);
  goodbye_ = std::move(goodbye);
  port_ = local.port();
  stopping_ = false;
  asio::co_spawn(io_, accept_loop(acceptor_, alive_), LogCoroutineEnd{"accept loop"});
  for (auto& sibling : siblings_) {
    asio::co_spawn(io_, accept_loop(*sibling, alive_), LogCoroutineEnd{"accept loop"});
  }
  spdlog::debug("{}: listening on {}:{}", options_.name, local.address().to_string(), port_);
  return Status();
}

asio::awaitable<void> Listener::accept_loop(tcp::acceptor& acceptor, std::shared_ptr<bool> alive) {
  if (!*alive) co_return;  // destroyed before the loop first ran: no member may be touched
  boost::system::error_code ec;
  asio::steady_timer pause(io_);
  auto rest = [&]() -> asio::awaitable<void> {
    pause.expires_after(kDescriptorPause);
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  };
  bool backlog_empty = true;  // then the next turn waits for a connection first
  while (*alive && !stopping_ && acceptor.is_open()) {
    if (backlog_empty) {
      // The reactor re-arms the socket for each wait: a connection that came meanwhile wakes
      // it at once.
      co_await acceptor.async_wait(tcp::acceptor::wait_read,
                                   asio::redirect_error(asio::use_awaitable, ec));
      if (!*alive || stopping_ || ec == asio::error::operation_aborted) break;
      if (ec) {
        ++counters_.accept_errors;
        spdlog::warn("{}: waiting for connections failed: {}", options_.name, ec.message());
        co_await rest();
        continue;
      }
      backlog_empty = false;
    }
    auto first = accept_one(acceptor, ec);
    if (!*alive || stopping_) break;
    if (ec == asio::error::would_block) {
      backlog_empty = true;
      continue;
    }
    if (out_of_descriptors(ec)) {
      shed_one_connection(acceptor);
      // The backlog still holds connections we cannot take: give the ones we serve a moment
      // to end, rather than spinning on accept.
      co_await rest();
      continue;
    }
    if (ec) {  // e.g. a peer that reset before we took it: the next one may be fine
      ++counters_.accept_errors;
      spdlog::warn("{}: accept failed: {}", options_.name, ec.message());
      continue;
    }
    admit(std::move(first->first), first->second);
    // Then more of those already waiting (kMostAcceptsPerWakeup), before serving anyone: a
    // whole job's ranks connect at once, and a backlog left to fill makes the kernel drop
    // connections, which their clients only retry after a second or more (16,384 clients: 6 s
    // instead of under 2).
    for (size_t drained = 0; drained < kMostAcceptsPerWakeup && *alive && !stopping_; ++drained) {
      auto more = accept_one(acceptor, ec);
      if (ec) break;  // would_block: the backlog is empty; anything else: the next turn says
      admit(std::move(more->first), more->second);
    }
    if (ec == asio::error::would_block) {
      backlog_empty = true;
    } else {
      // More wait: they are taken after the handlers queued meanwhile have run.
      co_await asio::post(io_, asio::use_awaitable);
    }
  }
}

std::optional<std::pair<tcp::socket, asio::ip::address>> Listener::accept_one(
    tcp::acceptor& acceptor, boost::system::error_code& ec) {
  tcp::endpoint peer;
  socklen_t length = static_cast<socklen_t>(peer.capacity());
  const int fd = ::accept4(acceptor.native_handle(), peer.data(), &length, SOCK_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    ec = error == EAGAIN || error == EWOULDBLOCK
             ? make_error_code(asio::error::would_block)
             : boost::system::error_code(error, boost::system::system_category());
    return std::nullopt;
  }
  peer.resize(length);
  tcp::socket socket(io_);
  socket.assign(peer.protocol(), fd, ec);
  if (ec) {
    ::close(fd);
    return std::nullopt;
  }
  ec.clear();
  return std::make_pair(std::move(socket), peer.address());
}

void Listener::admit(tcp::socket socket, const asio::ip::address& source) {
  boost::system::error_code ec;
  std::optional<Refusal> refusal;
  if (connections_.size() >= options_.max_connections) {
    refusal = Refusal::kConnections;
  } else if (per_source_[source] >= options_.max_connections_per_source) {
    refusal = Refusal::kConnectionsPerSource;
  }
  if (refusal) {
    ++counters_.refused[static_cast<size_t>(*refusal)];
    log_refusal(*refusal, source.to_string());
    if (connections_.size() >= options_.max_connections + options_.refusal_slack) {
      if (per_source_[source] == 0) per_source_.erase(source);
      socket.close(ec);  // no room even to say why
      return;
    }
  } else {
    ++counters_.accepted;
  }
  ++per_source_[source];
  // What `ended` needs: the registry's key, and whether it already ran. Not the connection
  // itself: the connection holds `ended`, and a strong reference back would keep both alive.
  struct EndSlot {
    ServedConnection* connection = nullptr;
    bool ended = false;
  };
  auto slot = std::make_shared<EndSlot>();
  auto ended = [this, alive = alive_, source, slot] {
    if (std::exchange(slot->ended, true)) return;
    if (*alive) on_ended(slot->connection, source);
  };
  auto connection = make_(Accepted{std::move(socket), source, refusal, ended});
  if (!connection) {  // the server declined it; its socket is closed
    ended();
    return;
  }
  // The connection may end inside start(): register it first.
  slot->connection = connection.get();
  connections_.emplace(connection.get(), connection);
  connection->start();
}

void Listener::log_refusal(Refusal refusal, const std::string& detail) {
  uint64_t held_back = 0;
  if (!refusal_log_.allow(clock_.steady_now(), held_back)) return;
  switch (refusal) {
    case Refusal::kConnections:
      spdlog::warn(
          "{}: refusing a connection from {}: {} connections open (max_connections) "
          "({} similar refusals not logged)",
          options_.name, detail, connections_.size(), held_back);
      break;
    case Refusal::kConnectionsPerSource:
      spdlog::warn(
          "{}: refusing a connection from {}: it has {} open "
          "(max_connections_per_source) ({} similar refusals not logged)",
          options_.name, detail, options_.max_connections_per_source, held_back);
      break;
    case Refusal::kDescriptors:
      spdlog::warn(
          "{}: out of file descriptors (limit {}); refusing new connections until "
          "some close ({} similar refusals not logged)",
          options_.name, descriptor_limit(), held_back);
      break;
  }
}

// Out of descriptors: the spare one is given up to accept the oldest waiting connection, which
// gets the server's goodbye and is closed; then the spare is taken back.
// Linux allocates the descriptor before it looks at the backlog, so accept fails with EMFILE
// also when nobody waits: only a connection really taken counts (and is logged) as shed.
void Listener::shed_one_connection(tcp::acceptor& acceptor) {
  ++counters_.out_of_descriptor_accepts;
  spare_fd_.reset();
  boost::system::error_code ec;
  tcp::socket shed(io_);
  acceptor.accept(shed, ec);
  if (!ec) {
    ++counters_.refused[static_cast<size_t>(Refusal::kDescriptors)];
    log_refusal(Refusal::kDescriptors, "");
    if (goodbye_) {
      shed.non_blocking(true, ec);
      goodbye_(shed);
    }
    shed.close(ec);
  }
  spare_fd_ = open_spare_descriptor();
}

void Listener::on_ended(ServedConnection* connection, const asio::ip::address& source) {
  if (auto it = per_source_.find(source); it != per_source_.end() && --it->second == 0) {
    per_source_.erase(it);
  }
  if (connection) connections_.erase(connection);
  if (stopping_) maybe_finish_shutdown();
}

void Listener::for_each_connection(const std::function<void(ServedConnection&)>& f) const {
  std::vector<std::shared_ptr<ServedConnection>> copy;
  copy.reserve(connections_.size());
  for (const auto& [raw, connection] : connections_) copy.push_back(connection);
  for (const auto& connection : copy) f(*connection);
}

void Listener::close() {
  close_acceptors();
  for_each_connection([](ServedConnection& c) { c.close_now(); });
}

void Listener::shutdown(const std::string& reason, std::function<void()> done) {
  if (stopping_) {
    if (done) done();  // already stopping: a second caller is not kept waiting twice
    return;
  }
  stopping_ = true;
  shutdown_done_ = std::move(done);
  close_acceptors();
  spdlog::debug("{}: shutting down ({} connections)", options_.name, connections_.size());
  for_each_connection([&](ServedConnection& c) { c.close_gracefully(reason); });
  grace_timer_.expires_after(options_.shutdown_grace);
  grace_timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    // Stage two: whoever did not hang up in time is cut off.
    for_each_connection([](ServedConnection& c) { c.close_now(); });
  });
  maybe_finish_shutdown();
}

void Listener::maybe_finish_shutdown() {
  if (!connections_.empty()) return;
  grace_timer_.cancel();
  if (shutdown_done_) {
    asio::post(io_, [done = std::exchange(shutdown_done_, nullptr)] { done(); });
  }
}

}  // namespace ddprun
