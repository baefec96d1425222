// The physical floor of a launcher's reactions: the least a supervisor can do. Starts N
// workers (each in its own process group, like ddprun), blocks in waitpid(), and on the first
// failure SIGTERMs every other worker's group at once; when all are gone, starts N new workers
// with TORCHELASTIC_RESTART_COUNT=1 and waits for them. No event loop, no output routing, no
// report, no port reservation: what is left is fork/exec, signal delivery and scheduling.
//
// usage: supervise_floor <n> <worker>   (the worker is stamp_worker; BENCH_OUT is inherited)
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern char** environ;  // NOLINT: POSIX

namespace {

// Starts `n` workers for restart `restart`; returns their pids (== their process groups).
std::vector<pid_t> start_group(int n, const char* worker, int restart) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < n; ++rank) {
    // Built before fork: the child only execs.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
    env_strings.push_back("LOCAL_RANK=" + std::to_string(rank));
    env_strings.push_back("LOCAL_WORLD_SIZE=" + std::to_string(n));
    env_strings.push_back("TORCHELASTIC_RESTART_COUNT=" + std::to_string(restart));
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    char* argv[] = {const_cast<char*>(worker), nullptr};
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      std::exit(1);
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      ::execve(worker, argv, envp.data());
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    pids.push_back(pid);
  }
  return pids;
}

// Waits for every worker; on the first failure, SIGTERMs the others' groups. True if none
// failed.
bool supervise(std::vector<pid_t> running) {
  bool failed = false;
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    std::erase(running, pid);
    if (!failed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      failed = true;
      for (pid_t other : running) ::kill(-other, SIGTERM);
    }
  }
  return !failed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: supervise_floor <n> <worker>\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  if (supervise(start_group(n, argv[2], 0))) return 0;  // nothing failed: nothing to restart
  return supervise(start_group(n, argv[2], 1)) ? 0 : 1;
}
