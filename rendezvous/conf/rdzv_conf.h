// torchrun's --rdzv_conf ("k=v,k=v") parsed into typed rendezvous timeouts.
//
// Keys (torchrun's): join_timeout (600 s), last_call_timeout (30 s), close_timeout (30 s),
// heartbeat_timeout (how long a node may be silent before it is lost: keep_alive_interval ×
// keep_alive_max_attempt = 15 s when unset, or when given no longer than keep_alive_interval —
// torchrun's default of 5 s among them — where torchrun's meaning, a bound on one keep-alive
// exchange, applies and a note says so),
// keep_alive_interval (5 s), keep_alive_max_attempt (3), read_timeout (60 s), is_host (auto).
// Other keys real launch scripts pass take torchrun's meaning where ddprun has one: `timeout`
// (the etcd backends' rendezvous deadline) is join_timeout unless join_timeout is given;
// `store_type` (tcp, file) and `use_libuv` are accepted and have no effect (ddprun's rendezvous
// is its server, and the job's store is the agent's TCP store). Durations are seconds like
// torchrun ("30", "0.5"), or carry a unit: "250ms", "2s".
//
// ddprun's own keys secure the control plane (docs/reliability.md): token_file (the job's
// shared secret, security/token_file.h), tls_ca_file (verifies the server; on the host agent's
// embedded server with tls_cert_file, also the clients: mutual TLS), tls_cert_file and
// tls_key_file (this node's certificate: presented to the server, and served by the host
// agent's embedded server), tls_server_name (the name the server's certificate must carry;
// default the endpoint's host).
//
// Like torchrun, keys nobody knows are accepted: they are listed in `ignored_keys` for one
// warning (with a "did you mean" for a near miss). Repeated keys and bad values of known keys
// are errors that name the key.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace ddprun::rdzv {

struct RendezvousConf {
  // Longest a round waits for min_nodes. Default 600 s.
  Millis join_timeout{600'000};
  // Extra wait for more nodes once min_nodes joined. Default 30 s.
  Millis last_call_timeout{30'000};
  // Accepted for torchrun compatibility; our rounds close by push, so it has no effect.
  Millis close_timeout{30'000};
  // A connection silent this long is dead, and a node whose connection dropped keeps its
  // place this long. Default keep_alive_interval × keep_alive_max_attempt.
  Millis heartbeat_timeout{15'000};
  // How often the client sends a heartbeat. Default 5 s.
  Millis keep_alive_interval{5'000};
  int keep_alive_max_attempt = 3;
  // Deadline of one request/reply exchange and of connecting. Default 60 s.
  Millis read_timeout{60'000};
  // When this agent hosts the server: how long the host of a node that left unfit to train is
  // kept out of the job (ServerOptions::exclude_cooldown; 0: not kept out). Default 1 h.
  Millis exclude_cooldown{3'600'000};
  // Whether this agent hosts the server; nullopt = decide by matching the endpoint's host.
  std::optional<bool> is_host;

  // Security (see above); empty = not used.
  std::string token_file;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;

  // What the launcher should warn about once: keys it ignored (unknown to ddprun and torchrun,
  // each with a suggestion when one is close), and known keys that have no effect here.
  std::vector<std::string> ignored_keys;
  std::vector<std::string> notes;
};

// Parses "k=v,k=v" (empty = all defaults). Whitespace around keys and values is ignored.
Result<RendezvousConf> parse_rdzv_conf(std::string_view text);

// The longest duration parse_duration accepts: 10^9 s (about 31 years). Anything longer means
// "never" in practice, and the limit keeps deadline arithmetic (now + d, in nanoseconds) far
// from overflowing.
inline constexpr Millis kMaxDuration{1'000'000'000'000};

// "250ms", "2s", "1.5" (seconds) → milliseconds; an error for anything else, negatives, or more
// than kMaxDuration.
Result<Millis> parse_duration(std::string_view text);

}  // namespace ddprun::rdzv
