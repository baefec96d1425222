#include "agent/process/worker_env.h"

#include <algorithm>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "agent/devices/visible_devices.h"

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

namespace {
// The device a worker of `local_rank` owns: the local_rank-th entry of the agent's visibility
// list (ids or UUIDs), or the local rank itself when the agent has none. torchrun raises when the
// list is shorter than the workers; ddprun gives such a worker the rank's own id instead.
std::string own_device(const std::optional<std::string>& visible, int local_rank) {
  const int listed =
      visible ? 1 + static_cast<int>(std::count(visible->begin(), visible->end(), ',')) : 0;
  if (local_rank >= listed) return std::to_string(local_rank);
  return devices::list_entry(*visible, local_rank);
}
}  // namespace

EnvMap build_worker_env(const EnvMap& base, const AttemptContext& attempt,
                        const WorkerPlacement& placement, const std::string& error_file) {
  EnvMap env = base;
  // The service manager's variables are the agent's alone: a worker that inherited them could
  // send READY/STOPPING/WATCHDOG for the agent (libraries call sd_notify when NOTIFY_SOCKET is
  // set), or be taken for it.
  for (const char* key : {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"}) env.erase(key);
  auto set = [&env](const char* key, const std::string& value) { env[key] = value; };
  auto num = [](int v) { return std::to_string(v); };
  set("LOCAL_RANK", num(attempt.virtual_local_rank ? 0 : placement.local_rank));
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
  set("TORCHELASTIC_SIGNALS_TO_HANDLE", attempt.signals_to_handle);
  // torchrun's rule: the user's value when set, else 1.
  auto user = [&base](const char* key) -> std::optional<std::string> {
    auto it = base.find(key);
    return it == base.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  const auto async_handling = user("TORCH_NCCL_ASYNC_ERROR_HANDLING");
  set("TORCH_NCCL_ASYNC_ERROR_HANDLING", async_handling.value_or("1"));
  if (attempt.legacy_nccl_env) {
    // What torch 1.x reads; the user's value of either name carries over.
    set("NCCL_ASYNC_ERROR_HANDLING",
        user("NCCL_ASYNC_ERROR_HANDLING").value_or(async_handling.value_or("1")));
  }
  if (attempt.virtual_local_rank) {
    // torchrun 2.x: on ROCm HIP_VISIBLE_DEVICES outranks CUDA_VISIBLE_DEVICES, so a set one is
    // the list to narrow, and both names get the worker's device.
    const auto hip = user("HIP_VISIBLE_DEVICES");
    const bool use_hip = hip && !hip->empty();
    const std::string device =
        own_device(use_hip ? hip : user("CUDA_VISIBLE_DEVICES"), placement.local_rank);
    set("CUDA_VISIBLE_DEVICES", device);
    if (use_hip) set("HIP_VISIBLE_DEVICES", device);
    // Level Zero reads neither: ddprun's own addition, the same narrowing of ZE_AFFINITY_MASK.
    if (attempt.accelerator == devices::Vendor::kIntel) {
      auto mask = user("ZE_AFFINITY_MASK");
      if (mask && mask->empty()) mask.reset();  // Level Zero takes an empty mask for none
      set("ZE_AFFINITY_MASK", own_device(mask, placement.local_rank));
    }
  }
  return env;
}

std::vector<std::string> to_envp(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [key, value] : env) out.push_back(fmt::format("{}={}", key, value));
  return out;
}

}  // namespace ddprun::agent
