// Which torch a Python entry point will import, found without running Python: the launcher
// needs the major version to set the environment that torch version reads (1.x reads
// NCCL_ASYNC_ERROR_HANDLING, 2.x reads TORCH_NCCL_ASYNC_ERROR_HANDLING and warns about the old
// name), and importing torch would cost a second.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace ddprun::launcher {

// Looks for torch/version.py where `python` (the interpreter path as the user named it) would
// import torch from, in sys.path order: PYTHONPATH, the user site, a virtual environment's
// site-packages (and its base interpreter's when it includes system site packages), then the
// interpreter prefix's site-packages and dist-packages (Debian's layout included). Returns
// torch's __version__ ("1.13.0a0", "2.5.1+cu121"), or nullopt when none is found (an
// interpreter wrapper such as a pyenv shim, or no torch). Reads a few small files; no process.
std::optional<std::string> find_torch_version(const std::string& python,
                                              const std::map<std::string, std::string>& env);

// The major version of a torch version string; nullopt when it does not start with a number.
std::optional<int> torch_major_version(const std::string& version);

}  // namespace ddprun::launcher
