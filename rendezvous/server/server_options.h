// Options of the rendezvous server, shared by the server and its sessions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.h"
#include "rendezvous/security/credentials.h"
#include "rendezvous/wire/codec.h"

namespace ddprun::rdzv {

struct ServerOptions {
  // The node id of the agent that hosts this server in-process (c10d without ddp-rendezvous):
  // every RoundAssigned then names a successor, where the rendezvous moves if that node is
  // lost (protocol.md, "When the hosting node is lost"). Empty (ddp-rendezvous): none.
  std::string host_node_id;
  // A new connection must complete the Hello handshake within this. Default 10 s.
  Millis handshake_timeout{10'000};
  // A connection that has not joined (a tool using the KV API, a client between rounds) is
  // dropped after this long without a frame. Members use their job's heartbeat_timeout
  // instead. Default 60 s (torchrun's read_timeout).
  Millis idle_timeout{60'000};
  // Frames queued for one slow reader beyond this drop that connection. Default 16 MiB.
  size_t max_outbox_bytes = 16u << 20;
  // Connections beyond this are refused with an Error frame (and closed at once beyond this
  // plus a little slack for the refusals themselves). Default 65536.
  size_t max_connections = 65'536;
  // Open connections from one source address beyond this are refused: one host (a runaway
  // script, a broken client reconnecting in a loop) cannot take every slot. A node uses one
  // connection (plus one per status query). Default 512.
  size_t max_connections_per_source = 512;
  // A Hello naming a job the server does not know yet is refused once it serves this many.
  // Default 1024.
  size_t max_jobs = 1024;
  // A Join whose max_nodes exceeds this is refused, as is a node joining a job that already
  // has this many nodes (members, waiting and standby together). Default 16384.
  uint32_t max_nodes_per_job = 16'384;
  // A connection with this many frames queued and unread (it sends requests and does not read
  // the replies) is refused with an Error and closed. Pushes count too, so the default is far
  // above what a node ever has outstanding (a handful). Default 256.
  size_t max_requests_in_flight = 256;
  // A node that leaves a job unfit to train (LeaveMsg::exclude_reason) has its host kept out of
  // every job of this server this long: its joins are refused (kJoinRefusedHostExcluded) until
  // then, or until an operator releases it (excluded_hosts.h). 0: not beyond the job it left.
  // Default 1 hour.
  Millis exclude_cooldown{3'600'000};
  // Who may talk to the server: the job tokens and TLS (security/credentials.h); null = anyone
  // who can reach the port (the network is trusted).
  std::shared_ptr<const ServerCredentials> credentials;
  // Shutdown stage one (stop accepting, tell clients, flush) lasts at most this before stage
  // two closes every connection. Default 2 s.
  Millis shutdown_grace{2'000};
  // Hard limits on frames from clients.
  CodecLimits limits;
  // Listen backlog: thousands of agents may connect at once. Default 4096.
  int backlog = 4096;
};

}  // namespace ddprun::rdzv
