// ddprun's settings: torchrun's flags (both `--a_b` and `--a-b` spellings, PET_<FLAG> defaults)
// and ddprun's own, declared once in launcher_flags.cc. A setting's entry there makes its
// command-line option, environment default, config-file key, default and check; its meaning
// (validation across settings, conversion to LaunchConfig) is in command_line.cc.
#pragma once

#include <optional>
#include <string>

#include "common/flag_table.h"

namespace ddprun::launcher {

// Every flag as given, before validation; its default is the one in the table.
struct LauncherFlags {
  std::string config;  // --config job.yaml: the file whose settings are the defaults
  std::string nnodes;
  std::string nproc_per_node;
  std::optional<int> node_rank;  // static: 0 when unset; c10d: no hint
  std::string rdzv_backend;
  std::string rdzv_endpoint;
  std::string rdzv_id;
  std::string rdzv_conf;
  bool standalone = false;
  int max_restarts = 0;
  int max_no_progress_restarts = 0;  // 0 = off
  int node_failure_limit = 0;        // K; 0 = off
  int node_failure_window = 3;       // M, at least K
  double monitor_interval = 0;       // accepted for compatibility: supervision is event-driven
  std::string start_method;          // accepted: workers are always fresh processes
  std::string role;
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  std::string log_dir;
  std::string redirects;
  std::string tee;
  std::string local_ranks_filter;
  std::string master_addr;
  std::optional<int> master_port;  // unset: a free port per attempt
  std::string local_addr;
  double shutdown_timeout = 0;    // seconds
  double kill_wait_timeout = 30;  // seconds
  std::string signals_to_handle;
  std::string signals_to_forward;
  double exit_barrier_timeout = 0;  // seconds
  bool virtual_local_rank = false;
  std::string duplicate_stdout_filters;  // comma-separated, ",," for a literal comma
  std::string duplicate_stderr_filters;
  std::string numa_binding;
  std::string logs_specs;
  std::string event_log_handler;
  std::string log_line_prefix_template;
  double hang_timeout = 0;             // seconds; 0 = off
  double first_heartbeat_timeout = 0;  // seconds; 0 = a rank without heartbeats is not stopped
  bool no_auto_progress = false;       // Python workers' automatic progress off
  bool no_quick_exit = false;          // Python workers' interpreter torn down in full
  std::string preload;                 // comma-separated module names; empty: off
  double straggler_threshold = 0;      // ratio to the job's median busy time; 0 = off
  std::string health_check;            // [builtin:items] shell command; empty: none
  double health_check_timeout = 60;    // seconds
  double health_check_interval = 0;    // seconds; 0: only before each round
  double gpu_memory_wait = 30;         // seconds; 0: restarts do not wait for GPU memory
  std::optional<int> metrics_port;     // unset: no metrics endpoint
  std::string metrics_addr;
};

// The table: flags in `--help` order, then the config file's own keys (training_script,
// training_script_args, env).
const FlagTable<LauncherFlags>& launcher_flag_table();

}  // namespace ddprun::launcher
