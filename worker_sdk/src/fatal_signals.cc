#include "fatal_signals.h"

#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <mutex>

#include "error_file.h"
#include "stack_trace.h"

namespace ddp::detail {
namespace {

constexpr unsigned kWatchdogSeconds = 5;
constexpr std::size_t kErrorFilePathMax = 4096;

// Written before the handlers are installed (under g_install_mutex), read by the handler.
char g_error_file[kErrorFilePathMax];
// CollectiveScope: how many are open, and the outermost one's operation (written before the
// count goes up from 0, so a handler that sees a count sees a name; a torn name is harmless).
std::atomic<int> g_collective_depth{0};
char g_collective_name[64];
// note_failed_collective: the first collective that failed (written before the flag is set).
std::atomic<bool> g_collective_failed{false};
char g_failed_collective_name[64];
std::atomic<bool> g_handled[NSIG];
std::atomic<int> g_reporting_thread{0};  // tid of the thread writing the report, 0 if none
std::mutex g_install_mutex;

// The report, built in static storage: the handler must not allocate.
char g_message[512];
char g_stack[48 * 1024];
alignas(16) char g_alt_stack[256 * 1024];

void write_all(int fd, const char* s, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}
void write_str(int fd, const char* s) { write_all(fd, s, ::strlen(s)); }

// Appends text to a fixed buffer (NUL-terminated, cut at capacity).
void append(char* buffer, std::size_t capacity, const char* text) {
  std::size_t used = ::strlen(buffer);
  while (*text != '\0' && used + 1 < capacity) buffer[used++] = *text++;
  buffer[used] = '\0';
}
void append_number(char* buffer, std::size_t capacity, unsigned long value, int base) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value % static_cast<unsigned>(base)];
    value /= static_cast<unsigned>(base);
  } while (value != 0);
  char text[28];
  int k = 0;
  if (base == 16) text[k++] = '0', text[k++] = 'x';
  while (n > 0) text[k++] = digits[--n];
  text[k] = '\0';
  append(buffer, capacity, text);
}

void* interrupted_pc(void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  if (uc == nullptr) return nullptr;
#if defined(__x86_64__)
  return reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return reinterpret_cast<void*>(uc->uc_mcontext.pc);
#else
  return nullptr;
#endif
}

// "SIGSEGV: Segmentation fault (fatal signal; address 0x0)" and the like.
void describe(int signo, const siginfo_t* info) {
  g_message[0] = '\0';
  const char* abbrev = ::sigabbrev_np(signo);
  const char* description = ::sigdescr_np(signo);
  append(g_message, sizeof g_message, "SIG");
  append(g_message, sizeof g_message, abbrev != nullptr ? abbrev : "?");
  append(g_message, sizeof g_message, ": ");
  append(g_message, sizeof g_message, description != nullptr ? description : "signal");
  append(g_message, sizeof g_message, " (fatal signal ");
  append_number(g_message, sizeof g_message, static_cast<unsigned long>(signo), 10);
  if (info != nullptr && info->si_code <= 0 && info->si_pid != ::getpid()) {
    // Sent by another process: for SIGABRT, a launcher asking a hung worker where it is.
    append(g_message, sizeof g_message, ", sent by pid ");
    append_number(g_message, sizeof g_message, static_cast<unsigned long>(info->si_pid), 10);
  } else if (info != nullptr &&
             (signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL)) {
    append(g_message, sizeof g_message, ", address ");
    append_number(g_message, sizeof g_message, reinterpret_cast<unsigned long>(info->si_addr), 16);
  }
  append(g_message, sizeof g_message, ", pid ");
  append_number(g_message, sizeof g_message, static_cast<unsigned long>(::getpid()), 10);
  append(g_message, sizeof g_message, ", thread ");
  append_number(g_message, sizeof g_message, static_cast<unsigned long>(::syscall(SYS_gettid)), 10);
  append(g_message, sizeof g_message, ")");
}

// Formats the stack one frame at a time and writes each line to stderr at once, so a report
// cut short by the watchdog still shows its first frames.
void report_stack(void* context) {
  void* frames[kMaxStackFrames];
  const int n = capture_stack(frames, kMaxStackFrames, 0);
  // Start at the interrupted instruction: the frames before it are this handler's and the
  // kernel's signal trampoline.
  int first = 0;
  void* pc = interrupted_pc(context);
  for (int i = 0; i < n; ++i) {
    if (frames[i] == pc) {
      first = i;
      break;
    }
  }
  g_stack[0] = '\0';
  append(g_stack, sizeof g_stack, "Native backtrace (most recent call first):\n");
  write_str(STDERR_FILENO, g_stack);
  char line[1200];
  for (int i = first; i < n; ++i) {
    format_stack(&frames[i], 1, i - first, i == first && pc != nullptr, line, sizeof line);
    write_str(STDERR_FILENO, line);
    append(g_stack, sizeof g_stack, line);
  }
}

