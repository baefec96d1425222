// Workers that fail on purpose, for the failure-report tests: rank 1 fails; the others wait in
// a barrier, which fails when rank 1's connections close (a "peer lost" error: the SDK then
// lets the launcher stop that rank, so that the report's root cause is rank 1). The functions
// that fail are not inlined, so their names must appear in the native backtrace.
#include <iostream>

#include "tests/worker_sdk/worker/worker.h"

namespace worker {
namespace {

[[gnu::noinline]] void throw_from_here_for_test(int rank) {
  throw ddp::Error(rank, "test_failure", "deliberate failure for the failure-report test");
}

[[gnu::noinline]] void segfault_here_for_test(volatile int* where) {
  *where = 42;  // where is null: SIGSEGV
}

[[gnu::noinline]] void uncaught_throw_for_test() {
  throw std::runtime_error("deliberate uncaught exception");
}

void wait_for_the_launcher(const Group& g) {
  g->barrier();  // fails once rank 1 is gone
}

}  // namespace

int failure_scenario(const std::string& scenario, const Args& args) {
  if (scenario == "uncaught") {
    // No ddp::record: init_process_group's terminate handler reports it.
    auto g = ddp::init_process_group();
    if (g->rank() == 1) uncaught_throw_for_test();
    wait_for_the_launcher(g);
    return 0;
  }
  return ddp::record([&] {
    auto g = ddp::init_process_group();
    if (g->rank() == 1) {
      if (scenario == "throw") throw_from_here_for_test(g->rank());
      volatile int* null_pointer = nullptr;
      if (scenario == "segfault") segfault_here_for_test(null_pointer);
    }
    wait_for_the_launcher(g);
    return 0;
  });
}

}  // namespace worker
