// How a long-running program (the ddprun agent, the ddp-rendezvous daemon) tells its service
// manager how it is doing: systemd's notify protocol (sd_notify(3)). The interface lives here,
// with a no-op implementation; the real one, which loads libsystemd when NOTIFY_SOCKET is set,
// is in systemd_notifier.h, so that only the two programs carry it.
//
// Messages are newline-separated assignments, sent as one datagram each:
//   READY=1        start-up is done (the daemon listens; the agent's first workers run)
//   STATUS=<text>  one line for `systemctl status`
//   WATCHDOG=1     the event loop is alive (see service_watchdog.h)
//   STOPPING=1     shutting down
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun {

class ServiceNotifier {
 public:
  virtual ~ServiceNotifier() = default;

  // Whether messages reach a service manager at all (systemd: NOTIFY_SOCKET was set).
  virtual bool active() const = 0;
  // Sends `state` as one message. Never blocks for long (a datagram on a local socket), never
  // throws; a failure is logged once and otherwise ignored: the service keeps running.
  virtual void notify(std::string_view state) = 0;
  // The watchdog timeout the manager enforces on this process (systemd: WATCHDOG_USEC, for
  // this pid when WATCHDOG_PID is set); nullopt when there is no watchdog.
  virtual std::optional<std::chrono::microseconds> watchdog_timeout() const = 0;

  // The messages, built by the helpers below.
  void ready(std::string_view status_line) { notify(ready_message(status_line)); }
  void status(std::string_view line) { notify(status_message(line)); }
  void watchdog() { notify("WATCHDOG=1"); }
  void stopping() { notify("STOPPING=1"); }

  // "STATUS=<line>", the line made safe: one line (newlines and other control characters
  // become spaces) of at most kMaxStatusBytes bytes.
  static std::string status_message(std::string_view line);
  // "READY=1\nSTATUS=<line>" (just "READY=1" for an empty line).
  static std::string ready_message(std::string_view status_line);
  static constexpr std::size_t kMaxStatusBytes = 512;
};

// Sends nothing: the program is not run by a service manager.
class NullServiceNotifier final : public ServiceNotifier {
 public:
  bool active() const override { return false; }
  void notify(std::string_view) override {}
  std::optional<std::chrono::microseconds> watchdog_timeout() const override {
    return std::nullopt;
  }
};

}  // namespace ddprun
