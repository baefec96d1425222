#include "rendezvous/state/etcd/etcd_leadership.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

namespace ddprun::rdzv::state {
namespace {

int64_t whole_seconds(Millis ttl) { return std::max<int64_t>(1, (ttl.count() + 999) / 1000); }

}  // namespace

EtcdLeadership::EtcdLeadership(std::shared_ptr<EtcdClient> client, EtcdLeadershipOptions options,
                               Handlers handlers)
    : client_(std::move(client)),
      options_(std::move(options)),
      handlers_(std::move(handlers)),
      keys_(options_.cluster),
      step_timer_(client_->io()),
      expiry_timer_(client_->io()) {}

EtcdLeadership::~EtcdLeadership() { *alive_ = false; }

template <class F>
auto EtcdLeadership::guard(F f) {
  return [this, alive = alive_, epoch = epoch_, f = std::move(f)](auto&&... args) mutable {
    if (!*alive || epoch != epoch_) return;
    f(std::forward<decltype(args)>(args)...);
  };
}

std::optional<LeaderTerm> EtcdLeadership::term() const {
  if (!leading()) return std::nullopt;
  return term_;
}

void EtcdLeadership::start() {
  assert(state_ == State::kIdle && "EtcdLeadership::start() called twice");
  campaign();
}

void EtcdLeadership::after(Millis delay, void (EtcdLeadership::*step)()) {
  step_timer_.expires_after(delay);
  step_timer_.async_wait(guard([this, step](const boost::system::error_code& ec) {
    if (!ec) (this->*step)();
  }));
}

void EtcdLeadership::campaign() {
  state_ = State::kCampaigning;
  ++epoch_;
  const auto sent = std::chrono::steady_clock::now();
  client_->lease_grant(
      whole_seconds(options_.ttl), guard([this, sent](Result<etcd::LeaseGrantResponse> grant) {
        if (!grant) {
          spdlog::warn("leader election: cannot get an etcd lease: {}", grant.error_message());
          return follow(leader_);
        }
        // etcd counts the lease from when it granted it, after `sent`: counting from `sent`
        // errs on the safe side.
        confirmed_at_ = sent;
        const int64_t lease = grant->id;
        const int64_t ttl = grant->ttl_seconds;
        etcd::TxnRequest txn;
        txn.compare.push_back({keys_.leader(), etcd::Compare::Target::kCreateRevision, 0, {}});
        txn.success.push_back(etcd::PutRequest{keys_.leader(), options_.advertised_address, lease});
        txn.failure.push_back(etcd::RangeRequest{keys_.leader(), {}, 0, 0});
        client_->txn(txn, guard([this, lease, ttl](Result<etcd::TxnResponse> answer) {
                       on_campaign_answer(lease, ttl, std::move(answer));
                     }));
      }));
}

void EtcdLeadership::on_campaign_answer(int64_t lease, int64_t ttl,
                                        Result<etcd::TxnResponse> answer) {
  if (!answer) {
    spdlog::warn("leader election: campaign failed: {}", answer.error_message());
    client_->lease_revoke(lease, [](const Status&) {});  // best effort; it expires anyway
    return follow(leader_);
  }
  if (answer->succeeded) return become_leader(lease, answer->revision, ttl);
  const etcd::RangeResponse* range =
      answer->responses.empty() ? nullptr
                                : std::get_if<etcd::RangeResponse>(&answer->responses.front());
  if (range && !range->kvs.empty() && range->kvs.front().lease == lease) {
    // Our own put: an earlier attempt of this transaction won on a member whose answer was
    // lost, and the client retried it on another member.
    return become_leader(lease, range->kvs.front().create_revision, ttl);
  }
  client_->lease_revoke(lease, [](const Status&) {});
  std::optional<std::string> leader;
  if (range && !range->kvs.empty()) leader = range->kvs.front().value;
  follow(std::move(leader));
}

void EtcdLeadership::become_leader(int64_t lease, int64_t create_revision, int64_t ttl) {
  state_ = State::kLeading;
  ++epoch_;
  term_ = LeaderTerm{lease, create_revision, ttl};
  leader_ = options_.advertised_address;
  arm_expiry();
  const Millis ttl_ms(term_.ttl_seconds * 1000);
  after(options_.keepalive_interval.count() > 0 ? options_.keepalive_interval : ttl_ms / 3,
        &EtcdLeadership::refresh);
  spdlog::info("leader election: this replica ({}) leads (lease {:x}, revision {})",
               options_.advertised_address, lease, create_revision);
  if (handlers_.elected) handlers_.elected(term_, LeaderFence{keys_.leader(), create_revision});
}

void EtcdLeadership::arm_expiry() {
  expiry_timer_.expires_at(confirmed_at_ + Millis(term_.ttl_seconds * 1000));
  expiry_timer_.async_wait(guard([this](const boost::system::error_code& ec) {
    if (ec) return;
    lose(Status::unavailable(fmt::format(
        "no lease refresh reached etcd for {} s (the lease's TTL): etcd is unreachable from this "
        "replica, and another replica may lead by now",
        term_.ttl_seconds)));
  }));
}

void EtcdLeadership::refresh() {
  const auto sent = std::chrono::steady_clock::now();
  const Millis interval = options_.keepalive_interval.count() > 0
                              ? options_.keepalive_interval
                              : Millis(term_.ttl_seconds * 1000) / 3;
  client_->lease_keepalive(
      term_.lease, guard([this, sent, interval](Result<int64_t> ttl) {
        if (!ttl) {
          // The expiry timer decides when this becomes a lost lead; until then, keep trying.
          spdlog::warn("leader election: lease refresh failed: {}", ttl.error_message());
          return after(interval, &EtcdLeadership::refresh);
        }
        if (*ttl <= 0) {
          return lose(Status::not_found("the leader's etcd lease expired or was revoked"));
        }
        confirmed_at_ = sent;
        arm_expiry();
        client_->range(
            etcd::RangeRequest{keys_.leader(), {}, 0, 0},
            guard([this, interval](Result<etcd::RangeResponse> r) {
              if (r && r->kvs.empty()) {
                return lose(Status::not_found("the leader key " + keys_.leader() + " was deleted"));
              }
              if (r && r->kvs.front().lease != term_.lease) {
                return lose(Status::refused("the leader key " + keys_.leader() +
                                            " belongs to another lease now"));
              }
              after(interval, &EtcdLeadership::refresh);
            }));
      }));
}

void EtcdLeadership::lose(const Status& why) {
  state_ = State::kFollowing;
  ++epoch_;
  expiry_timer_.cancel();
  client_->lease_revoke(term_.lease, [](const Status&) {});  // best effort: it may be gone already
  leader_.reset();
  after(options_.poll_interval, &EtcdLeadership::poll);
  spdlog::warn("leader election: this replica ({}) no longer leads: {}",
               options_.advertised_address, why.message());
  if (handlers_.lost) handlers_.lost(why);
}

void EtcdLeadership::follow(std::optional<std::string> leader) {
  state_ = State::kFollowing;
  ++epoch_;
  after(options_.poll_interval, &EtcdLeadership::poll);
  set_leader(std::move(leader));
}

void EtcdLeadership::poll() {
  client_->range(etcd::RangeRequest{keys_.leader(), {}, 0, 0},
                 guard([this](Result<etcd::RangeResponse> r) {
                   if (!r) {  // etcd unreachable: keep the last known leader, ask again
                     return after(options_.poll_interval, &EtcdLeadership::poll);
                   }
                   if (r->kvs.empty()) {
                     leader_.reset();
                     return campaign();
                   }
                   after(options_.poll_interval, &EtcdLeadership::poll);
                   set_leader(r->kvs.front().value);
                 }));
}

void EtcdLeadership::set_leader(std::optional<std::string> leader) {
  if (leader == leader_) return;
  leader_ = std::move(leader);
  if (handlers_.leader_changed) handlers_.leader_changed(leader_);
}

namespace {
// Revokes `lease`, again every 100 ms while etcd answers "unavailable" (no member could serve),
// until `deadline`. Holds the client, not the leadership, which may be gone by then.
void revoke_until(std::shared_ptr<EtcdClient> client, int64_t lease,
                  std::chrono::steady_clock::time_point deadline,
                  std::function<void(Status)> done) {
  client->lease_revoke(lease, [client, lease, deadline, done = std::move(done)](Status s) mutable {
    constexpr Millis kRetry{100};
    if (s || !s.is_unavailable() || std::chrono::steady_clock::now() + kRetry >= deadline) {
      return done(std::move(s));
    }
    auto timer = std::make_shared<boost::asio::steady_timer>(client->io(), kRetry);
    timer->async_wait([client, lease, deadline, done = std::move(done),
                       timer](const boost::system::error_code&) mutable {
      revoke_until(std::move(client), lease, deadline, std::move(done));
    });
  });
}
}  // namespace

void EtcdLeadership::resign(std::function<void(Status)> done) {
  const bool had_lease = state_ == State::kLeading;
  state_ = State::kStopped;
  ++epoch_;
  step_timer_.cancel();
  expiry_timer_.cancel();
  if (!had_lease) {
    boost::asio::post(client_->io(), [done = std::move(done)] { done(Status()); });
    return;
  }
  leader_.reset();
  revoke_until(client_, term_.lease, confirmed_at_ + Millis(term_.ttl_seconds * 1000),
               std::move(done));
}

}  // namespace ddprun::rdzv::state
