// How a process ended, decoded from a waitpid status.
#pragma once

#include <string>

namespace ddprun::agent {

struct ExitStatus {
  int code = 0;    // exit code when the process exited normally
  int signal = 0;  // signal number when it was killed (or stopped) by a signal
  // The process did not end: `signal` stopped it (waitpid's WUNTRACED). A worker stopped by job
  // control (SIGTTIN reading the terminal, SIGTTOU, SIGTSTP) would hold the job forever, so
  // the agent treats it as failed, with this status.
  bool stopped = false;

  static ExitStatus from_wait_status(int wait_status);
  static ExitStatus exited(int code) { return {code, 0, false}; }
  static ExitStatus killed(int signal) { return {0, signal, false}; }
  static ExitStatus stopped_by(int signal) { return {0, signal, true}; }

  bool success() const { return signal == 0 && code == 0; }
  // The shell's convention, which ddprun passes through: the exit code, or 128 + signal.
  int shell_code() const { return signal ? 128 + signal : code; }
  // torchrun's "exitcode" field: negative signal number for a signal.
  int torchrun_code() const { return signal ? -signal : code; }
};

// Whether `signo` is a job-control stop (SIGTTIN, SIGTTOU, SIGTSTP), which nobody sends to a
// worker on purpose, as opposed to SIGSTOP (a debugger, an operator pausing it).
bool is_job_control_stop(int signo);

// "SIGKILL" for 9; "signal 77" for numbers without a name.
std::string signal_name(int signo);
// Parses "SIGTERM", "TERM" or "15"; returns 0 when unknown.
int signal_from_name(const std::string& name);

}  // namespace ddprun::agent
