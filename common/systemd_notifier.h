// The systemd implementation of ServiceNotifier, over libsystemd's sd_notify(3) and
// sd_watchdog_enabled(3). Only the ddprun and ddp-rendezvous programs link it.
#pragma once

#include <memory>

#include "common/service_notifier.h"

namespace ddprun {

// Talks to the socket named by NOTIFY_SOCKET (a path, or "@name" for an abstract socket).
// The variables are read at each call, as libsystemd does; nothing is unset, so the program's
// own environment keeps them (workers get theirs without: see agent/worker_env.h).
class SystemdNotifier final : public ServiceNotifier {
 public:
  bool active() const override;
  void notify(std::string_view state) override;
  std::optional<std::chrono::microseconds> watchdog_timeout() const override;

 private:
  bool warned_ = false;  // a failing socket is reported once, not at every watchdog ping
};

// A SystemdNotifier when NOTIFY_SOCKET is set (the program runs as a Type=notify unit, or a
// test listens), else a NullServiceNotifier.
std::unique_ptr<ServiceNotifier> make_service_notifier();

}  // namespace ddprun
