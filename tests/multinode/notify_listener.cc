#include "tests/multinode/notify_listener.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
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
  }
}

bool NotifyListener::receive_one(int timeout_ms) {
  pollfd p{socket_.get(), POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return false;
  char buffer[4096];
  const ssize_t n = ::recv(socket_.get(), buffer, sizeof buffer, MSG_DONTWAIT);
  if (n < 0) return false;
  messages_.emplace_back(buffer, static_cast<std::size_t>(n));
  return true;
}

bool NotifyListener::wait_for(const std::function<bool(const std::string&)>& done,
                              Deadline deadline) {
  for (;;) {
    const int timeout = poll_timeout_ms(deadline);
    if (timeout == 0) return false;
    if (receive_one(timeout) && done(messages_.back())) return true;
  }
}

void NotifyListener::drain() {
  while (receive_one(0)) {
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
