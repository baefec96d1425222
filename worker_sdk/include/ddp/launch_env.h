// The launcher's environment contract (torchrun / ddprun), parsed once at start-up.
//
// A launcher sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
// MASTER_PORT and TORCHELASTIC_{RESTART_COUNT,MAX_RESTARTS,RUN_ID,USE_AGENT_STORE} for each worker
// (see docs/worker_sdk.md). This header has no LibTorch dependency.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ddp/export.h"

namespace ddp {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  // This node's rank among the job's nodes in the current round (GROUP_RANK; 0 when unset).
  int group_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 0;
  // Which attempt this is: 0 for the first start, +1 on every restart of the worker group.
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id;
  // True when the agent already hosts the TCPStore at MASTER_ADDR:MASTER_PORT (torchrun's
  // static rendezvous); false when rank 0's worker must host it (ddprun).
  bool use_agent_store = false;
  // False when no launcher variables were found and a world of size 1 was synthesised.
  bool from_launcher = true;
};

// Looks a variable up; nullopt when unset. Injected so tests need not touch the real environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
DDP_API EnvLookup process_env();

// Parses the launcher variables. Throws ddp::Error("read_launch_env") when a variable is
// malformed, or when none is set and allow_single_process is false (the message says to run
// under ddprun/torchrun or to allow a single process). With allow_single_process and no
// launcher variables, returns a world of size 1 with from_launcher == false.
DDP_API LaunchEnv read_launch_env(const EnvLookup& env, bool allow_single_process);

}  // namespace ddp
