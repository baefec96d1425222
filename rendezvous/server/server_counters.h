// Running counts of what a rendezvous server's connections and jobs did, shared by the server,
// its sessions and its job registry; the daemon's metrics (server_metrics.h) read them at
// scrape time. Everything runs on the server's io_context, so plain integers suffice.
#pragma once

#include <array>
#include <cstdint>
#include <variant>

#include "common/clock.h"
#include "common/log_throttle.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

// The limits a client can run into (server_options.h), for counting refusals by limit.
enum class Limit : uint8_t {
  kConnections,           // max_connections
  kConnectionsPerSource,  // max_connections_per_source
  kJobs,                  // max_jobs
  kNodesPerJob,           // max_nodes_per_job
  kRequestsInFlight,      // max_requests_in_flight
  kFileDescriptors,       // the process ran out of descriptors (EMFILE, ENFILE)
};
inline constexpr size_t kLimitCount = 6;
inline const char* to_string(Limit limit) {
  switch (limit) {
    case Limit::kConnections:
      return "connections";
    case Limit::kConnectionsPerSource:
      return "connections_per_source";
    case Limit::kJobs:
      return "jobs";
    case Limit::kNodesPerJob:
      return "nodes_per_job";
    case Limit::kRequestsInFlight:
      return "requests_in_flight";
    case Limit::kFileDescriptors:
      return "file_descriptors";
  }
  return "unknown";
}

// Round durations (a round opening → its ranks assigned), counted in fixed buckets.
struct RoundDurations {
  // Upper bounds in seconds: a round closes in milliseconds when every node is there, or after
  // last_call_timeout (default 30 s), or waits minutes for nodes to be scheduled.
  static constexpr std::array<double, 14> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                     1,     2.5,  5,     10,   30,  60,   300};
  std::array<uint64_t, kBounds.size() + 1> counts{};  // per bucket; the last one is +Inf
  double sum_seconds = 0;
  uint64_t count = 0;

  void observe(Millis duration) {
    const double s = std::chrono::duration<double>(duration).count();
    size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i]) ++i;
    ++counts[i];
    sum_seconds += s;
    ++count;
  }
};

struct ServerCounters {
  uint64_t accepted = 0;  // connections accepted since start
  // Connections refused at the handshake: no Hello (or StatusQuery) first, bad magic,
  // unsupported version, empty job id. Authentication failures count in rejected_auth instead.
  uint64_t rejected_handshake = 0;
  // Connections the server closed because a read deadline passed: silent peers (handshake,
  // idle or heartbeat timeout) and refused peers that did not hang up within the linger time.
  uint64_t deadline_drops = 0;
  // Accepts tried while the process had no descriptor left: each gives up the spare one to
  // shed the oldest waiting connection (or finds none waiting), then that socket rests
  // (common/listener.h). Many of them in a short time would mean a loop spinning on EMFILE.
  uint64_t accepts_out_of_descriptors = 0;
  // Handshakes refused because authentication failed: a missing or wrong token, a TLS
  // handshake that failed (no or a bad client certificate, a client speaking plain TCP), a
  // status query to a server with per-job tokens only.
  uint64_t rejected_auth = 0;
  // Connections and requests refused by a limit, by limit.
  std::array<uint64_t, kLimitCount> rejected_limit{};
  // Frames by type (ClientMessage / ServerMessage variant index) and bytes, headers included.
  std::array<uint64_t, std::variant_size_v<ClientMessage>> messages_in{};
  std::array<uint64_t, std::variant_size_v<ServerMessage>> messages_out{};
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  // Nodes that left unfit and had their host kept out (a cool-down begun or extended), and
  // joins refused because their host was kept out (excluded_hosts.h).
  uint64_t hosts_excluded = 0;
  uint64_t joins_refused_excluded = 0;
  // Rounds closed (ranks assigned), all jobs, and how long each had been open.
  RoundDurations round_durations;

  void count_limit(Limit limit) { ++rejected_limit[static_cast<size_t>(limit)]; }
  uint64_t total_limit_refusals() const {
    uint64_t total = 0;
    for (uint64_t n : rejected_limit) total += n;
    return total;
  }

  // Refusals are logged through this: at most 20 lines per 10 s, the rest counted.
  LogThrottle refusal_log{20, Millis(10'000)};
};

}  // namespace ddprun::rdzv
