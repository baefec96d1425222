#include "agent/process/process_hygiene.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/posix_fd.h"

namespace ddprun::agent {
namespace {

// The parent pid from /proc/<pid>/stat, or -1. The command name may hold spaces and
// parentheses, so fields are counted from the last ')'.
pid_t parent_of(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return -1;
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 4 > text.size()) return -1;
  // ") S <ppid> ..."
  return static_cast<pid_t>(std::strtol(text.c_str() + close + 4, nullptr, 10));
}

std::vector<pid_t> children_from_proc_scan(pid_t self) {
  std::vector<pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (!proc) return children;
  while (dirent* entry = ::readdir(proc)) {
    const std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (parent_of(name) == self) children.push_back(static_cast<pid_t>(std::stol(name)));
  }
  ::closedir(proc);
  return children;
}

// Reaps child `pid` (already SIGKILLed), waiting until `deadline` at most: a pidfd becomes
// readable when the process exits. Whether it was reaped (or is gone).
bool reap_before(pid_t pid, SteadyTime deadline) {
  int status = 0;
#ifdef SYS_pidfd_open
  const UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd.valid()) {
    for (;;) {
      const pid_t reaped = ::waitpid(pid, &status, WNOHANG);
      if (reaped == pid || (reaped < 0 && errno != EINTR)) return true;
      const auto left = std::chrono::ceil<Millis>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd wake{pidfd.get(), POLLIN, 0};
      (void)::poll(
          &wake, 1,
          static_cast<int>(std::min<long long>(left.count(), std::numeric_limits<int>::max())));
    }
  }
#endif
  // No pidfd (a kernel before 5.3): the wait is not bounded there.
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return true;
}

}  // namespace

void ensure_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1) {
      int null_fd = ::open("/dev/null", O_RDWR);  // lands on the lowest free number: `fd`
      (void)null_fd;
    }
  }
}

void become_child_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

int kill_adopted_children(Millis wait_bound, const std::vector<pid_t>& abandoned) {
  // Our children, from the kernel's list (one small file); the whole of /proc when the kernel
  // does not offer it. Every one of them is ours to end: the job is over.
  std::vector<pid_t> children;
  const pid_t self = ::getpid();
  std::ifstream list("/proc/self/task/" + std::to_string(self) + "/children");
  if (list) {
    for (pid_t pid; list >> pid;) children.push_back(pid);
  } else {
    children = children_from_proc_scan(self);
  }
  // Our own children: nobody else can reap them, so their pids cannot have been reused.
  for (pid_t pid : children) ::kill(pid, SIGKILL);
  const SteadyTime deadline = std::chrono::steady_clock::now() + wait_bound;
  for (pid_t pid : children) {
    if (std::find(abandoned.begin(), abandoned.end(), pid) != abandoned.end()) continue;
    if (!reap_before(pid, deadline)) {
      spdlog::warn("child pid {} did not exit {} s after SIGKILL; leaving it", pid,
                   std::chrono::duration<double>(wait_bound).count());
    }
  }
  return static_cast<int>(children.size());
}

}  // namespace ddprun::agent
