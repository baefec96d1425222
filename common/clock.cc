#include "common/clock.h"

#include <ctime>

namespace ddprun {

const SystemClock& SystemClock::instance() {
  static const SystemClock clock;
  return clock;
}

std::string format_report_time(WallTime t) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm local{};
  localtime_r(&seconds, &local);
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%d_%H:%M:%S", &local) == 0) return "?";
  return buf;
}

}  // namespace ddprun
