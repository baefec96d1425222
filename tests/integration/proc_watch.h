// Watching processes the test did not fork itself (ddprun's workers and their children), by
// pid, through /proc and pidfds. A pid read from a worker's marker file names that worker only
// while it is unreaped; these helpers never signal such a pid (see kill_adopted_children).
#pragma once

#include <sys/types.h>

#include <vector>

#include "tests/integration/deadline.h"

namespace ddprun::testing {

// The state letter of /proc/<pid>/stat ('R', 'S', 'Z', ...), or 0 when there is no such entry.
char process_state(pid_t pid);

// Alive: /proc/<pid> exists and the process is not a zombie (Z) or dead (X). A worker killed
// with its launcher may linger as a zombie until its new parent reaps it; that counts as dead.
bool is_process_alive(pid_t pid);

// Waits until `pid` has terminated (zombie or gone). Event-driven: polls a pidfd. True when it
// is dead by the deadline.
bool wait_for_process_exit(pid_t pid, Deadline deadline);

// Waits until /proc/<pid> has disappeared, i.e. its parent has reaped it. Nothing signals
// another process's reaping, so this one re-reads /proc every few milliseconds.
bool wait_until_reaped(pid_t pid, Deadline deadline);

// The pids whose parent is `parent`, from /proc/*/stat.
std::vector<pid_t> children_of(pid_t parent);

// Makes the test process a child subreaper: descendants orphaned by a killed ddprun are
// re-parented to the test, which can then see and reap them instead of leaking them to init.
void become_child_subreaper();

struct AdoptedChildren {
  std::vector<pid_t> alive;    // still running: were SIGKILLed here
  std::vector<pid_t> zombies;  // already dead, only reaped here
};

// SIGKILLs and reaps every child of the test process. Call only when the test holds no
// ChildProcess of its own: those are children too. Safe: an unreaped child's pid is ours.
AdoptedChildren kill_adopted_children();

}  // namespace ddprun::testing
