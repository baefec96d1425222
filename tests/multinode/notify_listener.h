// The service manager's end of the notify protocol, for tests: a unix datagram socket bound in
// the test's temp dir, whose path the program under test gets as NOTIFY_SOCKET (as systemd
// would give it). Every message received is kept, in order. No systemd needed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/posix_fd.h"
#include "tests/integration/deadline.h"

namespace ddprun::testing {

class NotifyListener {
 public:
  // Binds `path` (under 108 bytes); a failure to bind fails the test.
  explicit NotifyListener(std::string path);

  const std::string& path() const { return path_; }

  // Receives until a message for which `done` is true has arrived (true), or the deadline
  // (false). Event-driven: poll on the socket.
  bool wait_for(const std::function<bool(const std::string&)>& done, Deadline deadline);
  // Takes every message already queued, without waiting (once the sender has exited, that is
  // all it sent).
  void drain();

  const std::vector<std::string>& messages() const { return messages_; }
  // The messages other than WATCHDOG=1, and how many WATCHDOG=1 there were.
  std::vector<std::string> without_pings() const;
  int pings() const;
  // Index of the first message that starts with `prefix`; -1 when none does.
  int find(const std::string& prefix) const;
  // Every message, one per line, for failure messages.
  std::string dump() const;

 private:
  bool receive_one(int timeout_ms);

  std::string path_;
  UniqueFd socket_;
  std::vector<std::string> messages_;
};

}  // namespace ddprun::testing
