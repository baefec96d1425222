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
  // Single-node jobs (static, c10d with one node, --standalone) decide rounds locally.
  agent::LocalCoordinator coordinator(io, config.agent.max_restarts);
  agent::Agent node_agent(config.agent, io, launcher, coordinator, SystemClock::instance());
  return node_agent.run();
}

}  // namespace ddprun::launcher
