#include "agent/agent_parts.h"

#include <utility>

#include <spdlog/spdlog.h>

namespace ddprun::agent {
namespace {

GpuMemoryWaitOptions gpu_memory_options(const AgentOptions& options, const EnvMap& env) {
  GpuMemoryWaitOptions wait;
  wait.bound = options.gpu_memory_wait;
  auto library = env.find(builtin::kNvmlLibraryEnv);
  wait.nvml_library =
      builtin::nvml_library_path(library == env.end() ? nullptr : library->second.c_str());
  return wait;
}

}  // namespace

SystemAgentParts::SystemAgentParts(boost::asio::io_context& io, const AgentOptions& options,
                                   const Clock& clock, EnvMap worker_base_env)
    : clock_(clock),
      store_(io,
             StoreHostOptions{options.agent_store, options.master_addr, options.master_port, {}}),
      hang_watch_(io, options.progress, clock),
      shutdown_timer_(io),
      drain_timer_(io),
      signals_(io, options.signals_to_handle),
      hang_timer_(io),
      health_check_timer_(io),
      health_interval_timer_(io),
      kill_wait_timer_(io),
      worker_base_env_(std::move(worker_base_env)),
      gpu_memory_timer_(io),
      gpu_memory_(gpu_memory_timer_, clock, gpu_memory_options(options, worker_base_env_)) {
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
  return {.launcher = launcher,
          .coordinator = coordinator,
          .clock = clock_,
          .store = store_,
          .progress = hang_watch_,
          .log_files = log_files_,
          .shutdown_timer = shutdown_timer_,
          .drain_timer = drain_timer_,
          .signals = signals_,
          .channel = *channel_,
          .hang_timer = hang_timer_,
          .health_check_timer = health_check_timer_,
          .health_interval_timer = health_interval_timer_,
          .kill_wait_timer = kill_wait_timer_,
          .inspector = inspector_,
          .gpu_memory = gpu_memory_,
          .worker_base_env = worker_base_env_};
}

}  // namespace ddprun::agent
