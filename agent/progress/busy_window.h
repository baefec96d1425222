// One rank's busy time per step over its last steps (heartbeat_watcher.h, `step busy_s`): the
// mean of the last kBusyWindowSteps reports, so that one slow step (a checkpoint, a page fault)
// does not make a straggler and a rank that turns slow is seen within a few steps. O(1) per
// report; no allocation after construction.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>

namespace ddprun::agent {

inline constexpr std::size_t kBusyWindowSteps = 20;

class BusyWindow {
 public:
  void add(std::chrono::microseconds busy) {
    sum_ += busy - samples_[next_];
    samples_[next_] = busy;
    next_ = (next_ + 1) % samples_.size();
    if (count_ < samples_.size()) ++count_;
  }
  // The mean of the reports in the window; nullopt before the first.
  std::optional<std::chrono::microseconds> mean() const {
    if (count_ == 0) return std::nullopt;
    return sum_ / static_cast<std::chrono::microseconds::rep>(count_);
  }

 private:
  std::array<std::chrono::microseconds, kBusyWindowSteps> samples_{};
  std::chrono::microseconds sum_{0};
  std::size_t next_ = 0;
  std::size_t count_ = 0;
};

}  // namespace ddprun::agent
