#include "store/server.h"

#include <spdlog/spdlog.h>

#include "store/connection.h"

namespace ddprun::store {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

ListenerOptions listener_options(const StoreServerOptions& options) {
  ListenerOptions o;
  o.name = "store";
  o.backlog = options.backlog;
  o.acceptors = options.acceptors;
  o.max_connections = options.max_connections;
  o.accepted_no_delay = true;  // replies are small and latency-bound
  // A client whose host vanished would otherwise hold its connection (and wait) forever.
  o.accepted_keep_alive = true;
  return o;
}

}  // namespace

StoreServer::StoreServer(asio::io_context& io, StoreServerOptions options)
    : state_(std::make_shared<detail::SharedState>(options)),
      listener_(io, listener_options(options)) {}

StoreServer::~StoreServer() { close(); }

Status StoreServer::listen(const std::string& address, uint16_t port) {
  return listener_.listen(address, port,
                          [this](Listener::Accepted a) { return make_connection(std::move(a)); });
}

Status StoreServer::adopt(UniqueFd bound_socket) {
  return listener_.adopt(std::move(bound_socket),
                         [this](Listener::Accepted a) { return make_connection(std::move(a)); });
}

std::shared_ptr<ServedConnection> StoreServer::make_connection(Listener::Accepted accepted) {
  // A TCPStore client has no way to read a refusal: over the limit, it is closed unanswered
  // (the listener counts and logs it).
  if (accepted.refusal) return nullptr;
  return std::make_shared<detail::Connection>(std::move(accepted.socket), state_,
                                              std::move(accepted.ended));
}

void StoreServer::close() { listener_.close(); }

StoreStats StoreServer::stats() const {
  StoreStats s = state_->counters;
  const ListenerCounters& accepts = listener_.counters();
  s.connections_accepted = accepts.accepted;
  s.connections_refused = accepts.refused[static_cast<size_t>(Refusal::kConnections)];
  s.connections_shed = accepts.refused[static_cast<size_t>(Refusal::kDescriptors)];
  s.out_of_descriptor_accepts = accepts.out_of_descriptor_accepts;
  s.connections_open = listener_.connections();
  const StoreEngine& engine = state_->engine;
  s.limit_refusals = engine.refusals();
  s.keys = engine.keys();
  s.bytes = engine.bytes();
  s.queued_items = engine.queued_items();
  s.pending_waits = engine.pending_waits();
  s.watches = engine.watches();
  return s;
}

}  // namespace ddprun::store
