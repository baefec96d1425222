// The program every Python worker runs before its script (agent/python/_ddprun_bootstrap.py,
// compiled into ddprun): fresh workers as `<python> -u <dir>/_ddprun_bootstrap.py <script> ...`,
// workers forked from the preload template through the same code (preload_launcher.h). It runs
// the script as `python -u script` would (argv, __main__, sys.path[0], tracebacks), and adds
// what ddprun offers every Python worker (docs/progress.md): its steps and busy times reported
// by themselves (DDPRUN_AUTO_PROGRESS_FILE), an uncaught exception told to the agent when it is
// raised (worker_channel.h), and a quick exit once the script and its atexit handlers are done.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace ddprun::agent {

// The bootstrap's own file name; the files beside it are the modules it imports.
inline constexpr char kBootstrapProgram[] = "_ddprun_bootstrap.py";

// Writes the bootstrap's files into `dir` (which must exist and be private), mode 0600.
Status write_python_bootstrap(const std::string& dir);

// A private directory holding the bootstrap, for one ddprun process; removed with it.
class PythonBootstrap {
 public:
  // Makes the directory under $TMPDIR (else /tmp) and writes the files.
  static Result<std::unique_ptr<PythonBootstrap>> create();
  ~PythonBootstrap();
  PythonBootstrap(const PythonBootstrap&) = delete;
  PythonBootstrap& operator=(const PythonBootstrap&) = delete;

  // <dir>/_ddprun_bootstrap.py
  std::string program() const { return dir_ + "/" + kBootstrapProgram; }
  // `argv` of a Python worker (`python -u [-m] target args...`) run through the bootstrap:
  // the program inserted after the interpreter's options. Other commands are returned as given.
  std::vector<std::string> wrap(const std::vector<std::string>& argv) const;

 private:
  explicit PythonBootstrap(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace ddprun::agent
