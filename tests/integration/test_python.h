// Which Python, and so which torch, a test's Python code runs with.
//
// Every test that runs real Python torch code is registered with ctest once per torch
// (tests/CMakeLists.txt, ddprun_add_gtest's TORCH flag): as itself for Debian's torch 1.13
// (/usr/bin/python3) and with the suffix ".torch2" for PyTorch 2.x from the project's virtual
// environment. ctest tells each copy its interpreter in DDPRUN_TEST_PYTHON and the torch's
// major version in DDPRUN_TEST_TORCH; run by hand, a test binary uses the build's default
// (DDPRUN_TEST_PYTHON at compile time, torch 1.13) unless those are set.
#pragma once

#include <cstdlib>
#include <string>

namespace ddprun::testing {

inline std::string test_python() {
  const char* chosen = std::getenv("DDPRUN_TEST_PYTHON");
  return chosen && *chosen ? chosen : DDPRUN_TEST_PYTHON;
}

// 1 for torch 1.x, 2 for torch 2.x.
inline int test_torch_major() {
  const char* chosen = std::getenv("DDPRUN_TEST_TORCH");
  return chosen && *chosen ? std::atoi(chosen) : 1;
}

}  // namespace ddprun::testing
