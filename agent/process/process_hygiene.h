// Descriptor and child hygiene of the agent process: standard streams that are really open, and
// no child left behind at the end of a job.
#pragma once

#include <sys/types.h>

#include <vector>

#include "common/clock.h"

namespace ddprun::agent {

// Whether `fd` 0, 1 and 2 are open; opens /dev/null on any that is not, so that no later
// descriptor (a pipe, a socket) lands there and is mistaken for a standard stream. Call first
// thing in main.
void ensure_standard_streams();

// Makes this process a child subreaper: workers' grandchildren that outlive their parent are
// re-parented to it, so they can be reaped and, at the end of the job, killed.
void become_child_subreaper();

// At the end of a job: SIGKILLs and reaps every child this process still has — workers'
// grandchildren adopted as a child subreaper (those that left their process group) and the
// group sentinel, which has nothing left to watch. Blocks until those killed children are
// reaped, or `wait_bound` in all has passed (a child stuck in the kernel is named in the log and
// left); children in `abandoned` (they already outlived a SIGKILL) are killed but not waited
// for. Returns how many children there were.
int kill_adopted_children(Millis wait_bound, const std::vector<pid_t>& abandoned);

}  // namespace ddprun::agent
