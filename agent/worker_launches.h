// What an attempt starts: one WorkerLaunch per local rank (command, environment, output
// targets, CPUs), and the environment of the node's health check. The agent decides when;
// these functions only say what, so they are pure: no I/O, no clock.
#pragma once

#include <vector>

#include "agent/coordination/coordinator.h"
#include "agent/logs/log_layout.h"
#include "agent/options.h"
#include "agent/process/worker_channel.h"
#include "agent/process/worker_env.h"
#include "agent/process/worker_group.h"
#include "agent/progress/progress_watch.h"

namespace ddprun::agent {

// Everything one attempt's launches are made of. Borrowed: valid for the call only.
struct AttemptLaunchInputs {
  const AgentOptions& options;
  const RoundAssignment& assignment;  // where this node's ranks sit in the round
  const EnvMap& base_env;             // AgentParts::worker_base_env
  const RunLogDir& log_dir;           // the run's directory: error files and log files
  int attempt = 0;                    // names the attempt_<N> directories
  const ProgressWatch& progress;      // adds each worker's heartbeat variables
  const WorkerChannel& channel;       // adds the worker channel's address
};

// One launch per local rank, in local-rank order, with torchrun's worker environment
// (build_worker_env) over `base_env` and the job's extra variables, then the progress watch's
// and the channel's variables; stdout and stderr piped to the agent, to a log file, or
// inherited as --redirects and --tee ask; --cpu_binding's CPUs where it names some.
std::vector<WorkerLaunch> make_worker_launches(const AttemptLaunchInputs& in);

// The health check's environment before `attempt`: `base_env` with the job's extra variables,
// LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID and DDPRUN_ATTEMPT, so a check can tell which node and
// round it runs for.
EnvMap health_check_env(const EnvMap& base_env, const AgentOptions& options, int attempt);

}  // namespace ddprun::agent
