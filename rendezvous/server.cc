#include "rendezvous/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "rendezvous/frame_io.h"
#include "rendezvous/job_registry.h"
#include "rendezvous/session.h"

namespace ddprun::rdzv {

RendezvousServer::RendezvousServer(asio::io_context& io, ServerOptions options, const Clock& clock)
    : io_(io),
      options_(std::move(options)),
      clock_(clock),
      registry_(std::make_shared<JobRegistry>(io.get_executor(), clock_, counters_)),
      acceptor_(io),
      grace_timer_(io) {}

RendezvousServer::~RendezvousServer() {
  *alive_ = false;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  grace_timer_.cancel();
  // Sessions finish on the io_context later; they no longer call back into us (alive_) and
  // they share the registry, so closing them here is all that is needed.
  auto sessions = std::move(sessions_);
  for (auto& [raw, session] : sessions) session->close_now();
  registry_->cancel_timers();
}

Status RendezvousServer::listen(const std::string& address, uint16_t port) {
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  auto results = resolver.resolve(address, std::to_string(port), ec);
  if (ec || results.empty()) {
    return Status::error(fmt::format("rendezvous server: cannot resolve '{}': {}", address,
                                     ec ? ec.message() : "no addresses"));
  }
  const tcp::endpoint endpoint = results.begin()->endpoint();
  auto fail = [&](const char* step) {
    return Status::error(fmt::format("rendezvous server: {} {}:{} failed: {}", step,
                                     endpoint.address().to_string(), port, ec.message()));
  };
  if (acceptor_.open(endpoint.protocol(), ec); ec) return fail("open");
  set_cloexec(acceptor_.native_handle());
  acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (acceptor_.bind(endpoint, ec); ec) return fail("bind");
  if (acceptor_.listen(options_.backlog, ec); ec) return fail("listen");
  port_ = acceptor_.local_endpoint(ec).port();
  asio::co_spawn(io_, accept_loop(), LogCoroutineEnd{"rendezvous accept loop"});
  spdlog::debug("rendezvous server listening on {}:{}", endpoint.address().to_string(), port_);
  return Status();
}

asio::awaitable<void> RendezvousServer::accept_loop() {
  auto alive = alive_;
  boost::system::error_code ec;
  while (*alive && !stopping_) {
    tcp::socket socket =
        co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (!*alive || stopping_ || ec == asio::error::operation_aborted) break;
    if (ec) {
      // EMFILE and friends: keep serving the connections we have; retry on the next accept.
      spdlog::warn("rendezvous server: accept failed: {}", ec.message());
      continue;
    }
    if (sessions_.size() >= options_.max_connections) {
      ++counters_->rejected_limit;
      socket.close(ec);
      continue;
    }
    ++counters_->accepted;
    auto session = std::make_shared<Session>(std::move(socket), registry_, options_, counters_,
                                             [this, alive](Session* s) {
                                               if (*alive) on_session_end(s);
                                             });
    sessions_.emplace(session.get(), session);
    session->start();
  }
}

void RendezvousServer::on_session_end(Session* session) {
  sessions_.erase(session);
  if (stopping_) maybe_finish_shutdown();
}

void RendezvousServer::shutdown(std::function<void()> done) {
  if (stopping_) {
    if (done) done();  // already stopping: a second caller is not kept waiting twice
    return;
  }
  stopping_ = true;
  shutdown_done_ = std::move(done);
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  spdlog::debug("rendezvous server shutting down ({} connections)", sessions_.size());
  for (auto& [raw, session] : sessions_)
    session->close_with_error("rendezvous server shutting down");
  grace_timer_.expires_after(options_.shutdown_grace);
  grace_timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    // Stage two: whoever did not hang up in time is cut off.
    auto sessions = sessions_;
    for (auto& [raw, session] : sessions) session->close_now();
  });
  maybe_finish_shutdown();
}

void RendezvousServer::maybe_finish_shutdown() {
  if (!sessions_.empty()) return;
  grace_timer_.cancel();
  registry_->cancel_timers();
  if (shutdown_done_) {
    asio::post(io_, [done = std::exchange(shutdown_done_, nullptr)] { done(); });
  }
}

ServerStats RendezvousServer::stats() const {
  return ServerStats{sessions_.size(), registry_->job_count(), *counters_};
}

std::vector<JobRegistry::JobSnapshot> RendezvousServer::jobs() const {
  return registry_->snapshot();
}

}  // namespace ddprun::rdzv
