// Test support for servers out of file descriptors: fill this process's descriptor table, and
// read the CPU time the process has used against the wall time (a server that spins on a
// failing accept burns a core; one that sheds and rests does not).
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

// The CPU time this process used since construction, as a share of the wall time that passed.
// A server thread spinning on a failing accept is on the CPU whenever the scheduler lets it:
// its share is 1 on an idle core, and about cores / runnable threads on a busy machine (0.25 at
// a load of 7 to 10 on 2 cores, measured); one that sheds and rests uses 1-2% (measured there
// too), its work between rests. A load on the machine only lengthens a resting server's wall time,
// so a bound of 0.1 on the share cannot fail a correct server however busy the machine: a
// correctness bound, not a timing one (a spinning one escapes it only on a machine
// oversubscribed more than ten times).
class CpuShare {
 public:
  CpuShare() : cpu_(process_cpu_time()), wall_(std::chrono::steady_clock::now()) {}
  double of_elapsed() const {
    const std::chrono::duration<double> cpu = process_cpu_time() - cpu_;
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - wall_;
    return wall.count() > 0 ? cpu.count() / wall.count() : 0.0;
  }

 private:
  std::chrono::microseconds cpu_;
  std::chrono::steady_clock::time_point wall_;
};

}  // namespace ddprun::testing
