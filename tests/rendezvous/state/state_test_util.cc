#include "tests/rendezvous/state/state_test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <boost/asio/steady_timer.hpp>

#include "rendezvous/state/etcd/etcd_client.h"

namespace ddprun::rdzv::state::testing {

Child::Child(std::vector<std::string> argv, const std::string& stderr_path) {
  int out[2], in[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(in, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the test died before we got here
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(in[0], STDIN_FILENO);
    if (!stderr_path.empty()) {
      const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(in[0]);
  out_ = out[0];
  in_ = in[1];
  ::fcntl(out_, F_SETFL, ::fcntl(out_, F_GETFL) | O_NONBLOCK);
}

Child::~Child() {
  kill();
  if (out_ >= 0) ::close(out_);
  close_stdin();
}

void Child::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);  // our own child, by PID
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

bool Child::exited() {
  if (pid_ <= 0) return false;
  if (::waitpid(pid_, nullptr, WNOHANG) != pid_) return false;
  pid_ = -1;
  return true;
}

void Child::close_stdin() {
  if (in_ >= 0) ::close(in_);
  in_ = -1;
}

int Child::wait_exit(Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // No event for "child exited" on a plain fd here: its stdout reaching EOF is one (the child
  // holds the only write end), so wait for that, then reap.
  while (!eof_ && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out_, POLLIN, 0};
    ::poll(&p, 1, 50);
    pump();
  }
  if (!eof_ || pid_ <= 0) return -1;
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool Child::pump() {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out_, buf, sizeof buf);
    if (n > 0) {
      partial_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) eof_ = true;
    break;
  }
  for (size_t nl; (nl = partial_.find('\n')) != std::string::npos;) {
    lines_.push_back(partial_.substr(0, nl));
    partial_.erase(0, nl + 1);
  }
  return !eof_;
}

std::optional<std::string> Child::read_line(Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    pump();
    if (!lines_.empty()) {
      std::string line = std::move(lines_.front());
      lines_.erase(lines_.begin());
      return line;
    }
    const auto left =
        std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (eof_ || left.count() <= 0) return std::nullopt;
    pollfd p{out_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
}

std::vector<std::string> Child::drain_lines() {
  // The child is dead or dying: its pipe reaches EOF once the kernel has closed it.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (pump() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out_, POLLIN, 0};
    ::poll(&p, 1, 100);
  }
  return std::exchange(lines_, {});
}

bool wait_for_output(const std::vector<Child*>& children, const std::function<bool()>& done,
                     Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (Child* c : children) c->pump();
    if (done()) return true;
    const auto left =
        std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    std::vector<pollfd> fds;
    for (Child* c : children) fds.push_back(pollfd{c->stdout_fd(), POLLIN, 0});
    // Dead children's pipes stay readable at EOF; cap the wait so that does not spin hard.
    ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left.count(), 100)));
  }
}

uint16_t free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("cannot bind a loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string etcd_binary() {
  const char* env = std::getenv("DDPRUN_ETCD");
  return env && *env ? env : "/usr/bin/etcd";
}

EtcdCluster::EtcdCluster(int members) : size_(members) {}

void EtcdCluster::launch(int attempt) {
  for (auto& m : members_) m->kill();
  members_.clear();
  client_ports_.clear();
  log_dir_ = dir_ / fmt::format("try{}", attempt);
  std::filesystem::create_directories(log_dir_);
  std::vector<uint16_t> peer_ports;
  std::string initial;
  for (int i = 0; i < size_; ++i) {
    client_ports_.push_back(free_loopback_port());
    peer_ports.push_back(free_loopback_port());
    initial += fmt::format("{}m{}=http://127.0.0.1:{}", i ? "," : "", i, peer_ports[i]);
  }
  for (int i = 0; i < size_; ++i) {
    const std::string client = fmt::format("http://127.0.0.1:{}", client_ports_[i]);
    const std::string peer = fmt::format("http://127.0.0.1:{}", peer_ports[i]);
    const std::string data = log_dir_ + fmt::format("/m{}", i);
    members_.push_back(
        std::make_unique<Child>(std::vector<std::string>{etcd_binary(),
                                                         "--name",
                                                         fmt::format("m{}", i),
                                                         "--data-dir",
                                                         data,
                                                         "--listen-client-urls",
                                                         client,
                                                         "--advertise-client-urls",
                                                         client,
                                                         "--listen-peer-urls",
                                                         peer,
                                                         "--initial-advertise-peer-urls",
                                                         peer,
                                                         "--initial-cluster",
                                                         initial,
                                                         "--initial-cluster-token",
                                                         log_dir_,
                                                         "--initial-cluster-state",
                                                         "new",
                                                         "--heartbeat-interval",
                                                         "50",
                                                         "--election-timeout",
                                                         "500"},
                                data + ".log"));
  }
}

bool EtcdCluster::any_member_exited() {
  bool any = false;
  for (auto& m : members_) any = m->exited() || any;
  return any;
}

bool EtcdCluster::start(Millis timeout, int attempts) {
  for (int attempt = 0; attempt < attempts; ++attempt) {
    launch(attempt);
    if (wait_ready(timeout)) return true;
    if (!any_member_exited()) return false;  // up but not serving: a retry would not help
  }
  return false;
}

EtcdCluster::~EtcdCluster() {
  for (auto& m : members_) m->kill();
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < client_ports_.size(); ++i) out.push_back(endpoint(static_cast<int>(i)));
  return out;
}

std::string EtcdCluster::endpoint(int member) const {
  return fmt::format("127.0.0.1:{}", client_ports_[member]);
}

void EtcdCluster::kill_member(int member) { members_[member]->kill(); }

bool EtcdCluster::running(int member) const { return members_[member]->pid() > 0; }

bool EtcdCluster::wait_ready(Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!running(static_cast<int>(i))) continue;
    // etcd announces readiness only in its log; polling a read is the only signal we have that
    // the member is up and its cluster has a leader. Each try is bounded; tries are 50 ms apart.
    for (;;) {
      boost::asio::io_context io;
      auto client = std::make_shared<EtcdClient>(
          io,
          EtcdClientOptions{.endpoints = {endpoint(static_cast<int>(i))}, .request_timeout = 1s});
      std::optional<Status> result;
      client->range({"/ready", {}, 0, 0}, [&](auto r) { result = r.status(); });
      io.run();
      if (result && result->ok()) break;
      if (std::chrono::steady_clock::now() >= deadline || any_member_exited()) return false;
      boost::asio::steady_timer pause(io, 50ms);
      pause.wait();
    }
  }
  return true;
}

std::string EtcdCluster::logs() const {
  std::string out;
  for (size_t i = 0; i < members_.size(); ++i) {
    std::ifstream in(log_dir_ + fmt::format("/m{}.log", i));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    out += fmt::format("--- etcd m{} (last lines) ---\n", i);
    for (size_t j = lines.size() > 15 ? lines.size() - 15 : 0; j < lines.size(); ++j) {
      out += lines[j] + "\n";
    }
  }
  return out;
}

}  // namespace ddprun::rdzv::state::testing
