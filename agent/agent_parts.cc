#include "agent/agent_parts.h"

#include <spdlog/spdlog.h>

namespace ddprun::agent {

SystemAgentParts::SystemAgentParts(boost::asio::io_context& io, const AgentOptions& options,
                                   const Clock& clock)
    : clock_(clock),
      store_(io,
             StoreHostOptions{options.agent_store, options.master_addr, options.master_port, {}}),
      hang_watch_(io, options.progress, clock),
      shutdown_timer_(io),
      drain_timer_(io),
      signals_(io, options.signals_to_handle) {
  // Only the bootstrap of Python workers speaks on the channel.
  if (options.command.python) {
    auto channel = UnixWorkerChannel::open(io);
    if (channel) {
      channel_ = std::move(channel.value());
    } else {
      spdlog::warn("{}; a worker's failure is known when it exits", channel.error_message());
    }
  }
  if (!channel_) channel_ = std::make_unique<NoWorkerChannel>();
}

AgentParts SystemAgentParts::with(ProcessLauncher& launcher, Coordinator& coordinator) {
  return {launcher,   coordinator,     clock_,       store_,   hang_watch_,
          log_files_, shutdown_timer_, drain_timer_, signals_, *channel_};
}

}  // namespace ddprun::agent
