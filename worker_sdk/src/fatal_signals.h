// Fatal signals that explain themselves: a worker that dies of SIGSEGV, SIGBUS, SIGFPE, SIGILL
// or SIGABRT prints what happened and its native backtrace to stderr, writes the same to
// torchrun's error file (TORCHELASTIC_ERROR_FILE, see error_file.h), and then dies of that
// signal as it would have without the handler (same exit status for the launcher).
//
// The same handler serves hang reports: a launcher that finds a worker stuck sends it
// SIGABRT and reads the stack of the thread that received it (for a process blocked in a
// collective, the main thread) on stderr; the message then names the sending pid.
//
// Contract
// - Everything the handler does is async-signal-safe: backtrace() and absl::Symbolize after
//   warm-up, write(2), open(2), no allocation, no locks. It runs on an alternate stack in the
//   installing thread (so a stack overflow there is reported too).
// - One report per process: a second thread faulting meanwhile waits for the first to finish.
//   A fault inside the handler itself kills the process at once (the signal is blocked while
//   the handler runs, so the kernel applies the default action).
// - A watchdog alarm (5 s) ends the process should the report itself hang.
// - A signal the program already handles or ignores is left alone. LibTorch-free.
#pragma once

#include <string>
#include <vector>

namespace ddp::detail {

struct FatalSignalConfig {
  // The signals to report. Default: SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT.
  std::vector<int> signals;
  // Where the error JSON goes; empty: stderr only.
  std::string error_file;
};

// The default signal list.
std::vector<int> default_fatal_signals();

// Installs the handler for every listed signal whose disposition is still SIG_DFL; a second
// call replaces the error file path and adds signals. Returns the signals now handled. Not
// async-signal-safe; call it from the main thread before training starts.
std::vector<int> install_fatal_signal_handlers(const FatalSignalConfig& config);

// Marks the calling code as inside a collective (or barrier) named `operation` while it lives,
// so that a fatal signal's report says so first: "*** ddp: waiting in a collective (barrier)",
// else "*** ddp: not in a collective". A launcher that stops hung ranks reads that line to tell
// the rank that stopped first from the ranks that wait for it (ddprun's rank_activity.h).
// Scopes nest (the outermost names the operation); any thread. Cheap: two atomic operations
// and a short copy.
class CollectiveScope {
 public:
  explicit CollectiveScope(const std::string& operation) noexcept;
  ~CollectiveScope();
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;
};

// Records that the collective `operation` failed (a backend error: usually a peer that went
// away). A fatal signal's report then says "*** ddp: waiting in a collective (<op>, which
// failed)" even once the program is unwinding or exiting: the rank was a victim of its peer,
// not the one that stopped first. Any thread; async-signal-safe to read.
void note_failed_collective(const std::string& operation) noexcept;

// Restores SIG_DFL for every signal installed here (tests; programs that hand the signals to
// another handler).
void uninstall_fatal_signal_handlers();

}  // namespace ddp::detail
