// Asks a rendezvous server for its status (ddp-rendezvous status): connects, opens with a
// StatusQuery in place of Hello (TLS and the token's challenge-response as for an agent:
// client_handshake.h), reads the one StatusReport, hangs up. Read-only: the server's jobs are
// not touched, and the connection belongs to no job.
//
// A replica that does not lead (docs/rendezvous.md, "High availability") answers with where
// the leader is: the query follows that, up to kMaxStatusRedirects times, and the report says
// which server answered.
//
// Blocking, for command-line tools: runs its own io_context on the calling thread, bounded by
// `timeout` as a whole (resolve, connect, handshake, answer, every redirect).
#pragma once

#include <cstdint>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "rendezvous/security/credentials.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

struct StatusQueryOptions {
  std::string host = "127.0.0.1";  // IP literal or host name
  uint16_t port = 29400;
  Millis timeout{5000};  // the whole exchange. Default 5 s.
  CodecLimits limits;    // for the report
  // The daemon-wide token (the daemon's --token-file) and TLS; default none (plain TCP).
  ClientCredentials credentials;
  // Non-empty: ask the server to release this host (`ddp-rendezvous release`) instead of
  // reporting; the answer's report is then empty.
  std::string release_host;
};

inline constexpr int kMaxStatusRedirects = 3;

// The report, and the server that gave it ("host:port": the one asked, or the leader a
// redirect named).
struct StatusAnswer {
  StatusReport report;
  std::string answered_by;
};

// The server's report. Errors (each naming host:port): kUnavailable when it cannot be reached
// (refused, unreachable, resolution failed), hung up without a report, or is a replica while
// no replica leads (an election is under way), kTimedOut when no report came in time,
// kRefused when authentication failed either way or the server answered with an Error frame
// (saying why), kMalformed for anything else it sent (or redirects without end); with
// release_host, kNotFound when the server keeps no such host out.
Result<StatusAnswer> query_status(const StatusQueryOptions& options);

}  // namespace ddprun::rdzv
