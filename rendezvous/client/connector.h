// Connecting to a rendezvous server: deadline, exponential backoff with jitter, every
// attempt's error kept for the final message, then the handshake (client_handshake.h: TLS,
// Hello, the token's challenge-response).
//
// Agents start in any order, so "connection refused" is expected until the host node's server
// is up; the backoff keeps thousands of agents from hammering it in lockstep.
//
// Several servers (ddp-rendezvous replicas): each attempt goes to the next address in turn,
// and the backoff grows once per round through the list (with one address: after every
// attempt, as before). A replica that does not lead answers with a Redirect: the next attempt
// goes at once to the address it names (one redirect in a row; a redirect from there counts
// as a failed attempt). A Redirect naming no leader (an election under way) is a failed
// attempt. In a round through the list in which some replica answered with a Redirect, the
// backoff grows only to election_backoff.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>  // before Boost 1.74's awaitable.hpp (see frame_io.h)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "rendezvous/security/credentials.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/server_address.h"
#include "rendezvous/wire/stream.h"

namespace ddprun::rdzv {

struct ConnectOptions {
  // Tried in turn, from the first. At least one.
  std::vector<ServerAddress> servers;
  // Source address to bind before connecting ("" = the kernel's choice). Tests give each
  // simulated node its own 127.0.0.N.
  std::string local_address;
  std::string job_id;  // sent in Hello
  // Give up when this has passed since the first attempt. Default 600 s (join_timeout).
  Millis deadline{600'000};
  // One attempt (resolve + connect + handshake) may take at most this. Default 10 s.
  Millis attempt_timeout{10'000};
  // Wait before the second attempt; doubles up to max_backoff; each wait is scaled by a
  // random factor in [1 - jitter, 1 + jitter]. Defaults 100 ms, 3 s, 0.5.
  Millis initial_backoff{100};
  Millis max_backoff{3'000};
  // The most a wait grows to while replicas answer with Redirects (their leader has just died,
  // or an election is under way): the takeover is then seconds away, and a long wait would
  // outlast it. Default 250 ms.
  Millis election_backoff{250};
  double jitter = 0.5;
  CodecLimits limits;
  // Log what it is waiting for (connect_progress.h) as a warning: when the first attempt fails,
  // then at a growing interval. Default on.
  bool report_waiting = true;
  // Token and TLS; null = neither (plain TCP, no token).
  std::shared_ptr<const ClientCredentials> credentials;
  // End at the first attempt the server's kernel refuses (ECONNREFUSED: nothing listens at the
  // address), with kind kUnavailable, instead of retrying until the deadline. For a reconnect
  // after the server's side closed the connection, where the refusal means that its process is
  // gone (channel.h, "gone server"). Default off: at a first connect, a refusal only means that
  // the server is not up yet.
  bool stop_when_refused = false;
};

// An open, handshaken connection and the server it reached (an address from the list, or one a
// Redirect named).
struct Connection {
  Stream stream;
  ServerAddress server;
};

// Connects and completes the handshake. A refused handshake (kRefused: a wrong or missing
// token, a rejected certificate, a server that answers Hello with an Error) is a permanent
// failure, not retried, and its error keeps kind kRefused. The error of a failed connect
// says where it tried, how long, how many attempts, and what each kind of attempt hit.
// `stop` (may be null) is checked between attempts: a caller that closes stops the retries
// within one attempt or backoff.
boost::asio::awaitable<Result<Connection>> connect_with_backoff(
    boost::asio::any_io_executor executor, ConnectOptions options, std::mt19937_64& rng,
    const Clock& clock, std::shared_ptr<const bool> stop);

// True when `socket` is connected to itself: a connect to a port nobody listens on, from the
// server's own address, whose kernel-chosen local port happened to be that port (TCP's
// simultaneous open). connect_with_backoff treats it as a refused connection.
bool connected_to_itself(const boost::asio::ip::tcp::socket& socket);

}  // namespace ddprun::rdzv
