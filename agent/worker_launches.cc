#include "agent/worker_launches.h"

#include <string>
#include <utility>

#include "agent/process/exit_status.h"

namespace ddprun::agent {
namespace {

StdioTarget stdio_target(const StreamRoute& route, const std::string& file) {
  if (route.via_agent()) return {StdioTarget::Kind::kPipe, ""};
  if (route.to_file) return {StdioTarget::Kind::kFile, file};
  return {StdioTarget::Kind::kInherit, ""};
}

// The base plus --extra env: what every process of the job starts from.
EnvMap with_extra_env(const EnvMap& base_env, const AgentOptions& options) {
  EnvMap env = base_env;
  for (const auto& [key, value] : options.extra_env) env[key] = value;
  return env;
}

AttemptContext attempt_context(const AgentOptions& options, const RoundAssignment& a) {
  AttemptContext context;
  context.role = options.role;
  context.master_addr = a.master_addr;
  context.master_port = a.master_port;
  context.restart_count = a.restart_count;
  context.max_restarts = a.max_restarts;
  context.run_id = options.run_id;
  context.use_agent_store = a.use_agent_store;
  context.legacy_nccl_env = options.legacy_nccl_env;
  for (int signo : options.signals_to_handle) {
    if (!context.signals_to_handle.empty()) context.signals_to_handle += ",";
    context.signals_to_handle += signal_name(signo);
  }
  context.virtual_local_rank = options.virtual_local_rank;
  context.accelerator = options.accelerator;
  return context;
}

WorkerPlacement placement(const AgentOptions& options, const RoundAssignment& a, int local_rank) {
  WorkerPlacement p;
  p.local_rank = local_rank;
  p.rank = a.rank_offset + local_rank;
  p.group_rank = a.group_rank;
  p.group_world_size = a.group_world_size;
  p.local_world_size = options.nproc_per_node;
  p.world_size = a.world_size;
  p.role_rank = p.rank;
  p.role_world_size = a.world_size;
  return p;
}

}  // namespace

std::vector<WorkerLaunch> make_worker_launches(const AttemptLaunchInputs& in) {
  const AgentOptions& options = in.options;
  const AttemptContext context = attempt_context(options, in.assignment);
  const EnvMap base = with_extra_env(in.base_env, options);
  std::vector<WorkerLaunch> launches;
  for (int local_rank = 0; local_rank < options.nproc_per_node; ++local_rank) {
    const WorkerPlacement p = placement(options, in.assignment, local_rank);
    WorkerLaunch launch;
    launch.local_rank = local_rank;
    launch.rank = p.rank;
    launch.error_file = in.log_dir.error_file(in.attempt, local_rank);
    launch.request.executable = options.command.executable;
    launch.request.argv = options.command.argv;
    EnvMap env = build_worker_env(base, context, p, launch.error_file);
    for (auto& [key, value] : in.progress.worker_env(local_rank)) env[key] = value;
    for (auto& [key, value] : in.channel.worker_env()) env[key] = value;
    launch.request.envp = to_envp(env);
    launch.request.stdout_target = stdio_target(plan_stream(options.logs, local_rank, kStdout),
                                                in.log_dir.stdout_log(in.attempt, local_rank));
    launch.request.stderr_target = stdio_target(plan_stream(options.logs, local_rank, kStderr),
                                                in.log_dir.stderr_log(in.attempt, local_rank));
    if (static_cast<std::size_t>(local_rank) < options.cpu_binding.size()) {
      launch.request.cpu_affinity = options.cpu_binding[local_rank];
    }
    launches.push_back(std::move(launch));
  }
  return launches;
}

EnvMap health_check_env(const EnvMap& base_env, const AgentOptions& options, int attempt) {
  EnvMap env = with_extra_env(base_env, options);
  env["LOCAL_WORLD_SIZE"] = std::to_string(options.nproc_per_node);
  env["TORCHELASTIC_RUN_ID"] = options.run_id;
  env["DDPRUN_ATTEMPT"] = std::to_string(attempt);
  return env;
}

}  // namespace ddprun::agent
