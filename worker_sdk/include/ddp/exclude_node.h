// Taking this rank's node out of the job: the node itself is unfit to train (a GPU with ECC
// errors, a NIC that keeps dropping, a local disk that is full), so ddprun's agent on it stops
// its workers and leaves the job, and a waiting spare node takes its place (as for a lost node;
// no restart is charged). The rendezvous keeps the host out of the job for a cool-down.
//
//   if (uncorrectable_ecc_errors(gpu) > 0) ddp::exclude_node("ECC errors on GPU 3");
//
// Contract (shared with the launcher, agent/process/worker_channel.h)
// - When DDPRUN_WORKER_SOCKET names the agent's AF_UNIX datagram socket, one datagram of JSON
//   is sent to it: {"event": "exclude_node", "local_rank": <LOCAL_RANK>, "pid": <pid>,
//   "reason": "<reason>"} (the reason cut to fit 8 KiB). The agent stops the node's other
//   ranks, prints its failure report with the request as its cause ("rank 3 asked to exclude
//   this node: ECC errors on GPU 3"), leaves the job saying why, and exits 69.
// - Then this process ends with exit status 69: stdio is flushed, no destructor or atexit
//   handler runs (other threads, Gloo's and NCCL's, may still be running).
// - Outside ddprun (no variable) the reason goes to stderr and the process exits 69 the same way.
// - Never throws; never blocks on the agent (a non-blocking send). Does not return.
#pragma once

#include <string>

#include "ddp/export.h"

namespace ddp {

// ddprun's exit code for a node kept out of the job (EX_UNAVAILABLE of sysexits.h).
inline constexpr int kExitNodeExcluded = 69;

[[noreturn]] DDP_API void exclude_node(const std::string& reason) noexcept;

}  // namespace ddp
