#include "agent/process/process_launcher.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <optional>
#include <sstream>

#include <spdlog/spdlog.h>

#include "agent/process/process_hygiene.h"
#include "common/descriptor_limit.h"

namespace ddprun::agent {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

Result<StreamFds> prepare_stream(const StdioTarget& target) {
  StreamFds fds;
  switch (target.kind) {
    case StdioTarget::Kind::kInherit:
      break;
    case StdioTarget::Kind::kFile: {
      int fd = ::open(target.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) {
        return Status::error("cannot open log file " + target.path + ": " + errno_text(errno));
      }
      fds.child_fd.reset(fd);
      break;
    }
    case StdioTarget::Kind::kPipe: {
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0) return Status::error("pipe2: " + errno_text(errno));
      fds.parent_read.reset(p[0]);
      fds.child_fd.reset(p[1]);
      break;
    }
  }
  return fds;
}

namespace {

// Everything below runs in the forked child before exec: async-signal-safe calls only, no
// allocation. On any failure the errno goes up `error_fd` and the child exits 127.
[[noreturn]] void child_fail(int error_fd, int err) {
  ssize_t ignored = ::write(error_fd, &err, sizeof err);
  (void)ignored;
  ::_exit(127);
}

// Closes every descriptor from 3 up except `keep` (which is >= 3: 0-2 are always open, see
// main). close_range exists since Linux 5.9; older kernels take the bounded loop.
void close_descriptors_except(int keep) {
  bool closed = true;
  if (keep > 3) closed = ::syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u) == 0;
  closed = closed && ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u) == 0;
  if (closed) return;
  long max_fd = ::sysconf(_SC_OPEN_MAX);
  for (long fd = 3; fd < max_fd && fd < 65536; ++fd) {
    if (fd != keep) ::close(static_cast<int>(fd));
  }
}

[[noreturn]] void exec_child(pid_t agent_pid, int error_fd, int in_fd, int out_fd, int err_fd,
                             const cpu_set_t* cpus, const rlimit* fd_limit, const char* path,
                             char* const argv[], char* const envp[]) {
  if (::setpgid(0, 0) != 0) child_fail(error_fd, errno);
  // Die with the agent, even when it is SIGKILLed. Checked after the prctl so that an agent
  // that died before it is noticed too.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(error_fd, errno);
  if (::getppid() != agent_pid) ::_exit(1);
  // Every signal is blocked (spawn): first back to the default action, so that none of the
  // agent's handlers runs here (they write to its signal pipe), then unblocked, since exec
  // keeps the mask (the agent blocks nothing it forwards, but a caller may have). Ignored
  // dispositions would survive exec: reset too.
  for (int sig = 1; sig < NSIG; ++sig) (void)::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (cpus && ::sched_setaffinity(0, sizeof(cpu_set_t), cpus) != 0) child_fail(error_fd, errno);
  if (::dup2(in_fd, STDIN_FILENO) < 0) child_fail(error_fd, errno);
  if (out_fd >= 0 && ::dup2(out_fd, STDOUT_FILENO) < 0) child_fail(error_fd, errno);
  if (err_fd >= 0 && ::dup2(err_fd, STDERR_FILENO) < 0) child_fail(error_fd, errno);
  close_descriptors_except(error_fd);  // error_fd is close-on-exec
  // The descriptor limit the agent was started with, not the one it raised for itself
  // (common/descriptor_limit.h); after the close above, which ranges over the raised one.
  if (fd_limit) ::setrlimit(RLIMIT_NOFILE, fd_limit);
  ::execve(path, argv, envp);
  child_fail(error_fd, errno);
}

std::vector<char*> to_cstrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

PosixProcessLauncher::PosixProcessLauncher(boost::asio::io_context& io)
    : child_signals_(io, SIGCHLD) {
  become_child_subreaper();
  watch_children();
}

void PosixProcessLauncher::watch_children() {
  child_signals_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    reap_children();
    watch_children();
  });
}

void PosixProcessLauncher::reap_children() {
  // One SIGCHLD may stand for several exits (and stops): reap until none is left.
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (pid <= 0) return;
    if (exit_handler_) exit_handler_(pid, ExitStatus::from_wait_status(status));
  }
}

