// One of several ddp-rendezvous replicas that share their jobs in etcd (`--state etcd://...`,
// docs/rendezvous.md "High availability"). It campaigns for the lead (EtcdLeadership) and puts
// its RendezvousServer in the matching role:
//
//   following  every Hello is answered with a Redirect to the leader's advertised address
//              (the empty Redirect while nobody leads); the server holds no job
//   leading    the jobs are loaded from etcd and served; every decision is recorded there
//              (EtcdStateStore, fenced by this term: a deposed leader's writes fail)
//   deposed    the lease was lost (etcd unreachable for the TTL, or the key taken): the server
//              steps down (its clients are redirected, its jobs dropped) and the replica
//              campaigns again as a follower
//
// A save that fails while leading, or a state that cannot be loaded at a takeover, is
// `on_failure`'s to handle (the daemon exits, as with SQLite; the other replicas take over).
//
// Lifetime and threading: built on the server's io_context and used from its thread only; the
// server must outlive the replica. Destroying it stops campaigning without revoking the lease
// (as a crash would); resign() first for a fast hand-over.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "rendezvous/state/etcd/etcd_client.h"
#include "rendezvous/state/etcd/etcd_leadership.h"
#include "rendezvous/state/etcd/etcd_state_store.h"
#include "rendezvous/state/open_state_store.h"

namespace ddprun::rdzv {

class RendezvousServer;

struct ReplicaOptions {
  // The etcd members and the cluster name (a parsed `etcd://` spec). Required.
  state::StateSpec etcd;
  // This replica's address as clients dial it ("host:port"): what followers redirect to while
  // this replica leads. Required.
  std::string advertised_address;
  // The leader's lease. A dead leader is replaced about lease_ttl + poll_interval after its
  // last refresh. etcd counts whole seconds. Default 5 s.
  Millis lease_ttl{5'000};
  // The largest job's state the store writes (EtcdStateStoreOptions::max_state_bytes).
  size_t max_job_bytes = 1u << 20;
  // How often a follower reads the leader key. Default 500 ms.
  Millis poll_interval{500};
  // One etcd request to one member. Default 2 s (EtcdClientOptions).
  Millis etcd_request_timeout{2'000};
};

class Replica {
 public:
  Replica(boost::asio::io_context& io, RendezvousServer& server, ReplicaOptions options,
          std::function<void(const Status&)> on_failure);
  ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Puts the server in the follower role (until elected) and starts campaigning. Call once,
  // before the server listens, so that no client is served before the lead is won.
  void start();
  // Stops campaigning and revokes the lease, so that another replica takes over at its next
  // poll instead of after the TTL. `done` runs on the io_context once etcd answered.
  void resign(std::function<void()> done);

  bool leading() const { return leadership_ && leadership_->leading(); }
  // "leading" / "following 10.0.0.2:29400" / "following (no leader yet)", for status lines.
  std::string role() const;
  // "etcd://h1:2379,... (keys under /ddprun/<cluster>/), advertised as host:port".
  std::string describe() const;

 private:
  void on_elected(const state::LeaderFence& fence);
  void on_lost(const Status& why);
  void follow(const std::optional<std::string>& leader);

  RendezvousServer& server_;
  const ReplicaOptions options_;
  std::function<void(const Status&)> on_failure_;
  std::shared_ptr<state::EtcdClient> client_;
  std::unique_ptr<state::EtcdStateStore> store_;  // shared by every term; fenced per term
  std::unique_ptr<state::EtcdLeadership> leadership_;
  std::optional<std::string> leader_;  // the leader's address as last seen (not while leading)
};

}  // namespace ddprun::rdzv
