// Which of several ddp-rendezvous replicas leads, decided by etcd: the leader holds the key
// /ddprun/<cluster>/leader, attached to a lease it keeps alive. The key's value is the leader's
// advertised address, so followers can redirect clients to it.
//
// Campaign: grant a lease of `ttl`, then one transaction "if the leader key does not exist
// (create_revision == 0), put it with my address on my lease; else read it". Winning makes this
// replica leader for the term {lease, the key's create revision} (the store's LeaderFence).
//
// Leading: every keepalive_interval (ttl/3) the lease is refreshed and the key re-read. The
// lead is lost, and the owner told, when: the lease is gone (expired or revoked), the key is
// gone or on another lease, or no refresh succeeded for `ttl` (etcd unreachable: the lease has
// then expired, or is about to, and someone else may lead). The local verdict comes no later
// than etcd's own expiry (it counts from when a refresh was sent, etcd from when it arrived).
//
// Following: the leader key is polled every poll_interval, not watched. A watch through the
// gateway is a long-lived chunked HTTP stream that needs its own liveness checks (a
// partitioned member keeps it open and silent) and re-establishment on another member; a poll
// is one bounded request on the same failover path as everything else, it notices an
// unreachable etcd by itself, and for a handful of replicas costs one small read per
// poll_interval each. A takeover after a leader's crash therefore comes at most ttl (etcd
// expires the lease) + poll_interval + one campaign after the last refresh.
//
// After losing the lead, or failing to campaign, the replica waits poll_interval and campaigns
// again, until stop() or resign().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "rendezvous/state/etcd/etcd_client.h"
#include "rendezvous/state/etcd/etcd_keys.h"

namespace ddprun::rdzv::state {

struct EtcdLeadershipOptions {
  // The leader key is /ddprun/<cluster>/leader. Default "default".
  std::string cluster = "default";
  // This replica's address for clients ("host:port"), stored as the leader key's value.
  // Required.
  std::string advertised_address;
  // Lease TTL; etcd counts whole seconds (rounded up here) and raises values below its minimum
  // (2 s with default etcd settings). Default 5 s.
  Millis ttl{5'000};
  // Lease refresh period while leading; 0 means ttl / 3. Default 0.
  Millis keepalive_interval{0};
  // Follower poll of the leader key, and pause before campaigning again. Default 500 ms.
  Millis poll_interval{500};
};

// One term of this replica's leadership.
struct LeaderTerm {
  int64_t lease = 0;
  int64_t create_revision = 0;  // of the leader key this replica created
  int64_t ttl_seconds = 0;      // as etcd granted it
};

// Lifetime: built on the client's io_context; every handler runs there. Destroying it stops
// everything without revoking the lease (a crash, as far as etcd can tell); resign() first for
// a fast hand-over. Thread-safety: none; the io_context's thread only.
class EtcdLeadership {
 public:
  struct Handlers {
    // This replica leads from now on; give `fence` to the EtcdStateStore and load the state.
    std::function<void(const LeaderTerm& term, const LeaderFence& fence)> elected;
    // This replica no longer leads (why says how it learned); it campaigns again by itself.
    std::function<void(const Status& why)> lost;
    // Another replica's address became the leader's (nullopt: nobody leads right now).
    std::function<void(const std::optional<std::string>& leader)> leader_changed;
  };

  EtcdLeadership(std::shared_ptr<EtcdClient> client, EtcdLeadershipOptions options,
                 Handlers handlers);
  ~EtcdLeadership();
  EtcdLeadership(const EtcdLeadership&) = delete;
  EtcdLeadership& operator=(const EtcdLeadership&) = delete;

  // Starts campaigning. Call once.
  void start();
  // Stops campaigning and leading; revokes the lease (which deletes the leader key, so a
  // follower takes over at its next poll). While etcd cannot serve (its own leader election
  // after a member died), the revoke is tried again until the lease would have expired anyway.
  // `done` runs on the io_context when etcd has answered (or the last try failed). No handler
  // runs after resign().
  void resign(std::function<void(Status)> done);

  bool leading() const { return state_ == State::kLeading; }
  std::optional<LeaderTerm> term() const;
  // The current leader's address as last seen: this replica's own while leading.
  const std::optional<std::string>& leader_address() const { return leader_; }
  const EtcdLeadershipOptions& options() const { return options_; }

 private:
  enum class State { kIdle, kCampaigning, kLeading, kFollowing, kStopped };

  void campaign();
  void on_campaign_answer(int64_t lease, int64_t ttl, Result<etcd::TxnResponse> answer);
  void become_leader(int64_t lease, int64_t create_revision, int64_t ttl);
  void follow(std::optional<std::string> leader);
  void poll();
  void refresh();
  void lose(const Status& why);
  void arm_expiry();
  void set_leader(std::optional<std::string> leader);
  void after(Millis delay, void (EtcdLeadership::*step)());
  // Wraps a callback so that it runs only while this object lives and `epoch_` is unchanged
  // (a state change makes the answers to older requests irrelevant).
  template <class F>
  auto guard(F f);

  std::shared_ptr<EtcdClient> client_;
  const EtcdLeadershipOptions options_;
  const Handlers handlers_;
  const EtcdKeys keys_;
  State state_ = State::kIdle;
  uint64_t epoch_ = 0;                                  // bumped at every state change
  LeaderTerm term_;                                     // valid while kLeading
  std::chrono::steady_clock::time_point confirmed_at_;  // send time of the last good refresh
  std::optional<std::string> leader_;
  boost::asio::steady_timer step_timer_;    // the next poll / refresh / campaign
  boost::asio::steady_timer expiry_timer_;  // while leading: confirmed_at_ + ttl
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ddprun::rdzv::state