void on_fatal_signal(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const int tid = static_cast<int>(::syscall(SYS_gettid));
  int expected = 0;
  if (!g_reporting_thread.compare_exchange_strong(expected, tid)) {
    // Another thread is reporting; it ends the process. Wait without spinning.
    for (;;) ::pause();
  }
  ::alarm(kWatchdogSeconds);
  describe(signo, info);
  write_str(STDERR_FILENO, "\n*** ");
  write_str(STDERR_FILENO, g_message);
  write_str(STDERR_FILENO, "\n");
  if (g_collective_depth.load() > 0) {
    write_str(STDERR_FILENO, "*** ddp: waiting in a collective (");
    write_str(STDERR_FILENO, g_collective_name);
    write_str(STDERR_FILENO, ")\n");
  } else if (g_collective_failed.load()) {
    write_str(STDERR_FILENO, "*** ddp: waiting in a collective (");
    write_str(STDERR_FILENO, g_failed_collective_name);
    write_str(STDERR_FILENO, ", which failed)\n");
  } else {
    write_str(STDERR_FILENO, "*** ddp: not in a collective\n");
  }
  report_stack(context);
  if (g_error_file[0] != '\0') {
    // The report's first line is the message; the stack follows it, because a launcher shows
    // a signal's own description as the traceback and prints the message beside it.
    static char full[sizeof g_message + sizeof g_stack + 2];
    full[0] = '\0';
    append(full, sizeof full, g_message);
    append(full, sizeof full, "\n");
    append(full, sizeof full, g_stack);
    write_error_file(g_error_file, full, g_stack, static_cast<long>(::time(nullptr)));
  }
  // Die of the same signal: default action, raised again; it is delivered once this handler
  // returns (the signal is blocked while it runs). A fault re-executes and is delivered too.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(signo, &dfl, nullptr);
  ::raise(signo);
  errno = saved_errno;
}

void install_alternate_stack() {
  stack_t current{};
  if (::sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;
  stack_t alt{};
  alt.ss_sp = g_alt_stack;
  alt.ss_size = sizeof g_alt_stack;
  ::sigaltstack(&alt, nullptr);
}

}  // namespace

std::vector<int> default_fatal_signals() { return {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}; }

std::vector<int> install_fatal_signal_handlers(const FatalSignalConfig& config) {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  warm_up_stack_trace();
  const std::string& path = config.error_file;
  const std::size_t n = std::min(path.size(), kErrorFilePathMax - 1);
  path.copy(g_error_file, n);
  g_error_file[n] = '\0';
  install_alternate_stack();
  const std::vector<int> wanted = config.signals.empty() ? default_fatal_signals() : config.signals;
  for (int signo : wanted) {
    if (signo <= 0 || signo >= NSIG || g_handled[signo]) continue;
    struct sigaction old {};
    if (::sigaction(signo, nullptr, &old) != 0) continue;
    const bool is_default = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
    if (!is_default) continue;  // the program's own handler (or SIG_IGN) wins
    struct sigaction action {};
    action.sa_sigaction = on_fatal_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    ::sigemptyset(&action.sa_mask);
    if (::sigaction(signo, &action, nullptr) == 0) g_handled[signo] = true;
  }
  std::vector<int> handled;
  for (int signo = 1; signo < NSIG; ++signo) {
    if (g_handled[signo]) handled.push_back(signo);
  }
  return handled;
}

CollectiveScope::CollectiveScope(const std::string& operation) noexcept {
  if (g_collective_depth.load() == 0) {
    const std::size_t n = std::min(operation.size(), sizeof g_collective_name - 1);
    operation.copy(g_collective_name, n);
    g_collective_name[n] = '\0';
  }
  g_collective_depth.fetch_add(1);
}

CollectiveScope::~CollectiveScope() { g_collective_depth.fetch_sub(1); }

void note_failed_collective(const std::string& operation) noexcept {
  if (g_collective_failed.load()) return;  // the first failure is the one that matters
  const std::size_t n = std::min(operation.size(), sizeof g_failed_collective_name - 1);
  operation.copy(g_failed_collective_name, n);
  g_failed_collective_name[n] = '\0';
  g_collective_failed.store(true);
}

void uninstall_fatal_signal_handlers() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  for (int signo = 1; signo < NSIG; ++signo) {
    if (!g_handled[signo]) continue;
    std::signal(signo, SIG_DFL);
    g_handled[signo] = false;
  }
}

}  // namespace ddp::detail
