#include "launcher/worker_launcher.h"

#include <spdlog/spdlog.h>

namespace ddprun::launcher {

WorkerLauncher::WorkerLauncher(boost::asio::io_context& io, const LaunchConfig& config,
                               const agent::EnvMap& worker_base_env)
    : posix_(io) {
  if (config.preload.empty() || !config.agent.command.python) return;
  agent::PreloadOptions options;
  options.modules = config.preload;
  options.python = config.agent.command.executable;
  options.python_argv0 = config.agent.command.argv.front();
  options.bootstrap_program = config.agent.command.bootstrap_program;
  // The workers' environment without what differs per rank: the agent's own and the job's
  // extra variables (OMP_NUM_THREADS among them), so that the import sees what a worker would.
  agent::EnvMap env = worker_base_env;
  for (const auto& [key, value] : config.agent.extra_env) env[key] = value;
  // Hang detection gives every worker PYTHONFAULTHANDLER; the template gets it too, so that the
  // interpreter's signal handlers are set up as a worker's would be at its start.
  if (config.agent.progress.hang_timeout > Millis(0)) env["PYTHONFAULTHANDLER"] = "1";
  options.env = agent::to_envp(env);
  preload_.emplace(posix_, std::move(options));
  if (Status started = preload_->start(); !started) {
    spdlog::warn("preload: {}; every worker starts as a fresh process", started.message());
  }
}

}  // namespace ddprun::launcher
