#include "tests/multinode/notify_listener.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace ddprun::testing {

NotifyListener::NotifyListener(std::string path) : path_(std::move(path)) {
  socket_ = UniqueFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (!socket_.valid() || path_.size() >= sizeof addr.sun_path) {
    ADD_FAILURE() << "cannot make a notify socket at " << path_;
    return;
  }
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  if (::bind(socket_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ADD_FAILURE() << "bind " << path_ << ": " << std::strerror(errno);
    return;
  }
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return;
  }
  wake_read_ = UniqueFd(ends[0]);
  wake_write_ = UniqueFd(ends[1]);
  reader_ = std::thread([this] { read_socket(); });
}

NotifyListener::~NotifyListener() {
  if (!reader_.joinable()) return;
  const char stop = 's';
  if (::write(wake_write_.get(), &stop, 1) != 1) ADD_FAILURE() << "cannot stop the reader";
  reader_.join();
}

bool NotifyListener::receive_one() {
  char buffer[4096];
  const ssize_t n = ::recv(socket_.get(), buffer, sizeof buffer, MSG_DONTWAIT);
  if (n < 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  arrived_.emplace_back(buffer, static_cast<std::size_t>(n));
  changed_.notify_all();
  return true;
}

// Reads until stopped. Woken for a drain() request, it takes the drain requests made so far,
// then reads the socket until it is empty: everything sent before those requests is then in
// arrived_.
void NotifyListener::read_socket() {
  for (;;) {
    pollfd p[2] = {{socket_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      ADD_FAILURE() << "poll on the notify socket: " << std::strerror(errno);
      std::lock_guard<std::mutex> lock(mutex_);
      wake_failed_ = true;
      changed_.notify_all();
      return;
    }
    if (p[1].revents != 0) {
      char wakes[64];
      const ssize_t n = ::read(wake_read_.get(), wakes, sizeof wakes);
      if (n <= 0 || std::memchr(wakes, 's', static_cast<std::size_t>(n)) != nullptr) return;
      uint64_t requests = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        requests = drain_requests_;
      }
      while (receive_one()) {
      }
      std::lock_guard<std::mutex> lock(mutex_);
      empty_after_request_ = requests;
      changed_.notify_all();
      continue;
    }
    if ((p[0].revents & POLLIN) != 0) receive_one();
  }
}

bool NotifyListener::wait_for(const std::function<bool(const std::string&)>& done,
                              Deadline deadline) {
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_for(lock, std::chrono::milliseconds(poll_timeout_ms(deadline)),
                           [&] { return !arrived_.empty(); })) {
      return false;
    }
    messages_.push_back(std::move(arrived_.front()));
    arrived_.pop_front();
    lock.unlock();
    if (done(messages_.back())) return true;
  }
}

void NotifyListener::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t request = ++drain_requests_;
  const char wake = 'd';
  if (!reader_.joinable() || ::write(wake_write_.get(), &wake, 1) != 1) {
    ADD_FAILURE() << "cannot ask the notify reader to drain";
    return;
  }
  if (!changed_.wait_for(lock, std::chrono::seconds(10),
                         [&] { return wake_failed_ || empty_after_request_ >= request; })) {
    ADD_FAILURE() << "the notify socket was not found empty within 10 s";
  }
  while (!arrived_.empty()) {
    messages_.push_back(std::move(arrived_.front()));
    arrived_.pop_front();
  }
}

std::vector<std::string> NotifyListener::without_pings() const {
  std::vector<std::string> out;
  for (const auto& m : messages_) {
    if (m != "WATCHDOG=1") out.push_back(m);
  }
  return out;
}

int NotifyListener::pings() const {
  int n = 0;
  for (const auto& m : messages_) n += m == "WATCHDOG=1";
  return n;
}

int NotifyListener::find(const std::string& prefix) const {
  for (std::size_t i = 0; i < messages_.size(); ++i) {
    if (messages_[i].rfind(prefix, 0) == 0) return static_cast<int>(i);
  }
  return -1;
}

std::string NotifyListener::dump() const {
  std::string out;
  for (const auto& m : messages_) out += "  [" + m + "]\n";
  return out;
}

}  // namespace ddprun::testing
