// Runs a validated launch: picks how nodes coordinate and drives this node's agent.
#pragma once

#include "launcher/launch_config.h"

namespace ddprun::launcher {

// Runs the job to its end and returns ddprun's exit code (see README, "Exit codes").
int run_job(const LaunchConfig& input);

}  // namespace ddprun::launcher
