// The environment each worker starts with: torchrun's contract (see
// shared/reference/torchrun-contract.md), on top of the agent's own environment.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/devices/vendor.h"

namespace ddprun::agent {

// Where a worker sits in the job, as decided by the rendezvous for one attempt.
struct WorkerPlacement {
  int local_rank = 0;
  int rank = 0;              // global rank: rank_offset of the node + local_rank
  int group_rank = 0;        // this node's rank among nodes
  int group_world_size = 1;  // number of nodes
  int local_world_size = 1;  // workers on this node
  int world_size = 1;        // workers in the job
  int role_rank = 0;         // rank among workers of the same role (one role: == rank)
  int role_world_size = 1;
};

// Job-wide facts shared by every worker of one attempt.
struct AttemptContext {
  std::string role = "default";
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id;
  bool use_agent_store = false;  // true only when the agent really hosts a TCPStore server
  // The workers' torch reads NCCL_ASYNC_ERROR_HANDLING (torch 1.x) rather than only
  // TORCH_NCCL_ASYNC_ERROR_HANDLING (2.x warns about the old name): set the old name too.
  bool legacy_nccl_env = false;
  // torchrun's --virtual-local-rank: every worker sees LOCAL_RANK=0, and CUDA_VISIBLE_DEVICES
  // narrowed to its own GPU (the local_rank-th of the agent's list, or the local rank); as
  // torchrun 2.x, HIP_VISIBLE_DEVICES too when the agent has it (then the list it narrows), and
  // on Intel nodes (`accelerator`) ZE_AFFINITY_MASK the same way (docs/devices.md).
  bool virtual_local_rank = false;
  // TORCHELASTIC_SIGNALS_TO_HANDLE, as torchrun's workers inherit it: the handled signals'
  // names, comma-separated ("SIGTERM,SIGINT,SIGHUP,SIGQUIT").
  std::string signals_to_handle;
  // The node's accelerators (the launcher's detection); nullopt: none found.
  std::optional<devices::Vendor> accelerator;
};

using EnvMap = std::map<std::string, std::string>;

// The agent's environment as a map (from `environ`).
EnvMap current_environment();

// `base` plus the torchrun worker variables for `placement`, with `error_file` as
// TORCHELASTIC_ERROR_FILE. What the user set stays: TORCH_NCCL_ASYNC_ERROR_HANDLING (and the
// legacy name) only get torchrun's default 1 when unset. The service manager's NOTIFY_SOCKET,
// WATCHDOG_USEC and WATCHDOG_PID never reach a worker. Pure: no I/O.
EnvMap build_worker_env(const EnvMap& base, const AttemptContext& attempt,
                        const WorkerPlacement& placement, const std::string& error_file);

// "KEY=VALUE" strings for execve.
std::vector<std::string> to_envp(const EnvMap& env);

}  // namespace ddprun::agent
