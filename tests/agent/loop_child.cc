#include "tests/agent/loop_child.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

extern char** environ;

namespace ddprun::agent::testing {

std::unique_ptr<LoopChild> LoopChild::start(boost::asio::io_context& io,
                                            const std::vector<std::string>& argv,
                                            const std::map<std::string, std::string>& extra_env) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : extra_env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return nullptr;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the test died before prctl took effect
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::close_range(3, ~0U, 0);
    ::execve(argp[0], argp.data(), envp.data());
    ::_exit(127);
  }
  std::unique_ptr<LoopChild> child(new LoopChild(io));
  child->pid_ = pid;
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    ADD_FAILURE() << "pidfd_open: " << std::strerror(errno);
    return nullptr;  // the destructor of `child` kills and reaps it
  }
  child->pidfd_.assign(pidfd);
  child->watch();
  return child;
}

void LoopChild::watch() {
  std::weak_ptr<bool> alive = alive_;
  pidfd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                    [this, alive](const boost::system::error_code& ec) {
                      if (alive.expired() || ec) return;
                      int status = 0;
                      if (::waitpid(pid_, &status, WNOHANG) != pid_) {
                        watch();  // not yet reapable (cannot happen for a pidfd): wait again
                        return;
                      }
                      exit_ = ExitStatus::from_wait_status(status);
                      if (on_exit) on_exit(*exit_);
                    });
}

LoopChild::~LoopChild() {
  alive_.reset();
  boost::system::error_code ignored;
  pidfd_.close(ignored);
  if (pid_ > 0 && !exit_) {
    ::kill(pid_, SIGKILL);  // not reaped yet, so the pid is still this child's
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace ddprun::agent::testing
