#include "agent/process/exit_status.h"

#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

namespace ddprun::agent {

ExitStatus ExitStatus::from_wait_status(int wait_status) {
  if (WIFSTOPPED(wait_status)) return stopped_by(WSTOPSIG(wait_status));
  if (WIFSIGNALED(wait_status)) return killed(WTERMSIG(wait_status));
  return exited(WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 1);
}

bool is_job_control_stop(int signo) {
  return signo == SIGTTIN || signo == SIGTTOU || signo == SIGTSTP;
}

std::string signal_name(int signo) {
  const char* abbrev = sigabbrev_np(signo);  // glibc >= 2.32
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

int signal_from_name(const std::string& name) {
  if (name.empty()) return 0;
  char* end = nullptr;
  long number = std::strtol(name.c_str(), &end, 10);
  if (*end == '\0') return (number > 0 && number < NSIG) ? static_cast<int>(number) : 0;
  std::string bare = name.rfind("SIG", 0) == 0 ? name.substr(3) : name;
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev && bare == abbrev) return sig;
  }
  return 0;
}

}  // namespace ddprun::agent
