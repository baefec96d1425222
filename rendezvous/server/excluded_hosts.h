// The hosts a server keeps out of its jobs (issue 36): a node that left a job unfit to train
// (LeaveMsg::exclude_reason: its workers caused too many failures, it failed its health check,
// a rank asked to exclude it) has its host (wire/node_name.h: node_host) refused by every job's
// Join until its cool-down ends, or an operator releases it (`ddp-rendezvous release HOST`).
//
// Pure: no I/O, no clock of its own. Times are wall-clock (they are stored, and must mean the
// same after a daemon restart or on another replica), handed in by the caller. Expired records
// are dropped by expire(). The registry is bounded (`max_hosts`): past it, the record whose
// cool-down ends first is evicted, so a client leaving with reasons from ever new ids cannot
// grow it without limit.
//
// The durable form of a record is encode_excluded_host / decode_excluded_host (the bytes a
// StateStore keeps per host, state/state_store.h).
//
// Thread-safety: none; the server's io_context owns it.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace ddprun::rdzv {

struct ExcludedHost {
  std::string host;    // node_host() of the node that left
  std::string reason;  // the node's one sentence (LeaveMsg::exclude_reason)
  std::string job_id;  // the job it left
  std::string node;    // the node, as people name it (node_display_name)
  WallTime since{};    // when it left
  WallTime until{};    // its joins are refused before this
  bool operator==(const ExcludedHost&) const = default;
};

class ExcludedHosts {
 public:
  static constexpr size_t kDefaultMaxHosts = 10'000;
  explicit ExcludedHosts(size_t max_hosts = kDefaultMaxHosts)
      : max_hosts_(max_hosts == 0 ? 1 : max_hosts) {}

  // Keeps `record.host` out until `record.until`. A host already kept out takes the new
  // reason, job and node, and keeps the later of both ends. Returns the host evicted to stay
  // within max_hosts (the one whose cool-down ends first), if any: its stored record must go.
  std::optional<std::string> exclude(ExcludedHost record);
  // The record of `host` if it is still kept out at `now` (an expired one stays until
  // expire() or release() takes it, so that its stored record goes with it).
  std::optional<ExcludedHost> check(const std::string& host, WallTime now) const;
  // Forgets `host`. True when it was kept out (expired or not).
  bool release(const std::string& host);
  // Drops every record expired at `now` and returns their hosts (their stored records go).
  std::vector<std::string> expire(WallTime now);
  // Every host kept out at `now`, by host name (expired ones are not listed).
  std::vector<ExcludedHost> list(WallTime now) const;
  size_t size() const { return hosts_.size(); }

 private:
  const size_t max_hosts_;
  std::map<std::string, ExcludedHost> hosts_;  // by host
};

// The bytes a StateStore keeps for one record (format 1), and back. Decoding is bounded and
// refuses anything malformed with an error naming the host.
std::string encode_excluded_host(const ExcludedHost& record);
Result<ExcludedHost> decode_excluded_host(std::string_view host, std::string_view bytes);

// "2026-11-28T12:34:56Z": how a cool-down's end is said to people (UTC, ISO-8601).
std::string format_utc(WallTime t);
// Milliseconds since the Unix epoch, and back (the wire's and the store's unit).
int64_t unix_ms(WallTime t);
WallTime from_unix_ms(int64_t ms);

}  // namespace ddprun::rdzv
