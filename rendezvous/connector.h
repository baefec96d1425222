// Connecting to a rendezvous server: deadline, exponential backoff with jitter, every
// attempt's error kept for the final message, then the handshake (client_handshake.h: TLS,
// Hello, the token's challenge-response).
//
// Agents start in any order, so "connection refused" is expected until the host node's server
// is up; the backoff keeps thousands of agents from hammering it in lockstep.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>  // before Boost 1.74's awaitable.hpp (see frame_io.h)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "rendezvous/codec.h"
#include "rendezvous/security/credentials.h"
#include "rendezvous/stream.h"

namespace ddprun::rdzv {

struct ConnectOptions {
  std::string host;  // IP literal or host name
  uint16_t port = 29400;
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
  double jitter = 0.5;
  CodecLimits limits;
  // Token and TLS; null = neither (plain TCP, no token).
  std::shared_ptr<const ClientCredentials> credentials;
};

// Connects and completes the handshake. A refused handshake (kRefused: a wrong or missing
// token, a rejected certificate, a server that answers Hello with an Error) is a permanent
// failure, not retried, and its error keeps kind kRefused. The error of a failed connect
// says where it tried, how long, how many attempts, and what each kind of attempt hit.
// `stop` (may be null) is checked between attempts: a caller that closes stops the retries
// within one attempt or backoff.
boost::asio::awaitable<Result<Stream>> connect_with_backoff(boost::asio::any_io_executor executor,
                                                            ConnectOptions options,
                                                            std::mt19937_64& rng,
                                                            std::shared_ptr<const bool> stop);

}  // namespace ddprun::rdzv
