// ddprun --config job.yaml: every command-line setting as a YAML key (torchrun's flag names with
// underscores: nproc_per_node, rdzv_conf as a mapping, ...), plus the entry point
// (training_script, training_script_args) and extra environment for the workers (env).
//
// Precedence: command line > PET_* environment > config file > defaults. The file's values
// become the flags' defaults before the command line is parsed, so PET_* variables and flags
// given on the command line still win; a script given on the command line replaces the file's
// training_script and training_script_args. Bad files are refused before anything starts, each
// error naming file:line:column and the key (see common/config_file.h).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/config_file.h"
#include "common/flag_table.h"
#include "common/result.h"

namespace ddprun::launcher {

// What a config file gives besides flag defaults.
struct JobConfigExtras {
  std::vector<std::string> entry_point;    // training_script, then training_script_args
  std::map<std::string, std::string> env;  // extra environment for every worker
  std::set<std::string> keys;              // every key the file set (for the SLURM layer)
};

// The keys a job file may hold (from launcher_flags.h's table).
const std::vector<ConfigKey>& job_config_schema();

// What the file at `path` gave besides flag defaults (FlagTable::parse read it), as the job's
// entry point, environment and keys. An error names the file.
Result<JobConfigExtras> job_config_extras(const std::string& path,
                                          const ConfigFileSettings& settings);

// Loads `path` and makes its settings the defaults of `app`'s options (declared by the table
// in launcher_flags.h). Errors name file:line:column and the key.
Result<JobConfigExtras> apply_job_config(const std::string& path, CLI::App& app);

}  // namespace ddprun::launcher
