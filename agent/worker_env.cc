#include "agent/worker_env.h"

#include <string>

extern char** environ;  // NOLINT: POSIX

namespace ddprun::agent {

EnvMap current_environment() {
  EnvMap env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string kv(*entry);
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

EnvMap build_worker_env(const EnvMap& base, const AttemptContext& attempt,
                        const WorkerPlacement& placement, const std::string& error_file) {
  EnvMap env = base;
  auto set = [&env](const char* key, const std::string& value) { env[key] = value; };
  auto num = [](int v) { return std::to_string(v); };
  set("LOCAL_RANK", num(placement.local_rank));
  set("RANK", num(placement.rank));
  set("GROUP_RANK", num(placement.group_rank));
  set("ROLE_RANK", num(placement.role_rank));
  set("ROLE_NAME", attempt.role);
  set("LOCAL_WORLD_SIZE", num(placement.local_world_size));
  set("WORLD_SIZE", num(placement.world_size));
  set("GROUP_WORLD_SIZE", num(placement.group_world_size));
  set("ROLE_WORLD_SIZE", num(placement.role_world_size));
  set("MASTER_ADDR", attempt.master_addr);
  set("MASTER_PORT", num(attempt.master_port));
  set("TORCHELASTIC_RESTART_COUNT", num(attempt.restart_count));
  set("TORCHELASTIC_MAX_RESTARTS", num(attempt.max_restarts));
  set("TORCHELASTIC_RUN_ID", attempt.run_id);
  set("TORCHELASTIC_USE_AGENT_STORE", attempt.use_agent_store ? "True" : "False");
  set("TORCHELASTIC_ERROR_FILE", error_file);
  set("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  set("NCCL_ASYNC_ERROR_HANDLING", "1");  // the name torch 1.13 reads
  return env;
}

std::vector<std::string> to_envp(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

}  // namespace ddprun::agent
