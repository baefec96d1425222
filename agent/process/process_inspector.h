// What the kernel says of a process that would not end: its state, where it waits in the kernel
// and its command line, behind an interface so that the agent's handling of a worker that
// survives SIGKILL is tested with a fake (a real unkillable process cannot be made in a test).
#pragma once

#include <sys/types.h>

#include <string>

namespace ddprun::agent {

// One look at a process. A field that could not be read is empty.
struct ProcessSnapshot {
  std::string state;    // from /proc/PID/stat, as the kernel names it: "D (disk sleep)"
  std::string wchan;    // /proc/PID/wchan: the kernel function it waits in; empty when not known
  std::string command;  // /proc/PID/cmdline, arguments joined by spaces: "python -u train.py"

  // "state D (disk sleep), waiting in nfs_wait_on_request, command python -u train.py"; a
  // missing field says so ("state unknown", "wait channel unknown", "command unknown").
  std::string describe() const;
};

// The line that names a worker given up on after SIGKILL: "worker pid 1234 (local_rank 1) did
// not exit 30 s after SIGKILL: state D (disk sleep), waiting in nfs_wait_on_request, command
// python -u train.py".
std::string describe_unkillable(pid_t pid, int local_rank, double waited_seconds,
                                const ProcessSnapshot& snapshot);

// Thread-safety: inspect() may be called from any thread; it does not block on the process.
class ProcessInspector {
 public:
  virtual ~ProcessInspector() = default;
  virtual ProcessSnapshot inspect(pid_t pid) const = 0;
};

// Reads /proc. A process that is gone, or a file the kernel hides (wchan under kptr_restrict),
// leaves its field empty.
class ProcInspector final : public ProcessInspector {
 public:
  ProcessSnapshot inspect(pid_t pid) const override;
};

// The state field of a /proc/PID/stat line with the kernel's name for it ("D" -> "D (disk
// sleep)"); empty when the line is not one. The command name may hold spaces and parentheses:
// fields are counted from the last ')'.
std::string state_from_stat(const std::string& stat_line);
// /proc/PID/cmdline's NUL-separated arguments, joined by spaces (a trailing NUL dropped).
std::string command_from_cmdline(const std::string& cmdline);
// /proc/PID/wchan as a name: "0" (not waiting, or hidden) and blanks are empty.
std::string wchan_name(const std::string& wchan);

}  // namespace ddprun::agent
