// A ServiceNotifier for tests: keeps every message, with a watchdog timeout of the test's
// choosing.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/service_notifier.h"

namespace ddprun::testing {

class RecordingNotifier final : public ServiceNotifier {
 public:
  explicit RecordingNotifier(std::optional<std::chrono::microseconds> watchdog = std::nullopt)
      : watchdog_(watchdog) {}
  bool active() const override { return true; }
  void notify(std::string_view state) override { messages.emplace_back(state); }
  std::optional<std::chrono::microseconds> watchdog_timeout() const override { return watchdog_; }

  // The messages other than WATCHDOG=1, in order.
  std::vector<std::string> without_pings() const {
    std::vector<std::string> out;
    for (const auto& m : messages) {
      if (m != "WATCHDOG=1") out.push_back(m);
    }
    return out;
  }
  int pings() const {
    int n = 0;
    for (const auto& m : messages) n += m == "WATCHDOG=1";
    return n;
  }

  std::vector<std::string> messages;

 private:
  std::optional<std::chrono::microseconds> watchdog_;
};

}  // namespace ddprun::testing
