// Reading and writing whole frames on a connection's Stream (plain or TLS), shared by the server's
// sessions and the client. The length prefix is checked against CodecLimits before the body buffer
// is sized.
//
// These awaitables never throw: errors come back as Status. Deadlines are the caller's (a timer
// that closes the socket), so a stalled read ends with an "operation aborted" error.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange without it
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/log_coroutine_end.h"
#include "common/result.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/stream.h"

namespace ddprun::rdzv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// Reads one frame body (type byte + payload) into `body`, reusing its capacity. Errors: kind
// kMalformed for a header the limits refuse (the peer deserves an Error frame), kClosed when
// the connection ended or the read was cancelled, kRefused when TLS failed (an alert: the
// peer refused our certificate, or a record did not verify).
asio::awaitable<Status> read_frame(Stream& stream, const CodecLimits& limits,
                                   std::vector<uint8_t>& body);

// Sets TCP_NODELAY (frames are small and latency-bound) and close-on-exec on a new socket.
void configure_socket(tcp::socket& socket);

}  // namespace ddprun::rdzv
