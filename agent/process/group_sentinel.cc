#include "agent/process/group_sentinel.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <set>
#include <utility>

namespace ddprun::agent {
namespace {

// The sentinel's whole life. It ignores the signals a terminal or a job scheduler sends to the
// agent's process group: only the end of the pipe may end it.
[[noreturn]] void run_sentinel(int read_fd) {
  ::prctl(PR_SET_NAME, "ddprun-sentinel");  // how it shows in ps/top
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2})
    (void)::signal(sig, SIG_IGN);
  const int null_fd = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd <= 2; ++fd) ::dup2(null_fd, fd);
  // Only the pipe stays open: the sentinel must not keep any of the agent's files alive.
  if (read_fd > 3) ::syscall(SYS_close_range, 3u, static_cast<unsigned>(read_fd - 1), 0u);
  ::syscall(SYS_close_range, static_cast<unsigned>(read_fd + 1), ~0u, 0u);
  std::set<pid_t> groups;
  int32_t record = 0;
  for (;;) {
    const ssize_t n = ::read(read_fd, &record, sizeof record);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof record)) break;  // EOF: the agent is gone
    if (record > 0) groups.insert(record);
    if (record < 0) groups.erase(-record);
  }
  for (pid_t pgid : groups) ::kill(-pgid, SIGKILL);
  ::_exit(0);
}

}  // namespace

Result<GroupSentinel> GroupSentinel::start() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    return Status::error(std::string("sentinel pipe: ") + std::strerror(errno));
  }
  UniqueFd read_end(p[0]), write_end(p[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::error(std::string("fork of the sentinel: ") + std::strerror(errno));
  if (pid == 0) {
    write_end.reset();
    run_sentinel(read_end.get());
  }
  return GroupSentinel(std::move(write_end), pid);
}

GroupSentinel::~GroupSentinel() {
  if (pid_ <= 0) return;
  pipe_.reset();
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void GroupSentinel::watch(pid_t pgid) { send(static_cast<int32_t>(pgid)); }
void GroupSentinel::forget(pid_t pgid) { send(-static_cast<int32_t>(pgid)); }

void GroupSentinel::send(int32_t record) {
  if (!pipe_.valid()) return;  // released
  // 4 bytes: atomic on a pipe. The sentinel reads as fast as workers start, so the pipe never
  // fills; were it gone, losing the record only loses this safety net.
  ssize_t n;
  do {
    n = ::write(pipe_.get(), &record, sizeof record);
  } while (n < 0 && errno == EINTR);
}

}  // namespace ddprun::agent
