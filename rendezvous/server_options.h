// Options of the rendezvous server, shared by the server and its sessions.
#pragma once

#include <cstddef>

#include "common/clock.h"
#include "rendezvous/codec.h"

namespace ddprun::rdzv {

struct ServerOptions {
  // A new connection must complete the Hello handshake within this. Default 10 s.
  Millis handshake_timeout{10'000};
  // A connection that has not joined (a tool using the KV API, a client between rounds) is
  // dropped after this long without a frame. Members use their job's heartbeat_timeout
  // instead. Default 60 s (torchrun's read_timeout).
  Millis idle_timeout{60'000};
  // Frames queued for one slow reader beyond this drop that connection. Default 16 MiB.
  size_t max_outbox_bytes = 16u << 20;
  // Connections beyond this are closed at once on accept. Default 65536.
  size_t max_connections = 65'536;
  // Shutdown stage one (stop accepting, tell clients, flush) lasts at most this before stage
  // two closes every connection. Default 2 s.
  Millis shutdown_grace{2'000};
  // Hard limits on frames from clients.
  CodecLimits limits;
  // Listen backlog: thousands of agents may connect at once. Default 4096.
  int backlog = 4096;
};

}  // namespace ddprun::rdzv
