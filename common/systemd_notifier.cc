#include "common/systemd_notifier.h"

#include <dlfcn.h>
#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include <spdlog/spdlog.h>

namespace ddprun {

// The prototypes this file calls through must be libsystemd's.
static_assert(std::is_same_v<decltype(&::sd_notify), int (*)(int, const char*)>);
static_assert(std::is_same_v<decltype(&::sd_watchdog_enabled), int (*)(int, uint64_t*)>);

Result<std::unique_ptr<SystemdNotifier>> SystemdNotifier::load(const char* library) {
  // Kept loaded for the life of the process: the notifier's functions live in it.
  void* handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    return Status::unavailable(std::string("cannot load ") + library + ": " + ::dlerror());
  }
  auto notify = reinterpret_cast<NotifyFn>(::dlsym(handle, "sd_notify"));
  auto watchdog = reinterpret_cast<WatchdogFn>(::dlsym(handle, "sd_watchdog_enabled"));
  if (!notify || !watchdog) {
    ::dlclose(handle);
    return Status::unavailable(std::string(library) + " lacks sd_notify or sd_watchdog_enabled");
  }
  return std::unique_ptr<SystemdNotifier>(new SystemdNotifier(notify, watchdog));
}

bool SystemdNotifier::active() const {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  return socket && *socket;
}

void SystemdNotifier::notify(std::string_view state) {
  const int sent = sd_notify_(/*unset_environment=*/0, std::string(state).c_str());
  if (sent < 0 && !warned_) {
    warned_ = true;  // the manager may be gone while we shut down: say it once
    const char* socket = std::getenv("NOTIFY_SOCKET");
    spdlog::warn("cannot notify the service manager (NOTIFY_SOCKET={}): {}", socket ? socket : "",
                 std::strerror(-sent));
  }
}

std::optional<std::chrono::microseconds> SystemdNotifier::watchdog_timeout() const {
  uint64_t usec = 0;
  // > 0: enabled for this process (WATCHDOG_USEC set, and WATCHDOG_PID is ours or unset).
  if (sd_watchdog_enabled_(/*unset_environment=*/0, &usec) > 0 && usec > 0) {
    return std::chrono::microseconds(usec);
  }
  return std::nullopt;
}

std::unique_ptr<ServiceNotifier> make_service_notifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (!socket || !*socket) return std::make_unique<NullServiceNotifier>();
  auto notifier = SystemdNotifier::load();
  if (!notifier) {
    spdlog::warn("NOTIFY_SOCKET is set, but {}: the service manager hears nothing",
                 notifier.error_message());
    return std::make_unique<NullServiceNotifier>();
  }
  return std::move(notifier.value());
}

}  // namespace ddprun
