// Ends worker process groups when the agent dies without ending them (SIGKILL, the OOM killer).
//
// Each worker gets PR_SET_PDEATHSIG, but that kills the worker alone: children it started in
// its process group (data loaders, shell pipelines) would be re-parented to init and live on.
// The sentinel is a small process forked from the agent that holds the read end of a pipe. The
// agent announces every worker group when it starts and when it has ended; when the pipe reaches
// end of file, whatever way the agent ended, the sentinel SIGKILLs every group still announced
// and exits. On a normal exit nothing is left announced and it exits quietly.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <utility>

#include "common/posix_fd.h"
#include "common/result.h"

namespace ddprun::agent {

// Not thread-safe: use from the agent's thread.
class GroupSentinel {
 public:
  // Forks the sentinel. Call while the process has a single thread (fork safety).
  static Result<GroupSentinel> start();
  GroupSentinel(GroupSentinel&& other) noexcept
      : pipe_(std::move(other.pipe_)), pid_(std::exchange(other.pid_, -1)) {}
  GroupSentinel& operator=(GroupSentinel&&) = delete;
  // Closes the pipe and reaps the sentinel, which exits at once (nothing is announced then).
  ~GroupSentinel();
  // Closes the pipe now: the sentinel exits on its own (killing any group still announced);
  // the destructor, or whoever reaps our children, collects it. watch() is a no-op after this.
  void release() { pipe_.reset(); }

  // Process group `pgid` now runs workers / has ended and must not be signalled any more.
  void watch(pid_t pgid);
  void forget(pid_t pgid);

 private:
  GroupSentinel(UniqueFd pipe, pid_t pid) : pipe_(std::move(pipe)), pid_(pid) {}
  void send(int32_t record);

  UniqueFd pipe_;  // write end, close-on-exec
  pid_t pid_ = -1;
};

}  // namespace ddprun::agent
