// Running counts of what a rendezvous server's connections did, shared by the server and its
// sessions. Everything runs on the server's io_context, so plain integers suffice.
#pragma once

#include <array>
#include <cstdint>

#include "common/clock.h"
#include "common/log_throttle.h"

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

struct ServerCounters {
  uint64_t accepted = 0;  // connections accepted since start
  // Connections the server closed because a read deadline passed: silent peers (handshake,
  // idle or heartbeat timeout) and refused peers that did not hang up within the linger time.
  uint64_t deadline_drops = 0;
  // Handshakes refused because authentication failed: a missing or wrong token, a TLS
  // handshake that failed (no or a bad client certificate, a client speaking plain TCP).
  uint64_t rejected_auth = 0;
  // Connections and requests refused by a limit, by limit.
  std::array<uint64_t, kLimitCount> rejected_limit{};

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
