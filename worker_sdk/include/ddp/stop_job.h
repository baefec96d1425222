// Ending the whole job for good from a rank: a failure that another attempt would only repeat
// (a NaN loss, a corrupt data set, a bad configuration), so that ddprun does not restart it,
// whatever --max_restarts has left, and a scheduler does not requeue it.
//
//   if (!std::isfinite(loss)) ddp::stop_job("NaN loss at step " + std::to_string(step));
//
// Contract (shared with the launcher, agent/process/worker_channel.h)
// - When DDPRUN_WORKER_SOCKET names the agent's AF_UNIX datagram socket, one datagram of JSON
//   is sent to it: {"event": "stop_job", "local_rank": <LOCAL_RANK>, "pid": <pid>, "reason":
//   "<reason>"} (the reason cut to fit 8 KiB). The agent stops the other ranks, reports the
//   failure as not restartable, and every node exits 79 ("do not requeue") with the reason in
//   its failure report.
// - Then this process ends with exit status 79: stdio is flushed, no destructor or atexit
//   handler runs (other threads, Gloo's and NCCL's, may still be running).
// - Outside ddprun (no variable) the reason goes to stderr and the process exits 79 the same way.
// - Never throws; never blocks on the agent (a non-blocking send). Does not return.
#pragma once

#include <string>

#include "ddp/export.h"

namespace ddp {

// ddprun's exit code for a job that must not be started again as it is.
inline constexpr int kExitDoNotRequeue = 79;

[[noreturn]] DDP_API void stop_job(const std::string& reason) noexcept;

}  // namespace ddp
