// Failures that explain themselves: torch's @record for C++ workers.
//
// A Python worker decorated with @record writes torchrun's error file when it dies of an
// exception, so the launcher's failure report shows the cause. The SDK does the same for
// C++ workers, and also for crashes Python never sees:
//
//   int main(int argc, char** argv) {
//     return ddp::record([&] {          // catches, reports, returns 1
//       auto group = ddp::init_process_group();  // installs the handlers below
//       ...
//       ddp::destroy_process_group();
//       return 0;
//     });
//   }
//
// What is reported, and how
// - An exception that leaves ddp::record, or that nobody catches (std::terminate): the error
//   file (TORCHELASTIC_ERROR_FILE) gets {"message": "<Type>: <what>", "extraInfo":
//   {"py_callstack": <native backtrace>, "timestamp": ...}} and stderr the same; the process
//   exits 1, as a Python worker with @record does. The backtrace is where the error was
//   raised for ddp::Error (captured at construction) and c10::Error (LibTorch's own), where
//   it was thrown for an uncaught exception, and where record() caught it otherwise.
// - SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT: message and backtrace of the faulting thread on
//   stderr and in the error file, then the process dies of the signal (the launcher sees
//   the same exit status as without the handler). A SIGABRT sent by another process (a
//   launcher's hang report) prints the stack of the thread it interrupted.
// - Without TORCHELASTIC_ERROR_FILE (not under a launcher), stderr only.
#pragma once

#include <exception>
#include <type_traits>
#include <utility>

#include "ddp/export.h"

namespace ddp {

struct FailureOptions {
  // std::set_terminate: uncaught exceptions are reported and the process exits 1.
  bool handle_uncaught_exceptions = true;
  // SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT (a signal the program already handles or
  // ignores is left alone).
  bool handle_fatal_signals = true;
};

// Installs the handlers. Idempotent; init_process_group() calls it (InitOptions::
// install_failure_handlers). Reads TORCHELASTIC_ERROR_FILE when called.
DDP_API void install_failure_handlers(const FailureOptions& options = {});

// Reports `error` as described above (error file and stderr) without exiting. Never throws.
DDP_API void record_exception(std::exception_ptr error) noexcept;

// Runs `body` (returning int or void) and returns its result (0 for void). An exception
// escaping it is reported (record_exception) and record returns 1.
template <class F>
int record(F&& body) {
  install_failure_handlers();
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      body();
      return 0;
    } else {
      return static_cast<int>(body());
    }
  } catch (...) {
    record_exception(std::current_exception());
    return 1;
  }
}

}  // namespace ddp
