// The service manager's end of the notify protocol, for tests: a unix datagram socket bound in
// the test's temp dir, whose path the program under test gets as NOTIFY_SOCKET (as systemd
// would give it). Every message received is kept, in order. No systemd needed.
//
// A thread reads the socket all the time, as systemd does: a unix datagram socket queues only
// net.unix.max_dgram_qlen (10) messages, and libsystemd's sd_notify blocks when the queue is
// full, so a test that waited for ddprun to exit without reading would stall the agent on its
// next status line or watchdog ping (seen under load: the agent blocked in sendmsg until the
// test's deadline). The thread keeps what it reads in a queue of its own; the test takes
// messages from it with wait_for() and drain(), as it would from the socket.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/posix_fd.h"
#include "tests/integration/deadline.h"

namespace ddprun::testing {

class NotifyListener {
 public:
  // Binds `path` (under 108 bytes); a failure to bind fails the test.
  explicit NotifyListener(std::string path);
  ~NotifyListener();
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  const std::string& path() const { return path_; }

  // Takes messages until one for which `done` is true has arrived (true), or the deadline
  // (false). Event-driven: waits on the reading thread.
  bool wait_for(const std::function<bool(const std::string&)>& done, Deadline deadline);
  // Takes every message sent so far (once the sender has exited, that is all it sent): the
  // reading thread first finds the socket empty.
  void drain();

  // The messages taken so far (by wait_for and drain), in order.
  const std::vector<std::string>& messages() const { return messages_; }
  // The messages other than WATCHDOG=1, and how many WATCHDOG=1 there were.
  std::vector<std::string> without_pings() const;
  int pings() const;
  // Index of the first message that starts with `prefix`; -1 when none does.
  int find(const std::string& prefix) const;
  // Every message, one per line, for failure messages.
  std::string dump() const;

 private:
  void read_socket();
  bool receive_one();  // one datagram if one is queued (the reading thread's)

  std::string path_;
  UniqueFd socket_;
  // A pipe that wakes the reading thread: 'd' for a drain() request, 's' to stop.
  UniqueFd wake_read_, wake_write_;
  std::vector<std::string> messages_;  // the test's thread only

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> arrived_;   // read, not yet taken
  uint64_t drain_requests_ = 0;       // drain() calls so far
  uint64_t empty_after_request_ = 0;  // the last request after which the socket was found empty
  bool wake_failed_ = false;          // the reading thread ended on an error
  std::thread reader_;
};

}  // namespace ddprun::testing
