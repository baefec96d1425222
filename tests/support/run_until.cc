#include "tests/support/run_until.h"

#include <algorithm>

namespace ddprun::testing {

bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds timeout) {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(std::min<std::chrono::steady_clock::duration>(deadline - now, 50ms));
  }
  return true;
}

}  // namespace ddprun::testing
