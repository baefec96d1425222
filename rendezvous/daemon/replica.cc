#include "rendezvous/daemon/replica.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/host_port.h"
#include "rendezvous/server/server.h"

namespace ddprun::rdzv {
namespace {

// The Redirect that sends clients to `leader` ("host:port"). The empty one when nobody leads,
// or when the key still names this replica (its previous run died leading, and the lease has
// not expired yet): a redirect to itself would only send clients round in a circle.
Redirect redirect_to(const std::optional<std::string>& leader, const std::string& self) {
  if (!leader || *leader == self) return Redirect{};
  auto where = parse_host_port(*leader, 0, {.port_optional = false});
  if (!where) {
    spdlog::warn(
        "replica: the leader key holds '{}', which is not host:port; clients are told "
        "that no replica leads",
        *leader);
    return Redirect{};
  }
  return Redirect{where->host, where->port};
}

}  // namespace

Replica::Replica(boost::asio::io_context& io, RendezvousServer& server, ReplicaOptions options,
                 std::function<void(const Status&)> on_failure)
    : server_(server), options_(std::move(options)), on_failure_(std::move(on_failure)) {
  client_ = std::make_shared<state::EtcdClient>(
      io, state::EtcdClientOptions{.endpoints = options_.etcd.endpoints,
                                   .request_timeout = options_.etcd_request_timeout});
  store_ = std::make_unique<state::EtcdStateStore>(
      client_, state::EtcdStateStoreOptions{.cluster = options_.etcd.cluster,
                                            .max_state_bytes = options_.max_job_bytes});
  state::EtcdLeadership::Handlers handlers;
  handlers.elected = [this](const state::LeaderTerm&, const state::LeaderFence& fence) {
    on_elected(fence);
  };
  handlers.lost = [this](const Status& why) { on_lost(why); };
  handlers.leader_changed = [this](const std::optional<std::string>& leader) { follow(leader); };
  leadership_ = std::make_unique<state::EtcdLeadership>(
      client_,
      state::EtcdLeadershipOptions{.cluster = options_.etcd.cluster,
                                   .advertised_address = options_.advertised_address,
                                   .ttl = options_.lease_ttl,
                                   .poll_interval = options_.poll_interval},
      std::move(handlers));
}

Replica::~Replica() = default;

void Replica::start() {
  server_.redirect_clients(Redirect{});  // nobody is served before the lead is won
  leadership_->start();
}

void Replica::on_elected(const state::LeaderFence& fence) {
  leader_.reset();
  store_->set_fence(fence);
  Status loaded = server_.restore_state(*store_, on_failure_);
  if (!loaded) {
    // Serving without the jobs would contradict what their agents were told.
    return on_failure_(loaded.with_context("taking over as the leading replica"));
  }
  server_.redirect_clients(std::nullopt);
  spdlog::info("replica {}: leading; serving {} job(s) loaded from {}", options_.advertised_address,
               server_.stats().jobs, store_->describe());
}

void Replica::on_lost(const Status& why) {
  // The leadership has logged why; a successor may already serve these jobs.
  store_->set_fence(std::nullopt);
  server_.redirect_clients(Redirect{});
  spdlog::warn("replica {}: stepped down ({}); its clients are sent to the next leader",
               options_.advertised_address, why.message());
}

void Replica::follow(const std::optional<std::string>& leader) {
  if (leading()) return;
  leader_ = leader;
  server_.redirect_clients(redirect_to(leader, options_.advertised_address));
  spdlog::info("replica {}: {}", options_.advertised_address, role());
}

void Replica::resign(std::function<void()> done) {
  leadership_->resign([done = std::move(done)](const Status& revoked) {
    if (!revoked) spdlog::warn("replica: revoking the lease failed: {}", revoked.message());
    if (done) done();
  });
}

std::string Replica::role() const {
  if (leading()) return "leading";
  if (!leader_ || *leader_ == options_.advertised_address) return "following (no leader yet)";
  return "following " + *leader_;
}

std::string Replica::describe() const {
  return fmt::format("{}, advertised as {}", store_->describe(), options_.advertised_address);
}

}  // namespace ddprun::rdzv
