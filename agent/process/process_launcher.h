// Starting and signalling worker processes, behind an interface so that the worker-group state
// machine is unit-tested with a fake (no fork in unit tests).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "agent/process/exit_status.h"
#include "agent/process/group_sentinel.h"
#include "common/clock.h"
#include "common/posix_fd.h"
#include "common/result.h"

namespace ddprun::agent {

// Where a child's stdout or stderr goes.
struct StdioTarget {
  enum class Kind {
    kInherit,  // the agent's own descriptor (shared console)
    kFile,     // `path`, created or truncated
    kPipe,     // a pipe whose read end the agent gets back (for tee and filtering)
  };
  Kind kind = Kind::kInherit;
  std::string path;  // for kFile
};

struct SpawnRequest {
  std::string executable;         // absolute path
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> envp;  // complete environment, "KEY=VALUE"
  StdioTarget stdout_target;
  StdioTarget stderr_target;
  // CPUs the process may run on (--numa-binding), set before exec so that every thread it
  // starts inherits them; empty: the agent's own affinity.
  std::vector<int> cpu_affinity;
};

struct SpawnedProcess {
  pid_t pid = -1;        // also the process group id
  UniqueFd stdout_pipe;  // read ends, valid only for StdioTarget::Kind::kPipe
  UniqueFd stderr_pipe;
  UniqueFd exec_check;     // PosixProcessLauncher: closes at exec, or carries exec's errno
  std::string executable;  // for error messages
};

// Descriptors prepared in the parent for one child stream: `child_fd` is what the child
// dup2()s onto 1 or 2 (invalid: inherit the agent's), `parent_read` is the pipe end the agent
// keeps (kPipe only).
struct StreamFds {
  UniqueFd child_fd;
  UniqueFd parent_read;
};
// Opens what `target` names (close-on-exec): the file, or a pipe. Errors name the path.
Result<StreamFds> prepare_stream(const StdioTarget& target);

// Thread-safety: call from the agent's thread only.
class ProcessLauncher {
 public:
  using ExitHandler = std::function<void(pid_t pid, ExitStatus status)>;
  virtual ~ProcessLauncher() = default;
  // Every child of this process that ends (workers, and grandchildren adopted as a subreaper)
  // is reaped by the launcher and reported to `handler` on the agent's event loop; nothing
  // blocks. A child that is stopped is reported too, with ExitStatus::stopped set (it has not
  // ended). Set before the first spawn; an empty handler stops the reports.
  virtual void set_exit_handler(ExitHandler handler) = 0;
  // Starts a process in a new process group (pgid == pid). The real implementation also makes
  // it die with the agent (parent-death signal), gives it /dev/null as stdin (workers never
  // read the agent's terminal: a stray input() or breakpoint() gets end of file instead of
  // stopping the worker), and no descriptor beyond 0, 1 and 2.
  // Returns once the child exists, without waiting for its exec, so that siblings start in
  // parallel; confirm_started() then tells whether the program really runs.
  virtual Result<SpawnedProcess> spawn(const SpawnRequest& request) = 0;
  // Blocks until `process` has exec'd (microseconds) or failed to. On failure the child has
  // been reaped, and the error names the executable and the reason.
  virtual Status confirm_started(SpawnedProcess& process) { return {}; }
  // Sends `signo` to process group `pgid`. A group that no longer exists is not an error.
  virtual void signal_group(pid_t pgid, int signo) = 0;
  // The worker that led group `pgid` has been reaped and its group killed: nothing may signal
  // that id again (it can be reused).
  virtual void release_group(pid_t pgid) {}
  // Child `pid` did not exit after SIGKILL (stuck in the kernel): it is never waited for again,
  // not even by end_all_children.
  virtual void abandon(pid_t pid) {}
  // No worker runs and none will: helpers that guard workers may start to leave now, so that
  // their exit overlaps the agent's last work instead of being waited for at the end.
  virtual void workers_done() {}
  // The job is over: kill and reap every child still there (escaped grandchildren, helpers),
  // waiting at most `wait_bound` in all for them to be reaped (one stuck in the kernel is left);
  // abandoned children are killed again but not waited for. Called once the event loop has
  // stopped. Returns how many there were.
  virtual int end_all_children(Millis wait_bound) { return 0; }
};

// fork/exec implementation. Why not Boost.Process: the child needs a parent-death signal,
// its own process group and a close-everything step before exec, and the agent reaps every
// child (grandchildren too, as a subreaper) with waitpid(-1), which Boost.Process's own
// child-exit bookkeeping does not allow.
//
// Worker groups are also announced to a GroupSentinel (started with the first worker), which
// kills them if the agent dies without ending them.
//
// Reaping: SIGCHLD wakes `io`; every exited child is reaped with waitpid(-1, WNOHANG). The
// process becomes a child subreaper at construction, so orphaned grandchildren come here too.
class PosixProcessLauncher final : public ProcessLauncher {
 public:
  explicit PosixProcessLauncher(boost::asio::io_context& io);

  void set_exit_handler(ExitHandler handler) override { exit_handler_ = std::move(handler); }
  Result<SpawnedProcess> spawn(const SpawnRequest& request) override;
  Status confirm_started(SpawnedProcess& process) override;
  void signal_group(pid_t pgid, int signo) override;
  void release_group(pid_t pgid) override;
  // The group sentinel is told to go (it exits on its own; end_all_children reaps it).
  void workers_done() override;
  void abandon(pid_t pid) override { abandoned_.push_back(pid); }
  int end_all_children(Millis wait_bound) override;
  // A process group this launcher did not start itself but whose leader is our child (a
  // worker forked by the preload template and re-parented here): the group sentinel ends it
  // with the others should the agent die.
  void watch_group(pid_t pgid);

 private:
  void start_sentinel();
  void watch_children();
  void reap_children();

  boost::asio::signal_set child_signals_;
  ExitHandler exit_handler_;
  std::optional<GroupSentinel> sentinel_;
  bool sentinel_failed_ = false;  // warned once; supervision goes on without it
  std::vector<pid_t> abandoned_;  // children that survived SIGKILL (abandon)
};

// Finds `name` as an executable: a name with a '/' is taken as a path, otherwise each
// directory of `path_env` (a PATH value) is searched. Returns the path or an error naming it.
Result<std::string> find_executable(const std::string& name, const std::string& path_env);

}  // namespace ddprun::agent
