// Test support for servers out of file descriptors: fill this process's descriptor table, and
// read the CPU time the process has used (a server that spins on a failing accept burns a
// core; one that sheds and rests does not).
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
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

// User plus system CPU time this process (every thread) has used.
inline std::chrono::microseconds process_cpu_time() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto us = [](const timeval& t) { return t.tv_sec * 1'000'000L + t.tv_usec; };
  return std::chrono::microseconds(us(usage.ru_utime) + us(usage.ru_stime));
}

}  // namespace ddprun::testing
