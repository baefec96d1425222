// Options and statistics of the TCPStore-compatible server (server.h).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "store/codec.h"
#include "store/engine.h"
#include "store/messages.h"

namespace ddprun::store {

struct StoreServerOptions {
  // What the store may hold: max_keys (default 1 Mi) and max_total_bytes (default 512 MiB).
  // A write that would cross a limit closes the writer's connection with a log line (the
  // TCPStore protocol has no error reply) and counts in StoreStats::limit_refusals.
  StoreLimits limits;
  // What one query may carry: key and value sizes, keys per query, whole query (defaults in
  // codec.h). A query beyond them closes its connection (StoreStats::protocol_errors).
  CodecLimits codec;
  // A connection that has sent part of a query and then nothing more for this long is closed
  // (it holds a read buffer). Healthy clients send a query in one write. Default 30 s.
  std::chrono::milliseconds partial_query_timeout{30'000};
  // Replies queued for a client that does not read them beyond this close its connection.
  // Default 256 MiB (a multi_get of large values is the biggest reply).
  size_t max_outbox_bytes = 256u << 20;
  // Connections beyond this are closed at once on accept. c10d opens one per client (two for
  // a torch 1.x client that watches keys). Default 65536.
  size_t max_connections = 65'536;
  // Listen backlog: a whole job's ranks connect at once. Default 65,535, as torch's libuv
  // store asks: the kernel caps it at net.core.somaxconn (4,096 by default), so a host tuned
  // for large jobs gets the deeper queue without a flag.
  int backlog = 65'535;
  // Listening sockets on the port (ListenerOptions::acceptors, SO_REUSEPORT), each with its
  // own backlog. Default 4: room for 16,384 connections arriving at once under the default
  // somaxconn.
  size_t acceptors = 4;
};

// Counters since the server was built, and the store's current size.
struct StoreStats {
  std::array<uint64_t, kOpCount> operations{};  // queries served, indexed by Op
  uint64_t connections_accepted = 0;
  size_t connections_open = 0;
  uint64_t connections_legacy = 0;         // connections that spoke the torch 1.x-2.0 dialect
  uint64_t connections_validated = 0;      // connections that spoke the torch 2.x dialect
  uint64_t connections_refused = 0;        // closed on accept: max_connections reached
  uint64_t connections_shed = 0;           // closed on accept: out of file descriptors
  uint64_t out_of_descriptor_accepts = 0;  // ListenerCounters::out_of_descriptor_accepts
  uint64_t protocol_errors = 0;            // closed for an unknown, malformed or oversized query
  uint64_t limit_refusals = 0;             // writes refused by max_keys / max_total_bytes
  uint64_t slow_readers_dropped = 0;       // closed at max_outbox_bytes
  uint64_t stalled_dropped = 0;            // closed at partial_query_timeout
  size_t keys = 0;                         // plain keys and non-empty queues
  size_t bytes = 0;                        // keys + values + queued items
  size_t queued_items = 0;
  size_t pending_waits = 0;
  size_t watches = 0;

  uint64_t ops(Op op) const { return operations[static_cast<size_t>(op)]; }
};

}  // namespace ddprun::store
