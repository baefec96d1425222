// The exit codes of ddprun and ddp-rendezvous when they stop on an error of their own (a job's
// outcome is the job's: ddprun exits as its workers did, as torchrun does):
//
//   2  what the user gave is wrong: a flag, a config file, a value in them, a host name that
//      does not resolve; a fix of the command line or the file is needed
//   1  anything else that stopped it: a port in use, a resource that cannot be reached, a failure
//   3  (ddp-rendezvous) its durable state could not be saved; a replacement should take over
//  69  (ddprun) this node was kept out of the job: it failed its health check (--health_check),
//      its workers were the root cause of K of the job's last M failures (--node_failure_limit),
//      a rank asked to exclude it (ddprun.exclude_node), or the rendezvous refused its host
//      (kept out for a cool-down after one of these); the others go on without it (a waiting
//      spare takes its place); EX_UNAVAILABLE of sysexits.h, for SLURM or a node manager to
//      drain it
//  75  (ddprun) the job's rendezvous was lost mid-job and the job could not go on (the node
//      hosting it died with no successor, or too few nodes remain); EX_TEMPFAIL of sysexits.h:
//      not a worker's failure, and the job may succeed when started again
//  71  (ddprun) a worker did not exit --kill_wait_timeout after SIGKILL (stuck in the kernel: a
//      dead mount, a wedged driver); the node left the job; EX_OSERR of sysexits.h: the node
//      needs an operator, not a restart
//  79  (ddprun) "do not requeue": the job failed in a way that starting it again would repeat
//      (a rank asked to stop it, ddprun.stop_job; or --max_no_progress_restarts attempts in a
//      row failed at the same step); not a sysexits code, so never confused with one
//
// Decided by the error's kind, never by its text: kInvalidArgument is the user's input,
// kExcluded a node kept out (69).
#pragma once

#include "common/result.h"

namespace ddprun {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitStateLost = 3;
inline constexpr int kExitRendezvousLost = 75;
inline constexpr int kExitUnhealthy = 69;
inline constexpr int kExitWorkerUnkillable = 71;
inline constexpr int kExitDoNotRequeue = 79;

// The exit code for `error` when the program cannot start or go on (2, 69 or 1, above).
inline int exit_code_for(const Status& error) {
  if (error.is_excluded()) return kExitUnhealthy;
  return error.is_invalid_argument() ? kExitUsage : kExitFailure;
}

}  // namespace ddprun
