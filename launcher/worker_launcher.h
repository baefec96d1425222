// The process launcher a node's agent gets: the POSIX one, behind the preload template when
// --preload asks for it (agent/preload/preload_launcher.h). One per agent, created before it.
#pragma once

#include <optional>

#include <boost/asio/io_context.hpp>

#include "agent/preload/preload_launcher.h"
#include "agent/process/process_launcher.h"
#include "agent/process/worker_env.h"
#include "launcher/launch_config.h"

namespace ddprun::launcher {

class WorkerLauncher {
 public:
  // Starts the template at once (it imports while the node joins its round); when it cannot
  // start, says why and every worker is a fresh process. `worker_base_env` is what the
  // workers' environment starts from (the agent's, as its parts hold it).
  WorkerLauncher(boost::asio::io_context& io, const LaunchConfig& config,
                 const agent::EnvMap& worker_base_env);

  agent::ProcessLauncher& get() {
    return preload_ ? static_cast<agent::ProcessLauncher&>(*preload_) : posix_;
  }

 private:
  agent::PosixProcessLauncher posix_;
  std::optional<agent::PreloadLauncher> preload_;
};

}  // namespace ddprun::launcher
