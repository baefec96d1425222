// A small HTTP/1.1 client for tests (Boost.Beast): one request per connection, every step
// bounded by a deadline, errors as values. Also raw exchanges (bytes in, everything the server
// sends until it closes) for malformed requests. Loopback only in tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/result.h"

namespace ddprun::testing {

struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string allow;  // the Allow header, if any
  std::string body;
};

// GET http://<host>:<port><target>. Fails (kTimedOut) when no whole reply came within
// `timeout`, or with the connection's error.
Result<HttpReply> http_get(const std::string& host, uint16_t port, const std::string& target,
                           std::chrono::milliseconds timeout = std::chrono::seconds(5));

// Connects, writes `request` as is, and returns everything read until the server closes the
// connection. Fails (kTimedOut) when the server has not closed it within `timeout`.
Result<std::string> raw_exchange(const std::string& host, uint16_t port, const std::string& request,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(5));

// The status code of a raw HTTP reply ("HTTP/1.1 404 Not Found..." → 404); 0 when none.
int status_of(const std::string& raw_reply);

}  // namespace ddprun::testing
