// Running counts of what a rendezvous server's connections did, shared by the server and its
// sessions. Everything runs on the server's io_context, so plain integers suffice.
#pragma once

#include <cstdint>

namespace ddprun::rdzv {

struct ServerCounters {
  uint64_t accepted = 0;  // connections accepted since start
  // Connections the server closed because a read deadline passed: silent peers (handshake,
  // idle or heartbeat timeout) and refused peers that did not hang up within the linger time.
  uint64_t deadline_drops = 0;
};

}  // namespace ddprun::rdzv
