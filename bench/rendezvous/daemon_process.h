// A ddp-rendezvous process for the rendezvous benchmarks: started on 127.0.0.1, port 0, with
// the given flags; its "listening on" line gives the port. Killed (by PID, our own child) and
// reaped when the handle goes, on every path.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace ddprun::bench {

struct DaemonProcess {
  pid_t pid = -1;
  uint16_t port = 0;
  DaemonProcess() = default;
  DaemonProcess(DaemonProcess&& other) noexcept
      : pid(std::exchange(other.pid, -1)), port(other.port) {}
  DaemonProcess& operator=(DaemonProcess&&) = delete;
  ~DaemonProcess() { end(); }
  void end() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
};

// `binary --host 127.0.0.1 --port 0 --log-level warn <flags...>`; aborts if it cannot start.
inline DaemonProcess spawn_daemon(const std::string& binary,
                                  const std::vector<std::string>& flags) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  std::vector<std::string> args = {binary, "--host",      "127.0.0.1", "--port",
                                   "0",    "--log-level", "warn"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  DaemonProcess d;
  if (posix_spawn(&d.pid, binary.c_str(), &actions, nullptr, argv.data(), environ) != 0) {
    std::abort();
  }
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  std::string line;
  char c;
  while (::read(fds[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(fds[0]);
  if (line.rfind(':') == std::string::npos) std::abort();  // it did not come up
  d.port = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
  return d;
}

}  // namespace ddprun::bench
