#include "tests/multinode/chaos_proxy.h"

#include <array>
#include <exception>
#include <iostream>
#include <limits>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace ddprun::testing {

namespace asio = boost::asio;
using asio::ip::tcp;

// One relayed connection. Either pump closing it ends both directions.
struct ChaosProxy::Link {
  Link(tcp::socket c, tcp::socket s) : client(std::move(c)), server(std::move(s)) {}
  void close() {
    boost::system::error_code ignored;
    client.close(ignored);
    server.close(ignored);
  }
  tcp::socket client;
  tcp::socket server;
};

namespace {

// Coroutines end through redirect_error, never by throwing; anything else is a bug in the
// proxy, shown rather than lost.
void report_end(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& error) {
    std::cerr << "chaos proxy: " << error.what() << "\n";
  }
}

}  // namespace

ChaosProxy::ChaosProxy(const std::string& target_host, uint16_t target_port, ChaosOptions options)
    : options_(options),
      target_(asio::ip::make_address(target_host), target_port),
      acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
      random_(options.seed) {
  port_ = acceptor_.local_endpoint().port();
  asio::co_spawn(io_, accept_loop(), report_end);
  thread_ = std::thread([this] {
    auto work = asio::make_work_guard(io_);
    io_.run();
  });
}

ChaosProxy::~ChaosProxy() {
  io_.stop();
  thread_.join();
  // The io_context, destroyed last, frees the suspended pumps and with them every socket.
}

ChaosCounts ChaosProxy::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

bool ChaosProxy::wait_until(const std::function<bool(const ChaosCounts&)>& enough,
                            Deadline deadline) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_until(lock, deadline, [&] { return enough(counts_); });
}

void ChaosProxy::count(int ChaosCounts::*field) {
  {
    std::lock_guard lock(mutex_);
    ++(counts_.*field);
  }
  changed_.notify_all();
}

bool ChaosProxy::fault(int ChaosCounts::*field, double probability, int budget) {
  // Drawn every time, budget or not, so that a seed's sequence of draws does not depend on
  // when a budget runs out.
  const bool drawn = std::bernoulli_distribution(probability)(random_);
  {
    std::lock_guard lock(mutex_);
    if (!drawn || counts_.*field >= budget) return false;
  }
  count(field);
  return true;
}

asio::awaitable<void> ChaosProxy::pause(std::chrono::milliseconds max) {
  const auto length =
      std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(1, max.count())(random_));
  asio::steady_timer timer(io_, length);
  boost::system::error_code ignored;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

asio::awaitable<void> ChaosProxy::accept_loop() {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket client =
        co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) continue;  // e.g. the client gave up already
    asio::co_spawn(io_, serve(std::move(client)), report_end);
  }
}

asio::awaitable<void> ChaosProxy::serve(tcp::socket client) {
  const bool drop =
      !last_dropped_ && fault(&ChaosCounts::drops, options_.drop_probability, options_.max_drops);
  last_dropped_ = drop;
  boost::system::error_code ec;
  if (drop) {
    client.close(ec);
    co_return;
  }
  const tcp::endpoint peer = client.remote_endpoint(ec);
  tcp::socket server(io_);
  server.open(tcp::v4(), ec);
  if (!ec && peer.address().is_v4()) server.bind(tcp::endpoint(peer.address(), 0), ec);
  if (!ec) co_await server.async_connect(target_, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    std::cerr << "chaos proxy: cannot reach the server: " << ec.message() << "\n";
    client.close(ec);
    co_return;
  }
  count(&ChaosCounts::connections);
  auto link = std::make_shared<Link>(std::move(client), std::move(server));
  asio::co_spawn(io_, pump(link, true), report_end);
  asio::co_spawn(io_, pump(link, false), report_end);
}

asio::awaitable<void> ChaosProxy::pump(std::shared_ptr<Link> link, bool to_server) {
  tcp::socket& from = to_server ? link->client : link->server;
  tcp::socket& to = to_server ? link->server : link->client;
  std::array<char, 4096> buffer;
  for (;;) {
    if (fault(&ChaosCounts::stalls, options_.stall_probability, options_.max_stalls)) {
      co_await pause(options_.max_stall);
    }
    boost::system::error_code ec;
    const std::size_t n = co_await from.async_read_some(
        asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    if (fault(&ChaosCounts::delays, options_.delay_probability, std::numeric_limits<int>::max())) {
      co_await pause(options_.max_delay);
    }
    // A cut lets a random prefix through (often half a frame), then closes both sides.
    const bool cut = fault(&ChaosCounts::cuts, options_.cut_probability, options_.max_cuts);
    const std::size_t forward =
        cut ? std::uniform_int_distribution<std::size_t>(0, n - 1)(random_) : n;
    co_await asio::async_write(to, asio::buffer(buffer.data(), forward),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec || cut) break;
  }
  link->close();
}

}  // namespace ddprun::testing
