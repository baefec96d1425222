// The floor of the multi-node launch benchmark: what K agents on loopback cannot beat. K forked
// processes (no exec, no parsing, no logging), each on its own address 127.0.0.<i+1>, meet at a
// TCP barrier on 127.0.0.1 (one byte in from each, one byte out to each once all K are in),
// then each spawns one worker (fork + exec, the same stamp worker the launchers run) and waits
// for it. The caller takes the time before starting this program and the workers' stamps.
//
// usage: mn_floor <K> <worker> [args...]   (the worker inherits the environment, plus
//        WORLD_SIZE=K, LOCAL_RANK=0, BENCH_NODE=<i+1>)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

sockaddr_in loopback(const std::string& addr, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  return sa;
}

// One "agent": barrier, then spawn and wait for the worker. Runs in a forked child.
[[noreturn]] void agent(int index, int k, uint16_t port, char** worker_argv) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const std::string self = "127.0.0." + std::to_string(index + 1);
  sockaddr_in local = loopback(self, 0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) die("bind");
  sockaddr_in server = loopback("127.0.0.1", port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) die("connect");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char byte = 'j';
  if (::write(fd, &byte, 1) != 1 || ::read(fd, &byte, 1) != 1) die("barrier");
  ::close(fd);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("WORLD_SIZE", std::to_string(k).c_str(), 1);
    ::setenv("LOCAL_RANK", "0", 1);
    ::setenv("BENCH_NODE", std::to_string(index + 1).c_str(), 1);
    ::execv(worker_argv[0], worker_argv);
    die("execv");
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::_Exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: mn_floor <K> <worker> [args...]\n");
    return 2;
  }
  const int k = std::atoi(argv[1]);
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in any = loopback("127.0.0.1", 0);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0) die("bind");
  if (::listen(listener, k) != 0) die("listen");
  socklen_t len = sizeof any;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&any), &len);
  const uint16_t port = ntohs(any.sin_port);

  std::vector<pid_t> agents;
  for (int i = 0; i < k; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
      ::close(listener);
      agent(i, k, port, argv + 2);
    }
    agents.push_back(pid);
  }
  std::vector<int> members;
  char byte = 0;
  while (static_cast<int>(members.size()) < k) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) die("accept");
    if (::read(fd, &byte, 1) != 1) die("barrier read");
    members.push_back(fd);
  }
  for (int fd : members) {
    if (::write(fd, "g", 1) != 1) die("barrier write");
    ::close(fd);
  }
  int failed = 0;
  for (pid_t pid : agents) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed == 0 ? 0 : 1;
}
