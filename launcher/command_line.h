// ddprun's command line: torchrun's flags in both `--a_b` and `--a-b` spellings, defaults from
// PET_<FLAG> environment variables, everything after the script (or `--`) passed through.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/launch_config.h"

namespace ddprun::launcher {

struct ParsedCommandLine {
  std::optional<LaunchConfig> config;  // set when the job should run
  int exit_code = 0;                   // otherwise: 0 for --help/--version, 2 for a usage error
  std::string output;                  // help text, or the error naming the problem
};

// Parses `args` (argv without argv[0]). Reads PET_* defaults, PYTHON_EXEC, PATH and
// OMP_NUM_THREADS from the process environment. Never exits or throws.
ParsedCommandLine parse_command_line(const std::vector<std::string>& args);

}  // namespace ddprun::launcher
