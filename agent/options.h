// What the agent is asked to run: the worker command, group size, signals and logging. Filled
// by the launcher from the command line; every field documents its default. Restarts are not
// the agent's to decide: its coordinator does (see coordinator.h), and the agent uses the
// budget the coordinator agreed on (RoundAssignment::max_restarts).
#pragma once

#include <csignal>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/devices/vendor.h"
#include "agent/progress/progress_options.h"
#include "common/clock.h"

namespace ddprun::agent {

// Bit mask of standard streams, as torchrun's `Std`: 0 none, 1 stdout, 2 stderr, 3 both.
enum StdStreams : int { kNoStreams = 0, kStdout = 1, kStderr = 2, kBothStreams = 3 };

// A stream mask for every local rank: one value for all, or a value per listed rank
// (torchrun's `0:1,1:2` form, where unlisted ranks get none).
struct PerRankStreams {
  int all = kNoStreams;         // used when per_rank is empty
  std::map<int, int> per_rank;  // local rank -> mask; when non-empty, overrides `all`
  int for_rank(int local_rank) const {
    if (per_rank.empty()) return all;
    auto it = per_rank.find(local_rank);
    return it == per_rank.end() ? kNoStreams : it->second;
  }
};

struct LogOptions {
  // Base directory for per-attempt logs and error files. Empty: a fresh temporary directory
  // that is removed when the job succeeds (kept on failure, since the report names its files).
  std::string log_dir;
  PerRankStreams redirects;  // streams written only to attempt_<N>/<rank>/{stdout,stderr}.log
  PerRankStreams tee;        // streams written to the log file and to the console, prefixed
  // Local ranks whose output reaches the console; empty means all. Output of other ranks is
  // still kept in their log files.
  std::vector<int> console_ranks;
  // Prefix of each tee'd console line: torchrun's template, with ${role_name}, ${rank},
  // ${local_rank} (and ${hostname}) replaced. Empty: "[${role_name}${local_rank}]:".
  std::string line_prefix_template;
  // torchrun's --duplicate-stdout-filters / --duplicate-stderr-filters: lines of tee'd streams
  // that contain any of these also go to attempt_<N>/filtered_stdout.log (filtered_stderr.log),
  // one file for all ranks, each line with its prefix. Empty: no such file.
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  // Every worker's stderr passes through the agent (unprefixed when not tee'd), which keeps its
  // last lines in memory for the failure report: stacks printed by a hung worker reach the
  // report even when stderr goes to the console. Set by hang detection. Default off.
  bool capture_stderr = false;
};

// The program every worker runs.
struct WorkerCommand {
  std::string executable;         // absolute path, resolved by the launcher
  std::vector<std::string> argv;  // argv[0] included
  std::string display_name;       // entry point name for reports, e.g. "train.py"
  bool python = false;            // `executable` is the Python that runs the entry point
  // With `python`: which interpreter and how it was chosen, named in failure reports
  // ("/usr/bin/python3 (PYTHON_EXEC)"). Empty: not a Python entry point.
  std::string interpreter;
  // The Python workers' bootstrap (python_bootstrap.h) that argv runs after "-u"; empty: none.
  std::string bootstrap_program;
};

// --health_check (health_check.h).
struct HealthCheckOptions {
  // The flag's value: a shell command, built-in checks ("builtin:gpu,path=/data"), or both
  // (health/builtin/node_check_spec.h); empty (the default): no check.
  std::string command;
  // --health_check_timeout: longer than this is a failure (the check is killed). Default 60 s.
  Millis timeout{60'000};
  // --health_check_interval: the check also runs this often while the workers run (a failure
  // makes the node leave the job). 0 (the default): only before each round.
  Millis interval{0};
};

// --node_failure_limit, --node_failure_window (health/failure_history.h).
struct NodeFailureOptions {
  // K: this node leaves the job once its workers were the root cause of K of the job's last
  // `window` failures (exit 69). 0 (the default): never.
  uint32_t limit = 0;
  // M: how many of the job's last failures are looked at; at least `limit`. Default 3.
  uint32_t window = 3;
};

struct AgentOptions {
  WorkerCommand command;
  int nproc_per_node = 1;          // workers on this node (local world size)
  std::string role = "default";    // ROLE_NAME, and the tee prefix "[<role><local_rank>]:"
  Millis shutdown_timeout{30000};  // SIGTERM -> SIGKILL grace period when stopping workers
  // --kill_wait_timeout: how long a SIGKILLed worker may take to be reaped. One still there is
  // stuck in the kernel: it is named, given up on, and the node leaves the job
  // (kExitWorkerUnkillable). Default 30 s.
  Millis kill_wait_timeout{30000};
  // Signals forwarded to every worker group and that stop the job (exit 128+signal).
  std::vector<int> signals_to_handle{SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  // MASTER_ADDR this node offers to the job: where workers reach the job's store should this
  // node become group rank 0. The launcher chooses it (run_job.cc). Default loopback.
  std::string master_addr = "127.0.0.1";
  // MASTER_PORT: fixed by the user, or (unset) a free port anew for every attempt.
  std::optional<int> master_port;
  // The job's terms say the agent of group rank 0 hosts the job's store (JobOptions::
  // agent_store; off with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1). Default true.
  bool agent_store = true;
  std::string run_id = "none";  // TORCHELASTIC_RUN_ID
  std::string hostname;         // reported in failure summaries
  // How hang reports and straggler notices name this node (rendezvous/wire/node_name.h: host name
  // and agent pid, "gpu-07:41234"); empty: `hostname`.
  std::string node_name;
  LogOptions logs;
  // Extra environment for workers, applied over the agent's own (tests, OMP_NUM_THREADS).
  std::map<std::string, std::string> extra_env;
  // torchrun's --virtual-local-rank: LOCAL_RANK=0 and only its own GPU visible to each worker.
  bool virtual_local_rank = false;
  // The node's accelerators, as the launcher found them (agent/devices/): which visibility
  // variable --virtual-local-rank narrows. nullopt (the default): none found.
  std::optional<devices::Vendor> accelerator;
  // The workers' torch reads NCCL_ASYNC_ERROR_HANDLING (torch 1.x; run_job finds out):
  // set it as well as TORCH_NCCL_ASYNC_ERROR_HANDLING. Default off (torch 2.x warns about it).
  bool legacy_nccl_env = false;
  // --numa-binding: the CPUs of each local rank (index = local rank). Empty: no binding.
  std::vector<std::vector<int>> cpu_binding;
  // What is watched of the workers' progress: hangs, stragglers, heartbeats, file timer.
  ProgressOptions progress;
  HealthCheckOptions health_check;   // run before this node joins each round
  NodeFailureOptions node_failures;  // when this node leaves for causing the job's failures
  // --gpu_memory_wait: before a restart, wait at most this long for the last attempt's
  // processes to free their GPU memory (health/gpu_memory_wait.h). 0: no wait. Default 30 s.
  Millis gpu_memory_wait{30'000};
};

}  // namespace ddprun::agent
