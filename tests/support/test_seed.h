// The seed of a randomized test: $DDPRUN_TEST_SEED when set (to replay a failure), else a
// fresh one. The test prints it with SCOPED_TRACE("DDPRUN_TEST_SEED=" + std::to_string(seed)),
// so that a failure names the seed that replays it.
#pragma once

#include <cstdlib>
#include <random>
#include <string>

namespace ddprun::testing {

inline unsigned test_seed() {
  const char* fixed = std::getenv("DDPRUN_TEST_SEED");
  return fixed ? static_cast<unsigned>(std::stoul(fixed)) : std::random_device{}();
}

}  // namespace ddprun::testing
