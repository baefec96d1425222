#include "tests/integration/process_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>

extern char** environ;  // NOLINT: POSIX

namespace ddprun::testing {
namespace {

std::string errno_text(const char* call, int err) {
  return std::string(call) + ": " + std::strerror(err);
}

std::vector<char*> to_cstrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// In the forked child: sends errno up the error pipe and exits 127.
[[noreturn]] void child_fail(int error_fd) {
  int err = errno;
  ssize_t ignored = ::write(error_fd, &err, sizeof err);
  (void)ignored;
  ::_exit(127);
}

// Runs in the forked child: async-signal-safe calls only (the test may have other threads).
[[noreturn]] void exec_child(pid_t parent, int stdin_fd, int stdout_fd, int stderr_fd, int error_fd,
                             const char* cwd, const char* path, char* const argv[],
                             char* const envp[]) {
  auto fail = [error_fd] { child_fail(error_fd); };
  if (::setpgid(0, 0) != 0) fail();
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail();
  if (::getppid() != parent) ::_exit(127);  // the test died before the prctl took effect
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  if (::dup2(stdin_fd, STDIN_FILENO) < 0 || ::dup2(stdout_fd, STDOUT_FILENO) < 0 ||
      ::dup2(stderr_fd, STDERR_FILENO) < 0) {
    fail();
  }
  if (cwd[0] != '\0' && ::chdir(cwd) != 0) fail();
  // Everything else the test holds is close-on-exec except what gtest or a library left open:
  // close it all but the error pipe (itself close-on-exec).
  if (error_fd > 3) ::syscall(SYS_close_range, 3u, static_cast<unsigned>(error_fd - 1), 0u);
  ::syscall(SYS_close_range, static_cast<unsigned>(error_fd + 1), ~0u, 0u);
  ::execve(path, argv, envp);
  child_fail(error_fd);
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const ChildExit& exit) {
  if (exit.signal != 0) return out << "killed by signal " << exit.signal;
  return out << "exit code " << exit.code;
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string kv(*entry);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::start(const ChildOptions& options) {
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) return Status::error(errno_text("open /dev/null", errno));
  int out[2], err[2], error_pipe[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::error(errno_text("pipe2", errno));
  UniqueFd out_read(out[0]), out_write(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return Status::error(errno_text("pipe2", errno));
  UniqueFd err_read(err[0]), err_write(err[1]);
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) return Status::error(errno_text("pipe2", errno));
  UniqueFd error_read(error_pipe[0]), error_write(error_pipe[1]);
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
  if (!stop.valid()) return Status::error(errno_text("eventfd", errno));

  std::vector<std::string> argv_strings{options.executable};
  argv_strings.insert(argv_strings.end(), options.args.begin(), options.args.end());
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : options.env) env_strings.push_back(key + "=" + value);
  std::vector<char*> argv = to_cstrings(argv_strings);
  std::vector<char*> envp = to_cstrings(env_strings);

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Status::error(errno_text("fork", errno));
  if (pid == 0) {
    exec_child(parent, dev_null.get(), out_write.get(), err_write.get(), error_write.get(),
               options.cwd.c_str(), options.executable.c_str(), argv.data(), envp.data());
  }
  ::setpgid(pid, pid);  // also here: the group must exist before the test may signal it
  child->pid_ = pid;
  out_write.reset();
  err_write.reset();
  error_write.reset();
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(error_read.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    child->exit_ = ChildExit{};  // reaped: the destructor must not signal the pid
    return Status::error("cannot execute " + options.executable + ": " +
                         std::strerror(child_errno));
  }
  // The pid cannot have been reused: the child is not reaped until this object reaps it.
  child->pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!child->pidfd_.valid()) return Status::error(errno_text("pidfd_open", errno));
  child->stdout_read_ = std::move(out_read);
  child->stderr_read_ = std::move(err_read);
  child->stop_event_ = std::move(stop);
  child->reader_ = std::thread([c = child.get()] { c->read_output(); });
  return child;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_) {
    ::kill(-pid_, SIGKILL);  // the group is ours while its leader is unreaped
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (reader_.joinable()) {
    const std::uint64_t one = 1;
    ssize_t ignored = ::write(stop_event_.get(), &one, sizeof one);
    (void)ignored;
    reader_.join();
  }
}

void ChildProcess::send_signal(int signo) {
  if (pid_ > 0 && !exit_) ::kill(pid_, signo);
}

void ChildProcess::read_output() {
  std::array<pollfd, 3> fds{{{stdout_read_.get(), POLLIN, 0},
                             {stderr_read_.get(), POLLIN, 0},
                             {stop_event_.get(), POLLIN, 0}}};
  std::string* sinks[2] = {&stdout_, &stderr_};
  int open_streams = 2;
  while (open_streams > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[2].revents != 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      std::lock_guard lock(mutex_);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else {
        fds[i].fd = -1;  // end of file (or an error): poll ignores negative descriptors
        --open_streams;
      }
      changed_.notify_all();
    }
  }
  std::lock_guard lock(mutex_);
  output_done_ = true;
  changed_.notify_all();
}

std::optional<ChildExit> ChildProcess::wait(Deadline deadline) {
  if (exit_) return exit_;
  pollfd p{pidfd_.get(), POLLIN, 0};
  for (;;) {
    const int ready = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (ready > 0) break;
    if (ready == 0) return std::nullopt;
    if (errno != EINTR) return std::nullopt;
  }
  int status = 0;
  pid_t reaped;
  do {
    reaped = ::waitpid(pid_, &status, 0);  // it has exited: this does not block
  } while (reaped < 0 && errno == EINTR);
  ChildExit result;
  if (WIFEXITED(status)) result.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  exit_ = result;
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [this] { return output_done_; });
  return exit_;
}

bool ChildProcess::wait_for_text(std::string ChildProcess::*stream, const std::string& needle,
                                 Deadline deadline) {
  std::unique_lock lock(mutex_);
  return changed_.wait_until(lock, deadline, [&] {
    return (this->*stream).find(needle) != std::string::npos || output_done_;
  }) && (this->*stream).find(needle) != std::string::npos;
}

bool ChildProcess::wait_for_stdout(const std::string& needle, Deadline deadline) {
  return wait_for_text(&ChildProcess::stdout_, needle, deadline);
}

bool ChildProcess::wait_for_stderr(const std::string& needle, Deadline deadline) {
  return wait_for_text(&ChildProcess::stderr_, needle, deadline);
}

std::string ChildProcess::stdout_text() const {
  std::lock_guard lock(mutex_);
  return stdout_;
}

std::string ChildProcess::stderr_text() const {
  std::lock_guard lock(mutex_);
  return stderr_;
}

bool ChildProcess::output_complete() const {
  std::lock_guard lock(mutex_);
  return output_done_;
}

}  // namespace ddprun::testing
