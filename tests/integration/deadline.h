// Deadlines for the integration tests: every wait in tests/integration takes one.
#pragma once

#include <chrono>

namespace ddprun::testing {

using TestClock = std::chrono::steady_clock;
using Deadline = TestClock::time_point;

inline Deadline deadline_after(std::chrono::milliseconds timeout) {
  return TestClock::now() + timeout;
}

// Milliseconds left until `deadline`, for poll(): 0 once it has passed, never negative.
inline int poll_timeout_ms(Deadline deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - TestClock::now()).count();
  // Rounded up by one so that a wait never returns just before its deadline and spins.
  return left <= 0 ? 0 : static_cast<int>(left + 1);
}

}  // namespace ddprun::testing
