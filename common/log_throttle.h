// Lets at most `burst` log lines through per `window` and counts the rest, so that a flood of
// bad clients (one retrying in a loop, or a port scan) cannot fill the disk with one line
// each. The next line let through says how many were held back.
#pragma once

#include <cstdint>

#include "common/clock.h"

namespace ddprun {

class LogThrottle {
 public:
  LogThrottle(uint32_t burst, Millis window) : burst_(burst), window_(window) {}

  // True when a line may be logged at `now`; `suppressed` is then the number held back since
  // the last line let through.
  bool allow(SteadyTime now, uint64_t& suppressed) {
    if (now - window_start_ >= window_) {
      window_start_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= burst_) {
      ++held_back_;
      return false;
    }
    ++in_window_;
    suppressed = held_back_;
    held_back_ = 0;
    return true;
  }

 private:
  const uint32_t burst_;
  const Millis window_;
  SteadyTime window_start_{};
  uint32_t in_window_ = 0;
  uint64_t held_back_ = 0;
};

}  // namespace ddprun
