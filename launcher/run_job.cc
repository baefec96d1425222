#include "launcher/run_job.h"

#include <boost/asio/io_context.hpp>
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/local_coordinator.h"
#include "agent/process_launcher.h"

namespace ddprun::launcher {

int run_job(const LaunchConfig& config) {
  for (const auto& warning : config.warnings) spdlog::warn("{}", warning);
  boost::asio::io_context io(1);
  agent::PosixProcessLauncher launcher;
  // Jobs of a fixed shape (one node, or static multi-node) decide rounds locally.
  agent::LocalCoordinatorOptions local;
  local.max_restarts = config.agent.max_restarts;
  local.group_rank = config.rendezvous.backend == "static" ? config.rendezvous.node_rank : 0;
  local.group_world_size = config.rendezvous.max_nodes;
  agent::LocalCoordinator coordinator(io, local);
  agent::Agent node_agent(config.agent, io, launcher, coordinator, SystemClock::instance());
  return node_agent.run();
}

}  // namespace ddprun::launcher
