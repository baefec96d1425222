// Which Python runs the workers (not with --no_python): $PYTHON_EXEC when set; else the
// `python3` beside the ddprun executable, as in a virtual environment's bin/ (ddprun installed
// into an environment runs that environment's Python even when it is not activated, as
// torchrun runs the interpreter it runs in); else `python3` on PATH.
#pragma once

#include <string>

#include "common/result.h"

namespace ddprun::launcher {

struct PythonChoice {
  std::string argv0;       // what the worker's argv[0] says (the name or path as chosen)
  std::string executable;  // the file that is executed
  // How it was chosen, for reports: "PYTHON_EXEC", "beside ddprun", or "the python3 on PATH;
  // PYTHON_EXEC is unset".
  std::string how;
};

// `python_exec`: PYTHON_EXEC's value (empty: unset); `launcher_dir`: the directory of the
// running ddprun executable (empty: unknown); `path_env`: PATH's value.
Result<PythonChoice> choose_python(const std::string& python_exec, const std::string& launcher_dir,
                                   const std::string& path_env);

// The directory of the running executable (/proc/self/exe), or empty when it cannot be read.
std::string own_executable_dir();

}  // namespace ddprun::launcher
