// Test support for servers out of file descriptors: fill this process's descriptor table, and
// bound how often a server that rests between failing accepts can have tried (one that spins
// on a failing accept tries thousands of times as often).
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddprun::testing {

// While it lives, every descriptor this process may open is taken: the soft RLIMIT_NOFILE is
// lowered to `headroom` above the descriptors open now (so that filling is quick), then
// /dev/null is opened until EMFILE. Make the sockets the test needs before, connect them after
// (connect takes no descriptor). The destructor closes them and restores the limit.
class DescriptorExhaustion {
 public:
  explicit DescriptorExhaustion(rlim_t headroom = 64) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit low = saved_;
    low.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, highest_open() + 1 + headroom);
    ::setrlimit(RLIMIT_NOFILE, &low);
    for (;;) {
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      held_.push_back(fd);
    }
  }
  ~DescriptorExhaustion() {
    for (int fd : held_) ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  DescriptorExhaustion(const DescriptorExhaustion&) = delete;
  DescriptorExhaustion& operator=(const DescriptorExhaustion&) = delete;

  // True when the table is full (the last open failed with EMFILE).
  bool full() const {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    return fd < 0 && errno == EMFILE;
  }

 private:
  static rlim_t highest_open() {
    rlim_t highest = 0;
    for (int fd = 0; fd < 65'536; ++fd) {
      if (::fcntl(fd, F_GETFD) >= 0) highest = static_cast<rlim_t>(fd);
    }
    return highest;
  }

  rlimit saved_{};
  std::vector<int> held_;
};

// The most accepts a server can have tried, on `sockets` accepting sockets, in `wall` while
// out of descriptors, if each accept that fails for lack of one is followed by a rest of
// `pause`: per socket, one at once and one after each whole rest (timers never fire early, so
// no load on the machine can raise it). A loop that retried accept at once would try
// thousands of times in the same wall time. Measure `wall` from before the first reading of
// the count to after the last.
inline uint64_t most_resting_accepts(std::chrono::steady_clock::duration wall,
                                     std::chrono::milliseconds pause, size_t sockets) {
  const auto rests = static_cast<uint64_t>(wall / pause);
  return sockets * (rests + 1);
}

}  // namespace ddprun::testing
