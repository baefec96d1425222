// Runs a program under test (ddprun, torchrun) as a child of the test: in its own process
// group, with a given argv, environment and working directory, its stdout and stderr captured
// through pipes. Waits are bounded by deadlines and event-driven (a pidfd and the pipes are
// polled; nothing sleeps). The child is SIGKILLed, with its process group, when the handle is
// destroyed before it has been reaped, so a failing test leaves nothing behind.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "common/posix_fd.h"
#include "common/result.h"
#include "tests/integration/deadline.h"

namespace ddprun::testing {

struct ChildOptions {
  std::string executable;                  // absolute path; also the child's argv[0]
  std::vector<std::string> args;           // argv[1..], passed verbatim
  std::map<std::string, std::string> env;  // the child's whole environment, nothing inherited
  std::string cwd;                         // working directory; empty: the test's own
};

// How the child ended.
struct ChildExit {
  int code = -1;   // exit status when it exited normally, else -1
  int signal = 0;  // the signal that killed it, else 0
};
std::ostream& operator<<(std::ostream& out, const ChildExit& exit);

// One child process. Not thread-safe: use it from the test's thread only (an internal reader
// thread collects the output; the accessors below synchronise with it).
class ChildProcess {
 public:
  // Forks and execs. The child gets stdin from /dev/null, every descriptor above 2 closed,
  // default signal dispositions, and SIGKILL as its parent-death signal (so it cannot outlive
  // a crashed test). Fails when fork or exec fails, naming the call.
  static Result<std::unique_ptr<ChildProcess>> start(const ChildOptions& options);

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // SIGKILLs the child's process group if the child has not been reaped yet, reaps it, and
  // stops the output reader. Blocks only until the SIGKILLed child is gone.
  ~ChildProcess();

  pid_t pid() const { return pid_; }

  // Sends `signo` to the child alone (not to its process group). No-op once it is reaped.
  void send_signal(int signo);

  // Waits until the child has exited and been reaped, then (within the same deadline) until
  // its stdout and stderr have reached end of file. Returns how it ended, or nullopt when it was
  // still running at the deadline. Once it has returned a value, returns it again.
  std::optional<ChildExit> wait(Deadline deadline);

  // Waits until the captured stdout (or stderr) contains `needle`; false at the deadline or when
  // the stream ended without it.
  bool wait_for_stdout(const std::string& needle, Deadline deadline);
  bool wait_for_stderr(const std::string& needle, Deadline deadline);

  // Everything captured so far.
  std::string stdout_text() const;
  std::string stderr_text() const;
  // True once both streams reached end of file (every holder of the pipes closed them).
  bool output_complete() const;

 private:
  ChildProcess() = default;
  void read_output();  // the reader thread's body
  bool wait_for_text(std::string ChildProcess::*stream, const std::string& needle,
                     Deadline deadline);

  pid_t pid_ = -1;
  UniqueFd pidfd_;        // readable once the child has exited
  UniqueFd stdout_read_;  // owned by the reader thread once it runs
  UniqueFd stderr_read_;
  UniqueFd stop_event_;            // eventfd: tells the reader thread to stop early
  std::optional<ChildExit> exit_;  // set once the child is reaped; pid_ is then stale

  mutable std::mutex mutex_;  // guards the fields below, written by the reader thread
  std::condition_variable changed_;
  std::string stdout_;
  std::string stderr_;
  bool output_done_ = false;  // both pipes at end of file (or the reader was stopped)
  std::thread reader_;        // joined by the destructor
};

// The current process's environment as a map.
std::map<std::string, std::string> current_environment();

}  // namespace ddprun::testing
