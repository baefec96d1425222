// The Python entry point checked before any worker starts: a script that does not exist is a
// mistake on the command line (exit 2, the path and the directory in the message, a close
// match when there is one), not a worker failure that burns every --max_restarts on Python
// failing to open it (issue 22). `--no_python` executables are resolved on the command line
// already (find_executable).
//
// `-m module` is not checked: only Python itself knows where a module would come from
// (editable installs put import hooks in .pth files), and running it here would cost every
// start an interpreter; Python's own "No module named ..." reaches the report as before.
#pragma once

#include <string>

#include "agent/options.h"
#include "common/result.h"

namespace ddprun::launcher {

// For a Python command (argv: python, -u, script, args...): ok when the script is a readable
// file or a directory or zip that Python can run (a directory needs __main__.py); else an
// invalid-argument error naming the script and `cwd`, where a relative path is looked up.
// Anything else (not Python, -m, `-c`) is ok.
Status check_entry_point(const agent::WorkerCommand& command, const std::string& cwd);

}  // namespace ddprun::launcher
