// The systemd implementation of ServiceNotifier, over libsystemd's sd_notify(3) and
// sd_watchdog_enabled(3). Only the ddprun and ddp-rendezvous programs use it.
//
// libsystemd is loaded when a notifier is made, i.e. only when NOTIFY_SOCKET is set: linked
// in, it would map six more shared libraries (libgcrypt, liblzma, libzstd, ...) into every
// ddprun, about 1 MB of the agent's RSS, for the many runs that no service manager watches.
#pragma once

#include <memory>

#include "common/result.h"
#include "common/service_notifier.h"

namespace ddprun {

// Talks to the socket named by NOTIFY_SOCKET (a path, or "@name" for an abstract socket).
// The variables are read at each call, as libsystemd does; nothing is unset, so the program's
// own environment keeps them (workers get theirs without: see agent/process/worker_env.h).
class SystemdNotifier final : public ServiceNotifier {
 public:
  // Loads libsystemd (`library`: its soname, another name only in tests); an error names the
  // library and dlopen's reason, or the missing function.
  static Result<std::unique_ptr<SystemdNotifier>> load(const char* library = kLibrary);
  static constexpr const char* kLibrary = "libsystemd.so.0";

  bool active() const override;
  void notify(std::string_view state) override;
  std::optional<std::chrono::microseconds> watchdog_timeout() const override;

 private:
  using NotifyFn = int (*)(int, const char*);
  using WatchdogFn = int (*)(int, uint64_t*);
  SystemdNotifier(NotifyFn notify, WatchdogFn watchdog)
      : sd_notify_(notify), sd_watchdog_enabled_(watchdog) {}

  NotifyFn sd_notify_;
  WatchdogFn sd_watchdog_enabled_;
  bool warned_ = false;  // a failing socket is reported once, not at every watchdog ping
};

// A SystemdNotifier when NOTIFY_SOCKET is set (the program runs as a Type=notify unit, or a
// test listens), else a NullServiceNotifier; also the null one, with a warning, when
// libsystemd cannot be loaded.
std::unique_ptr<ServiceNotifier> make_service_notifier();

}  // namespace ddprun
