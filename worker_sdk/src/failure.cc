// ddp::record and the uncaught-exception handler (the signal side is fatal_signals.cc).
#include "ddp/failure.h"

#include <cxxabi.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <mutex>
#include <string>
#include <typeinfo>

#include <c10/util/Exception.h>

#include "ddp/error.h"
#include "error_file.h"
#include "fatal_signals.h"
#include "stack_trace.h"

namespace ddp {
namespace {

struct Report {
  std::string message;  // "<Type>: <what>", like Python's "RuntimeError: ..."
  std::string stack;
};

std::string type_name(const std::type_info& type) {
  int status = 0;
  char* name = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : type.name();
  std::free(name);
  return out;
}

// `caught_here`: the stack now is where the exception was caught (ddp::record), not where
// it was thrown (std::terminate runs before any unwinding).
Report describe(std::exception_ptr error, bool caught_here) {
  const std::string here = std::string("Native backtrace where the exception was ") +
                           (caught_here ? "caught by ddp::record" : "thrown (uncaught)") +
                           " (most recent call first):\n" + detail::current_stack(2);
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {"ddp::Error: " + std::string(e.what()),
            "Native backtrace where the ddp::Error was raised (most recent call first):\n" +
                e.backtrace()};
  } catch (const c10::Error& e) {
    return {type_name(typeid(e)) + ": " + e.what_without_backtrace(),
            "LibTorch backtrace where the error was raised:\n" + e.backtrace()};
  } catch (const std::exception& e) {
    return {type_name(typeid(e)) + ": " + e.what(), here};
  } catch (...) {
    return {"unknown exception (a type not derived from std::exception)", here};
  }
}

void report(const Report& r) {
  std::cout.flush();
  std::fflush(stdout);
  std::cerr << "\n*** " << r.message << "\n" << r.stack << std::flush;
  const std::string path = detail::error_file_from_env();
  if (!path.empty() && !detail::write_error_file(path.c_str(), r.message.c_str(), r.stack.c_str(),
                                                 static_cast<long>(std::time(nullptr)))) {
    std::cerr << "ddp: could not write the error file " << path << "\n" << std::flush;
  }
}

[[noreturn]] void on_terminate() noexcept {
  // One report per process, even if several threads terminate at once.
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true)) {
    try {
      auto error = std::current_exception();
      report(error ? describe(error, /*caught_here=*/false)
                   : Report{"std::terminate called without an active exception",
                            "Native backtrace (most recent call first):\n" +
                                detail::current_stack(1)});
    } catch (...) {
      // Reporting failed (out of memory?): exit with the failure status all the same.
    }
    std::_Exit(1);
  }
  for (;;) ::pause();
}

std::mutex g_install_mutex;
bool g_terminate_installed = false;

}  // namespace

void install_failure_handlers(const FailureOptions& options) {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  detail::warm_up_stack_trace();
  if (options.handle_uncaught_exceptions && !g_terminate_installed) {
    std::set_terminate(on_terminate);
    g_terminate_installed = true;
  }
  if (options.handle_fatal_signals) {
    detail::FatalSignalConfig config;
    config.error_file = detail::error_file_from_env();
    detail::install_fatal_signal_handlers(config);
  }
}

void record_exception(std::exception_ptr error) noexcept {
  if (!error) return;
  try {
    report(describe(error, /*caught_here=*/true));
  } catch (...) {
  }
}

}  // namespace ddp
