#include "agent/process/process_hygiene.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

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

int kill_adopted_children() {
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
  for (pid_t pid : children) {
    // Our own child: nobody else can reap it, so its pid cannot have been reused.
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  return static_cast<int>(children.size());
}

}  // namespace ddprun::agent
