// Store traffic of torch's init_process_group, played by many clients at once against any
// TCPStore server (ddprun's, torch 2.x's libuv one, torch 1.13's): the store load generator
// (bench/store/store_load.cc) and the store's correctness test under it
// (tests/store/server_test.cc) share it. Each client, one rank of a world:
//   connect (from 127.0.0.N, N spread over 1..250); in the validated dialect (torch 2.x) the
//   VALIDATE handshake and a PING; SET its own key; ADD 1 to the shared counter, and the rank
//   that brings it to the world size SETs the "done" key; WAIT for it; GET it (must be "1");
//   then the final barrier: ADD to a second counter, the last SETs its key, every rank WAITs.
// A client is released when its final WAIT returns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "store/messages.h"

namespace ddprun::store::testing {

// One query, for encode_request (the store tests build theirs with it too).
Request make(Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {},
             int64_t delta = 0);

struct InitTrafficResult {
  int released = 0;
  int errors = 0;
  std::string first_error;   // of the first client that failed
  double first_connect = 0;  // wall clock (seconds since the epoch)
  double last_release = 0;
};

// Starts `count` clients (ranks first .. first + count - 1 of `world`) on `io` against
// 127.0.0.1:`port`; run `io` until it is out of work, then read `result` (which must outlive
// that run).
void start_init_traffic(boost::asio::io_context& io, uint16_t port, Dialect dialect, int64_t world,
                        int64_t first, int count, InitTrafficResult& result);

}  // namespace ddprun::store::testing
