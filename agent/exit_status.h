// How a process ended, decoded from a waitpid status.
#pragma once

#include <string>

namespace ddprun::agent {

struct ExitStatus {
  int code = 0;    // exit code when the process exited normally
  int signal = 0;  // signal number when it was killed by a signal (then `code` is unused)

  static ExitStatus from_wait_status(int wait_status);
  static ExitStatus exited(int code) { return {code, 0}; }
  static ExitStatus killed(int signal) { return {0, signal}; }

  bool success() const { return signal == 0 && code == 0; }
  // The shell's convention, which ddprun passes through: the exit code, or 128 + signal.
  int shell_code() const { return signal ? 128 + signal : code; }
  // torchrun's "exitcode" field: negative signal number for a signal.
  int torchrun_code() const { return signal ? -signal : code; }
};

// "SIGKILL" for 9; "signal 77" for numbers without a name.
std::string signal_name(int signo);
// Parses "SIGTERM", "TERM" or "15"; returns 0 when unknown.
int signal_from_name(const std::string& name);

}  // namespace ddprun::agent
