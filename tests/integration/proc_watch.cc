#include "tests/integration/proc_watch.h"

#include <dirent.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "common/posix_fd.h"

namespace ddprun::testing {
namespace {

struct StatFields {
  char state = 0;
  pid_t ppid = -1;
};

// /proc/<pid>/stat: "pid (comm) S ppid ...". The command may hold spaces and parentheses, so
// fields are counted from the last ')'.
StatFields read_stat(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string text;
  if (!std::getline(in, text)) return {};
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 4 > text.size()) return {};
  StatFields fields;
  fields.state = text[close + 2];
  fields.ppid = static_cast<pid_t>(std::strtol(text.c_str() + close + 4, nullptr, 10));
  return fields;
}

}  // namespace

char process_state(pid_t pid) { return read_stat(std::to_string(pid)).state; }

bool is_process_alive(pid_t pid) {
  const char state = process_state(pid);
  return state != 0 && state != 'Z' && state != 'X';
}

bool wait_for_process_exit(pid_t pid, Deadline deadline) {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) return errno == ESRCH || !is_process_alive(pid);
  pollfd p{pidfd.get(), POLLIN, 0};
  for (;;) {
    const int ready = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (ready > 0) return true;
    if (ready == 0) return !is_process_alive(pid);
    if (errno != EINTR) return !is_process_alive(pid);
  }
}

bool wait_until_reaped(pid_t pid, Deadline deadline) {
  for (;;) {
    if (process_state(pid) == 0) return true;
    if (TestClock::now() >= deadline) return false;
    // No event exists for "another process reaped this pid" (a pidfd fires at exit, not at
    // reap), so re-read /proc at a short, bounded interval.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (!proc) return children;
  while (dirent* entry = ::readdir(proc)) {
    const std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (read_stat(name).ppid == parent) {
      children.push_back(static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10)));
    }
  }
  ::closedir(proc);
  return children;
}

void become_child_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

AdoptedChildren kill_adopted_children() {
  AdoptedChildren found;
  for (pid_t pid : children_of(::getpid())) {
    if (is_process_alive(pid)) {
      found.alive.push_back(pid);
      ::kill(pid, SIGKILL);
    } else {
      found.zombies.push_back(pid);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return found;
}

}  // namespace ddprun::testing
