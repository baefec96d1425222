// Descriptor and child hygiene for the agent process (see agent.h).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

#include "agent/agent.h"

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

}  // namespace

void ensure_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1) {
      int null_fd = ::open("/dev/null", O_RDWR);  // lands on the lowest free number: `fd`
      (void)null_fd;
    }
  }
}

int kill_adopted_children() {
  // No child at all (the usual end of a job): nothing to look for in /proc.
  int status = 0;
  if (::waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD) return 0;
  const pid_t self = ::getpid();
  int killed = 0;
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  while (dirent* entry = ::readdir(proc)) {
    const std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (parent_of(name) != self) continue;
    // Our own child: it cannot be reaped by anyone else, so its pid is safe to signal.
    const pid_t pid = static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ++killed;
  }
  ::closedir(proc);
  return killed;
}

}  // namespace ddprun::agent
