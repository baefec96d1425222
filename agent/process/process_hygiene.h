// Descriptor and child hygiene of the agent process: standard streams that are really open, and
// no child left behind at the end of a job.
#pragma once

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
// group sentinel, which has nothing left to watch. Blocks only until those killed children are
// reaped. Returns how many.
int kill_adopted_children();

}  // namespace ddprun::agent
