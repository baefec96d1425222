// Runs one command and reports, on stdout, how long it took and (with --rss) the peak resident
// set size of that process alone, not of its children.
//
// usage: bench_run [--rss] [--quiet] -- <program> [args...]
//   prints "wall_ns <n>", "exit <code>" (128+signal when killed) and, with --rss,
//   "peak_rss_kb <n>".
//   --quiet: the command's stdout and stderr go to /dev/null.
//
// Peak RSS: ru_maxrss from wait4() covers the process and its waited-for descendants, so it
// would count the workers. Instead the command runs under ptrace with PTRACE_O_TRACEEXIT: at
// its exit stop its address space still exists, and /proc/<pid>/status VmHWM is the high-water
// mark of the launcher's own memory. Only the main thread is traced; signals are passed on.
// Timing runs do not use --rss (tracing adds a little overhead to signal delivery).
#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

namespace {

long long now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

long vm_hwm_kb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Follows a traced child to its end; records VmHWM at its exit stop.
int trace_to_exit(pid_t pid, long& peak_kb) {
  int status = 0;
  ::waitpid(pid, &status, 0);  // the child's own SIGSTOP, before exec
  ::ptrace(PTRACE_SETOPTIONS, pid, nullptr,
           PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
  ::ptrace(PTRACE_CONT, pid, nullptr, nullptr);
  for (;;) {
    if (::waitpid(pid, &status, 0) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) return status;
    if (!WIFSTOPPED(status)) continue;
    const int event = status >> 16;
    int deliver = 0;
    if (event == PTRACE_EVENT_EXIT) {
      peak_kb = vm_hwm_kb(pid);
    } else if (event == 0 && WSTOPSIG(status) != SIGTRAP) {
      deliver = WSTOPSIG(status);  // an ordinary signal: pass it on
    }
    ::ptrace(PTRACE_CONT, pid, nullptr, reinterpret_cast<void*>(static_cast<long>(deliver)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool rss = false, quiet = false;
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "--rss") == 0) rss = true;
    if (std::strcmp(argv[i], "--quiet") == 0) quiet = true;
  }
  if (i + 1 >= argc) {
    std::fprintf(stderr, "usage: bench_run [--rss] [--quiet] -- <program> [args...]\n");
    return 2;
  }
  char** command = argv + i + 1;
  const long long start = now_ns();
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("fork");
    return 1;
  }
  if (pid == 0) {
    if (quiet) {
      const int null_fd = ::open("/dev/null", O_WRONLY);
      ::dup2(null_fd, STDOUT_FILENO);
      ::dup2(null_fd, STDERR_FILENO);
    }
    if (rss) {
      ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
      ::raise(SIGSTOP);
    }
    ::execvp(command[0], command);
    ::_exit(127);
  }
  long peak_kb = -1;
  int status = 0;
  if (rss) {
    status = trace_to_exit(pid, peak_kb);
  } else {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  const long long elapsed = now_ns() - start;
  std::printf("wall_ns %lld\nexit %d\n", elapsed, exit_code(status));
  if (rss) std::printf("peak_rss_kb %ld\n", peak_kb);
  return 0;
}
