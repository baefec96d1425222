// The physical floor of launching N processes: fork/exec N copies of a program, then wait for
// all of them. No pipes, no environment work, no supervision.
//
// usage: fork_floor <n> <program> [args...]
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fork_floor <n> <program> [args...]\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      ::execv(argv[2], argv + 2);
      ::_exit(127);
    }
  }
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    int status = 0;
    if (::wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed == 0 ? 0 : 1;
}
