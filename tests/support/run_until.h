// Runs an io_context until a condition holds, for tests: event-driven (the loop's own waits do
// the waking, in slices of at most 50 ms), never a sleep, always bounded.
#pragma once

#include <chrono>
#include <functional>

#include <boost/asio/io_context.hpp>

namespace ddprun::testing {

// Runs `io` until `done()` holds or `timeout` passes (restarting it when it runs out of work,
// so that handlers posted later still run). Returns done().
bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace ddprun::testing
