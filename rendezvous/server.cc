#include "rendezvous/server.h"

#include <fcntl.h>
#include <sys/resource.h>

#include <cerrno>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/tcp_listener.h"
#include "rendezvous/codec.h"
#include "rendezvous/frame_io.h"
#include "rendezvous/job_registry.h"
#include "rendezvous/session.h"

namespace ddprun::rdzv {
namespace {
// Refused connections get an Error frame, which takes a session for up to the linger time:
// this many beyond max_connections are allowed for that; past it they are closed unanswered.
constexpr size_t kRefusalSlack = 64;
// How long the accept loop rests after running out of file descriptors.
constexpr Millis kDescriptorPause{50};

UniqueFd open_spare_descriptor() { return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

rlim_t descriptor_limit() {
  rlimit limit{};
  return ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 0;
}
}  // namespace

RendezvousServer::RendezvousServer(asio::io_context& io, ServerOptions options, const Clock& clock)
    : io_(io),
      options_(std::move(options)),
      clock_(clock),
      registry_(std::make_shared<JobRegistry>(io.get_executor(), clock_, counters_)),
      acceptor_(io),
      grace_timer_(io),
      spare_fd_(open_spare_descriptor()) {}

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
  if (const char* step = open_listener(acceptor_, endpoint, options_.backlog, ec)) {
    return fail(step);
  }
  port_ = acceptor_.local_endpoint(ec).port();
  asio::co_spawn(io_, accept_loop(), LogCoroutineEnd{"rendezvous accept loop"});
  spdlog::debug("rendezvous server listening on {}:{}", endpoint.address().to_string(), port_);
  return Status();
}

asio::awaitable<void> RendezvousServer::accept_loop() {
  auto alive = alive_;
  boost::system::error_code ec;
  asio::steady_timer pause(io_);
  while (*alive && !stopping_) {
    tcp::socket socket =
        co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (!*alive || stopping_ || ec == asio::error::operation_aborted) break;
    if (ec == asio::error::no_descriptors || ec.value() == ENFILE) {
      shed_one_connection();
      // The backlog still holds connections we cannot take: give the ones we serve a moment
      // to end, rather than spinning on accept.
      pause.expires_after(kDescriptorPause);
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (ec) {
      spdlog::warn("rendezvous server: accept failed: {}", ec.message());
      continue;
    }
    admit(std::move(socket));
  }
}

void RendezvousServer::admit(tcp::socket socket) {
  boost::system::error_code ec;
  const auto source = socket.remote_endpoint(ec).address();
  if (sessions_.size() >= options_.max_connections + kRefusalSlack) {
    counters_->count_limit(Limit::kConnections);
    socket.close(ec);  // beyond the slack even a refusal is more than we can afford
    return;
  }
  ++counters_->accepted;
  auto session = std::make_shared<Session>(std::move(socket), registry_, options_, counters_,
                                           redirect_, [this, alive = alive_](Session* s) {
                                             if (*alive) on_session_end(s);
                                           });
  sessions_.emplace(session.get(), session);
  size_t& from_source = connections_per_source_[source];
  ++from_source;
  if (sessions_.size() > options_.max_connections) {
    session->start_refusing(
        Limit::kConnections,
        fmt::format("too many connections: this server has {} (max_connections)",
                    options_.max_connections));
  } else if (from_source > options_.max_connections_per_source) {
    session->start_refusing(Limit::kConnectionsPerSource,
                            fmt::format("too many connections from {}: it has {} open "
                                        "(max_connections_per_source)",
                                        source.to_string(), options_.max_connections_per_source));
  } else {
    session->start();
  }
}

// Out of descriptors: the spare one is given up to accept the oldest waiting connection, which
// is told why (plain TCP only: a TLS client could not read it) and closed, then taken back.
void RendezvousServer::shed_one_connection() {
  counters_->count_limit(Limit::kFileDescriptors);
  uint64_t held_back = 0;
  if (counters_->refusal_log.allow(clock_.steady_now(), held_back)) {
    spdlog::warn(
        "rendezvous server: out of file descriptors (limit {}); refusing new connections until "
        "some close ({} similar refusals not logged)",
        descriptor_limit(), held_back);
  }
  spare_fd_.reset();
  boost::system::error_code ec;
  tcp::socket shed(io_);
  acceptor_.accept(shed, ec);
  if (!ec) {
    if (!options_.credentials || !options_.credentials->has_tls()) {
      const std::string frame =
          encode_frame(ServerMessage(ErrorMsg{"rendezvous server out of file descriptors"}));
      shed.non_blocking(true, ec);
      shed.write_some(asio::buffer(frame), ec);  // best effort: a fresh socket has room
    }
    shed.close(ec);
  }
  spare_fd_ = open_spare_descriptor();
}

void RendezvousServer::on_session_end(Session* session) {
  if (auto it = connections_per_source_.find(session->source());
      it != connections_per_source_.end() && --it->second == 0) {
    connections_per_source_.erase(it);
  }
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
  // The connections closed now are not members lost: the stored state stays as it was.
  registry_->stop_recording();
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

Status RendezvousServer::restore_state(state::StateStore& store,
                                       std::function<void(const Status&)> on_failure) {
  return registry_->restore(store, std::move(on_failure));
}

void RendezvousServer::redirect_clients(std::optional<Redirect> to) {
  const bool stepping_down = !redirect_->has_value() && to.has_value();
  *redirect_ = std::move(to);
  if (!stepping_down) return;
  // The old registry stays with the sessions that hold it until they have closed; nothing it
  // does is recorded any more, and new sessions meet an empty one.
  registry_->stop_recording();
  registry_->cancel_timers();
  for (auto& [raw, session] : sessions_) session->close_with(**redirect_);
  registry_ = std::make_shared<JobRegistry>(io_.get_executor(), clock_);
}

ServerStats RendezvousServer::stats() const {
  return ServerStats{sessions_.size(), registry_->job_count(), *counters_};
}

std::vector<JobRegistry::JobView> RendezvousServer::jobs() const {
  return registry_->views();
}

}  // namespace ddprun::rdzv