int PosixProcessLauncher::end_all_children(Millis wait_bound) {
  boost::system::error_code ignored;
  child_signals_.cancel(ignored);
  return kill_adopted_children(wait_bound, abandoned_);
}

void PosixProcessLauncher::workers_done() {
  // Tearing the sentinel's copy of our address space down takes about a millisecond; it
  // happens while the agent removes its log directory and reports, not after.
  if (sentinel_) sentinel_->release();
}

void PosixProcessLauncher::start_sentinel() {
  if (sentinel_ || sentinel_failed_) return;
  auto sentinel = GroupSentinel::start();
  if (sentinel) {
    sentinel_.emplace(std::move(sentinel.value()));
  } else {
    sentinel_failed_ = true;
    spdlog::warn("{}; workers' children may outlive a killed ddprun", sentinel.error_message());
  }
}

void PosixProcessLauncher::watch_group(pid_t pgid) {
  start_sentinel();
  if (sentinel_) sentinel_->watch(pgid);
}

Result<SpawnedProcess> PosixProcessLauncher::spawn(const SpawnRequest& request) {
  start_sentinel();
  auto out = prepare_stream(request.stdout_target);
  if (!out) return out.status();
  auto err = prepare_stream(request.stderr_target);
  if (!err) return err.status();
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) return Status::error("pipe2: " + errno_text(errno));
  UniqueFd error_read(error_pipe[0]), error_write(error_pipe[1]);
  UniqueFd null_in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_in.valid()) return Status::error("cannot open /dev/null: " + errno_text(errno));
  std::optional<cpu_set_t> cpus;
  if (!request.cpu_affinity.empty()) {
    cpus.emplace();
    CPU_ZERO(&*cpus);
    for (int cpu : request.cpu_affinity) {
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &*cpus);
    }
  }

  std::vector<char*> argv = to_cstrings(request.argv);
  std::vector<char*> envp = to_cstrings(request.envp);
  const pid_t agent_pid = ::getpid();
  const std::optional<rlimit> fd_limit = limit_for_children();
  // Signals stay blocked until the child has reset their handlers (see exec_child). (vfork
  // was measured: it holds the agent until each child has exec'd, and starting 8 workers
  // took 1.3 ms longer than with fork, whose children exec in parallel.)
  sigset_t all, previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = ::fork();
  if (pid == 0) {
    exec_child(agent_pid, error_write.get(), null_in.get(), out->child_fd.get(),
               err->child_fd.get(), cpus ? &*cpus : nullptr, fd_limit ? &*fd_limit : nullptr,
               request.executable.c_str(), argv.data(), envp.data());
  }
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) return Status::error("fork: " + errno_text(fork_errno));
  // Also from the parent: the group must exist before the agent can signal it.
  ::setpgid(pid, pid);
  if (sentinel_) sentinel_->watch(pid);
  SpawnedProcess spawned;
  spawned.pid = pid;
  spawned.stdout_pipe = std::move(out->parent_read);
  spawned.stderr_pipe = std::move(err->parent_read);
  spawned.exec_check = std::move(error_read);
  spawned.executable = request.executable;
  return spawned;
}

Status PosixProcessLauncher::confirm_started(SpawnedProcess& process) {
  if (!process.exec_check.valid()) return {};
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(process.exec_check.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  process.exec_check.reset();
  if (n <= 0) return {};  // closed by a successful exec
  // exec failed: the child has exited 127. Reap it here, before the SIGCHLD handler could take
  // it for a worker that ran.
  int status = 0;
  while (::waitpid(process.pid, &status, 0) < 0 && errno == EINTR) {
  }
  release_group(process.pid);
  return Status::error("cannot execute " + process.executable + ": " + errno_text(child_errno));
}

void PosixProcessLauncher::signal_group(pid_t pgid, int signo) {
  if (pgid > 1) ::kill(-pgid, signo);  // ESRCH: the group is already gone, which is fine
}

void PosixProcessLauncher::release_group(pid_t pgid) {
  if (sentinel_) sentinel_->forget(pgid);
}

Result<std::string> find_executable(const std::string& name, const std::string& path_env) {
  auto is_executable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (is_executable(name)) return name;
    return Status::error("'" + name + "' is not an executable file");
  }
  std::stringstream dirs(path_env);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable(candidate)) return candidate;
  }
  return Status::error("cannot find executable '" + name + "' on PATH");
}

}  // namespace ddprun::agent
