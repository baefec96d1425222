#include "launcher/python_interpreter.h"

#include <unistd.h>

#include <filesystem>

#include "agent/process/process_launcher.h"

namespace ddprun::launcher {

Result<PythonChoice> choose_python(const std::string& python_exec, const std::string& launcher_dir,
                                   const std::string& path_env) {
  if (!python_exec.empty()) {
    auto exe = agent::find_executable(python_exec, path_env);
    if (!exe) return exe.status().with_context("PYTHON_EXEC");
    return PythonChoice{python_exec, *exe, "PYTHON_EXEC"};
  }
  if (!launcher_dir.empty()) {
    // Not resolved further: a virtual environment's python3 is a link to the base interpreter,
    // and only its own path makes Python take the environment's site-packages.
    const std::string beside = launcher_dir + "/python3";
    if (::access(beside.c_str(), X_OK) == 0 && !std::filesystem::is_directory(beside)) {
      return PythonChoice{beside, beside, "beside ddprun"};
    }
  }
  auto exe = agent::find_executable("python3", path_env);
  if (!exe) {
    return exe.status().with_context(
        "Python interpreter (none beside ddprun nor on PATH; set PYTHON_EXEC to choose one)");
  }
  return PythonChoice{"python3", *exe, "the python3 on PATH; PYTHON_EXEC is unset"};
}

std::string own_executable_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return exe.parent_path().string();
}

}  // namespace ddprun::launcher
