// Time sources behind a narrow interface so that state machines are tested on a fake clock.
#pragma once

#include <chrono>
#include <string>

namespace ddprun {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;
using Millis = std::chrono::milliseconds;

// Thread-safety: implementations must be safe to call from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time, for deadlines and durations.
  virtual SteadyTime steady_now() const = 0;
  // Calendar time, for reports and logs.
  virtual WallTime wall_now() const = 0;
};

class SystemClock final : public Clock {
 public:
  SteadyTime steady_now() const override { return std::chrono::steady_clock::now(); }
  WallTime wall_now() const override { return std::chrono::system_clock::now(); }
  // A process-wide instance.
  static const SystemClock& instance();
};

// A clock that moves only when told to. Not thread-safe: for single-threaded tests.
class FakeClock final : public Clock {
 public:
  SteadyTime steady_now() const override { return steady_; }
  WallTime wall_now() const override { return wall_; }
  void advance(std::chrono::nanoseconds by) {
    steady_ += by;
    wall_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(by);
  }

 private:
  SteadyTime steady_{std::chrono::hours(1)};
  WallTime wall_{std::chrono::sys_days{std::chrono::year{2026} / 1 / 1}};
};

// "2026-01-01_12:34:56", local time: the timestamp format of torchrun's failure report.
std::string format_report_time(WallTime t);

}  // namespace ddprun
