// A process group of one rank made without a launcher's environment: for the tests that run
// the SDK's paths in the test process itself (DDP's checks, snapshots, failure reports).
#pragma once

#include <memory>

#include "ddp/ddp.h"

namespace ddp_test {

inline std::shared_ptr<ddp::ProcessGroup> single_process_group() {
  ddp::LaunchEnv env;
  env.from_launcher = false;
  return ddp::init_process_group({}, env);
}

}  // namespace ddp_test
