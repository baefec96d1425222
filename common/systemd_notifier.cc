#include "common/systemd_notifier.h"

#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

namespace ddprun {

bool SystemdNotifier::active() const {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  return socket && *socket;
}

void SystemdNotifier::notify(std::string_view state) {
  const int sent = ::sd_notify(/*unset_environment=*/0, std::string(state).c_str());
  if (sent < 0 && !warned_) {
    warned_ = true;  // the manager may be gone while we shut down: say it once
    spdlog::warn("cannot notify the service manager (NOTIFY_SOCKET={}): {}",
                 std::getenv("NOTIFY_SOCKET") ? std::getenv("NOTIFY_SOCKET") : "",
                 std::strerror(-sent));
  }
}

std::optional<std::chrono::microseconds> SystemdNotifier::watchdog_timeout() const {
  uint64_t usec = 0;
  // > 0: enabled for this process (WATCHDOG_USEC set, and WATCHDOG_PID is ours or unset).
  if (::sd_watchdog_enabled(/*unset_environment=*/0, &usec) > 0 && usec > 0) {
    return std::chrono::microseconds(usec);
  }
  return std::nullopt;
}

std::unique_ptr<ServiceNotifier> make_service_notifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket && *socket) return std::make_unique<SystemdNotifier>();
  return std::make_unique<NullServiceNotifier>();
}

}  // namespace ddprun
