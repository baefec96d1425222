// ddprun under SLURM: `srun ddprun train.py` on every node of an allocation, with no
// rendezvous flags, configures itself from the environment slurmstepd gives each task.
//
// Precedence (one layer each, the first that gives a setting wins):
//   command line > PET_* environment > --config file > SLURM > defaults
// SLURM fills only the settings no layer above gave:
//   --nnodes              SLURM_STEP_NUM_NODES (else SLURM_NNODES, SLURM_JOB_NUM_NODES)
//   --node_rank           SLURM_NODEID (a hint under c10d: ranks follow SLURM's node order)
//   --rdzv_backend        c10d
//   --rdzv_endpoint       the step's first host (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST,
//                         expanded by hostlist.h) : the first port of SLURM_STEP_RESV_PORTS
//                         (srun --resv-ports), else 29400
//   --rdzv_id             slurm-<SLURM_JOB_ID>.<SLURM_STEP_ID> (two steps of one allocation
//                         are two jobs)
//   --local_addr          SLURMD_NODENAME (the first host's agent then hosts the rendezvous)
//   --nproc_per_node      SLURM_GPUS_ON_NODE when > 0, else SLURM_NTASKS_PER_NODE
//   --signals_to_forward  SIGUSR1,SIGUSR2 (SLURM's pre-emption warnings reach the workers),
//                         less any signal the user's --signals_to_handle takes
// When --standalone or --rdzv_backend static is given, the job's shape is the user's: SLURM
// gives only --nproc_per_node and --signals_to_forward.
//
// "Under srun" means SLURM_JOB_ID, SLURM_STEP_ID (or SLURM_STEPID) and SLURM_NODEID are set and
// the step is a real one (not the batch script's, extern or interactive step): ddprun started
// directly in a batch script must not wait for nodes that will never join. A step that runs
// more than one task per node is refused (every ddprun there would be a node of its own).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "agent/process/worker_env.h"
#include "common/result.h"

namespace ddprun::launcher {

constexpr uint16_t kSlurmDefaultRdzvPort = 29400;

// What SLURM's environment says about this task's step.
struct SlurmStep {
  std::string job_id;
  std::string step_id;
  int nnodes = 1;
  int node_id = 0;
  std::string nnodes_from;    // the variable nnodes came from
  std::string first_host;     // of the step's node list
  std::string nodelist_from;  // the variable the list came from
  std::string node_name;      // SLURMD_NODENAME; empty when unset
  uint16_t rdzv_port = kSlurmDefaultRdzvPort;
  std::optional<int> workers;  // per node, when SLURM says
  std::string workers_from;    // SLURM_GPUS_ON_NODE or SLURM_NTASKS_PER_NODE
};

// The step this process runs in: nullopt when not under srun (see above), an error naming the
// variable when SLURM's variables are inconsistent or malformed (a node id outside the step, a
// bad node list, a node list of another size than the node count, several tasks per node).
Result<std::optional<SlurmStep>> read_slurm_step(const agent::EnvMap& env);

// One flag's value taken from SLURM: `key` is the flag's name with underscores (as in YAML).
struct SlurmSetting {
  std::string key;
  std::string value;
  std::string from;  // the SLURM variable(s) it came from, for the log line
};

// What the layers above SLURM already gave.
struct GivenSettings {
  std::function<bool(const std::string& key)> given;  // by the command line, PET_* or the file
  bool user_rendezvous = false;        // --standalone, or --rdzv_backend static, was given
  std::vector<int> signals_to_handle;  // the effective list, whoever gave it
};

// The settings SLURM supplies for `step`: those of the table above that `given` leaves open.
std::vector<SlurmSetting> slurm_settings(const SlurmStep& step, const GivenSettings& given);

// The one log line: what was taken from SLURM, and which settings were given elsewhere.
std::string describe_slurm(const SlurmStep& step, const std::vector<SlurmSetting>& taken);

// The SLURM layer of the command line. After `app` has parsed (the config file's keys in
// `file_keys`), reads `env` and, under srun, sets every option SLURM supplies that no layer
// above gave, through the option itself (the command line's own conversion and checks).
// Returns the log line, or nullopt when not under srun; an error when SLURM's variables are
// unusable.
Result<std::optional<std::string>> apply_slurm_layer(CLI::App& app,
                                                     const std::set<std::string>& file_keys,
                                                     const agent::EnvMap& env);

}  // namespace ddprun::launcher
