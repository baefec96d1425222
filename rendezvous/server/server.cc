#include "rendezvous/server/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "rendezvous/server/job_registry.h"
#include "rendezvous/server/session.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/frame_io.h"

namespace ddprun::rdzv {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
// Refused connections get an Error frame, which takes a session for up to the linger time:
// this many beyond max_connections are allowed for that; past it they are closed unanswered.
constexpr size_t kRefusalSlack = 64;

ListenerOptions listener_options(const ServerOptions& options) {
  ListenerOptions o;
  o.name = "rendezvous server";
  o.backlog = options.backlog;
  o.max_connections = options.max_connections;
  o.max_connections_per_source = options.max_connections_per_source;
  o.refusal_slack = kRefusalSlack;
  o.shutdown_grace = options.shutdown_grace;
  return o;
}
}  // namespace

RendezvousServer::RendezvousServer(asio::io_context& io, ServerOptions options, const Clock& clock)
    : io_(io),
      options_(std::move(options)),
      clock_(clock),
      registry_(std::make_shared<JobRegistry>(io.get_executor(), clock_, counters_)),
      listener_(io, listener_options(options_), clock_) {
  registry_->set_host_node(options_.host_node_id);
  registry_->set_exclude_cooldown(options_.exclude_cooldown);
}

RendezvousServer::~RendezvousServer() {
  // Sessions finish on the io_context later; they no longer call back into the listener and
  // they share the registry, so closing them here is all that is needed.
  listener_.close();
  registry_->cancel_timers();
}

Status RendezvousServer::listen(const std::string& address, uint16_t port) {
  // Out of descriptors, a shed connection is told why: plain TCP only (a TLS client could
  // not read it).
  Listener::Goodbye goodbye;
  if (!options_.credentials || !options_.credentials->has_tls()) {
    goodbye = [](tcp::socket& socket) {
      const std::string frame =
          encode_frame(ServerMessage(ErrorMsg{"rendezvous server out of file descriptors"}));
      boost::system::error_code ec;
      socket.write_some(asio::buffer(frame), ec);  // best effort: a fresh socket has room
    };
  }
  return listener_.listen(
      address, port, [this](Listener::Accepted a) { return make_session(std::move(a)); },
      std::move(goodbye));
}

std::shared_ptr<ServedConnection> RendezvousServer::make_session(Listener::Accepted accepted) {
  auto session = std::make_shared<Session>(std::move(accepted.socket), registry_, options_,
                                           counters_, redirect_, std::move(accepted.ended));
  if (!accepted.refusal) return session;
  if (*accepted.refusal == Refusal::kConnectionsPerSource) {
    session->start_refusing(
        fmt::format("too many connections from {}: it has {} open (max_connections_per_source)",
                    accepted.source.to_string(), options_.max_connections_per_source));
  } else {
    session->start_refusing(fmt::format(
        "too many connections: this server has {} (max_connections)", options_.max_connections));
  }
  return session;
}

void RendezvousServer::shutdown(std::function<void()> done) {
  // The connections closed now are not members lost: the stored state stays as it was.
  if (!listener_.stopping()) registry_->stop_recording();
  listener_.shutdown("rendezvous server shutting down",
                     [registry = registry_, done = std::move(done)] {
                       registry->cancel_timers();
                       if (done) done();
                     });
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
  // Every connection of this server is a Session (make_session).
  listener_.for_each_connection(
      [&](ServedConnection& c) { static_cast<Session&>(c).close_with(**redirect_); });
  registry_ = std::make_shared<JobRegistry>(io_.get_executor(), clock_);
  registry_->set_host_node(options_.host_node_id);
  registry_->set_exclude_cooldown(options_.exclude_cooldown);
}

ServerStats RendezvousServer::stats() const {
  ServerCounters totals = *counters_;
  // Connection-level counts are the listener's.
  const ListenerCounters& accepts = listener_.counters();
  totals.accepted = accepts.accepted;
  totals.accepts_out_of_descriptors = accepts.out_of_descriptor_accepts;
  const auto refused = [&](Refusal r) { return accepts.refused[static_cast<size_t>(r)]; };
  totals.rejected_limit[static_cast<size_t>(Limit::kConnections)] = refused(Refusal::kConnections);
  totals.rejected_limit[static_cast<size_t>(Limit::kConnectionsPerSource)] =
      refused(Refusal::kConnectionsPerSource);
  totals.rejected_limit[static_cast<size_t>(Limit::kFileDescriptors)] =
      refused(Refusal::kDescriptors);
  return ServerStats{listener_.connections(), registry_->job_count(),
                     registry_->excluded_hosts().size(), totals};
}

std::vector<JobRegistry::JobView> RendezvousServer::jobs() const { return registry_->views(); }

}  // namespace ddprun::rdzv
