// ddp::record and the uncaught-exception handler (the signal side is fatal_signals.cc).
#include "ddp/failure.h"

#include <cxxabi.h>
#include <unistd.h>

#include <time.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <mutex>
#include <string>
#include <typeinfo>

#include <c10/util/Exception.h>

#include "ddp/error.h"
#include "detail/torch_compat.h"
#include "error_file.h"
#include "fatal_signals.h"
#include "stack_trace.h"

namespace ddp {
namespace {

// How long a rank whose error only says that a peer went away waits for its launcher to stop
// it, so that the launcher observes the peer's failure first and names it as the root cause.
constexpr std::chrono::seconds kPeerLostGrace{5};

struct Report {
  std::string message;  // "<Type>: <what>", like Python's "RuntimeError: ..."
  std::string stack;
  bool peer_lost = false;  // a consequence of another rank's failure
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
                e.backtrace(),
            e.kind() == ErrorKind::kPeerLost};
  } catch (const c10::Error& e) {
    return {
        type_name(typeid(e)) + ": " + e.what_without_backtrace(),
        "LibTorch backtrace where the error was raised:\n" + detail::compat::error_backtrace(e)};
  } catch (const std::exception& e) {
    return {type_name(typeid(e)) + ": " + e.what(), here};
  } catch (...) {
    return {"unknown exception (a type not derived from std::exception)", here};
  }
}

// Sleeps until the launcher's SIGTERM ends the process, or `grace` passes. The signal is the
// event waited for: its default action ends the process inside nanosleep.
void let_the_launcher_stop_us(std::chrono::seconds grace) {
  timespec left{static_cast<time_t>(grace.count()), 0};
  while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

void report(const Report& r) {
  std::cout.flush();
  std::fflush(stdout);
  std::cerr << "\n*** " << r.message << "\n" << r.stack << std::flush;
  const std::string path = detail::error_file_from_env();
  if (r.peer_lost && !path.empty()) {
    std::cerr << "ddp: a peer closed its connection, so another rank probably failed first; "
                 "waiting up to "
              << kPeerLostGrace.count()
              << " s for the launcher to stop this rank so that its report names that rank\n"
              << std::flush;
    let_the_launcher_stop_us(kPeerLostGrace);
  }
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
