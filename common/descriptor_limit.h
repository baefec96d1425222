// The process's file descriptor limit. A node's agent hosts the job's store, which holds a
// connection per rank (and more per rank under torch 2.x), besides the workers' pipes: the
// soft limit of 1,024 of a login shell or a SLURM step is easily reached. Servers commonly
// raise their soft limit to the hard one at start; workers get the limit the agent was given,
// as under torchrun (programs that still use select() break above 1,024).
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <optional>

namespace ddprun {

// Raises this process's soft RLIMIT_NOFILE to its hard limit, and remembers the soft limit it
// had for the children (limit_for_children()). Logs (info) when even the hard limit is below
// `want` (4,096: a login shell's or a SLURM step's stock limits), with how to raise it.
// Returns the soft limit in force afterwards.
uint64_t raise_descriptor_limit(uint64_t want = 4096);

// The limit to restore in a child before exec: the one this process had before
// raise_descriptor_limit() changed it; nullopt when it was not changed.
std::optional<rlimit> limit_for_children();

}  // namespace ddprun
