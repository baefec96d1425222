// Running counts of what a rendezvous server's connections and jobs did, shared by the server,
// its sessions and its job registry; the daemon's metrics (server_metrics.h) read them at
// scrape time. Everything runs on the server's io_context, so plain integers suffice.
#pragma once

#include <array>
#include <cstdint>
#include <variant>

#include "common/clock.h"
#include "rendezvous/messages.h"

namespace ddprun::rdzv {

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
  // Connections refused: closed on accept at max_connections, or refused at the handshake
  // (no Hello first, bad magic, unsupported version, empty job id).
  uint64_t rejected_limit = 0;
  uint64_t rejected_handshake = 0;
  // Connections the server closed because a read deadline passed: silent peers (handshake,
  // idle or heartbeat timeout) and refused peers that did not hang up within the linger time.
  uint64_t deadline_drops = 0;
  // Frames by type (ClientMessage / ServerMessage variant index) and bytes, headers included.
  std::array<uint64_t, std::variant_size_v<ClientMessage>> messages_in{};
  std::array<uint64_t, std::variant_size_v<ServerMessage>> messages_out{};
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  // Rounds closed (ranks assigned), all jobs, and how long each had been open.
  RoundDurations round_durations;
};

}  // namespace ddprun::rdzv
