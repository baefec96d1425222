#include "agent/agent_parts.h"

namespace ddprun::agent {

SystemAgentParts::SystemAgentParts(boost::asio::io_context& io, const AgentOptions& options,
                                   const Clock& clock)
    : clock_(clock),
      store_(io,
             StoreHostOptions{options.agent_store, options.master_addr, options.master_port, {}}),
      hang_watch_(io, options.hang, clock),
      shutdown_timer_(io),
      drain_timer_(io),
      signals_(io, options.signals_to_handle) {}

AgentParts SystemAgentParts::with(ProcessLauncher& launcher, Coordinator& coordinator) {
  return {launcher,   coordinator,     clock_,       store_,  hang_watch_,
          log_files_, shutdown_timer_, drain_timer_, signals_};
}

}  // namespace ddprun::agent
