// The bootstrap's Python files as compiled into ddprun (generated from agent/python/ by CMake:
// agent/CMakeLists.txt, python_bootstrap_sources.cc.in).
#pragma once

#include <span>
#include <string_view>

namespace ddprun::agent {

struct PythonSource {
  std::string_view name;  // file name, e.g. "_ddprun_bootstrap.py"
  std::string_view text;
};

std::span<const PythonSource> python_bootstrap_sources();

}  // namespace ddprun::agent
