#include "tests/store/store_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace ddprun::store::testing {

bool StoreThread::stats_until(const std::function<bool(const StoreStats&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done(stats())) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    // The server learns of a peer's hang-up on its own thread; nothing here can be waited on,
    // so poll its statistics briefly.
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

std::unique_ptr<TestClient> TestClient::connect(uint16_t port, Dialect dialect) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ADD_FAILURE() << "connect to 127.0.0.1:" << port << ": " << std::strerror(errno);
    return nullptr;
  }
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto client = std::unique_ptr<TestClient>(new TestClient(std::move(fd), dialect));
  if (dialect == Dialect::kValidated) {
    Request validate;
    validate.op = Op::kValidate;
    validate.number = kValidationMagic;
    client->send(validate);
  }
  return client;
}

void TestClient::send_raw(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the server closed us; the next read reports it
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

std::optional<std::string> TestClient::read_exact(size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string out;
  while (out.size() < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) continue;
    char buf[65536];
    const ssize_t got = ::recv(fd_.get(), buf, std::min(sizeof buf, n - out.size()), 0);
    if (got <= 0) return std::nullopt;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

std::optional<uint8_t> TestClient::read_u8() {
  auto b = read_exact(1);
  if (!b) return std::nullopt;
  return static_cast<uint8_t>((*b)[0]);
}

std::optional<int64_t> TestClient::read_i64() {
  auto b = read_exact(8);
  if (!b) return std::nullopt;
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>((*b)[i])} << (8 * i);
  return static_cast<int64_t>(v);
}

std::optional<std::string> TestClient::read_value() {
  auto len = read_i64();
  if (!len || *len < 0) return std::nullopt;
  return read_exact(static_cast<size_t>(*len));
}

bool TestClient::wait_closed() {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) continue;
    if (::recv(fd_.get(), buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

void TestClient::set(const std::string& key, const std::string& value) {
  send(make(Op::kSet, {key}, {value}));
}

std::optional<std::string> TestClient::get(const std::string& key) {
  send(make(Op::kGet, {key}));
  return read_value();
}

std::optional<int64_t> TestClient::add(const std::string& key, int64_t delta) {
  send(make(Op::kAdd, {key}, {}, delta));
  return read_i64();
}

std::optional<std::string> TestClient::compare_set(const std::string& key,
                                                   const std::string& expected,
                                                   const std::string& desired) {
  send(make(Op::kCompareSet, {key}, {expected, desired}));
  return read_value();
}

std::optional<int64_t> TestClient::num_keys() {
  send(make(Op::kNumKeys));
  return read_i64();
}

bool TestClient::wait(const std::vector<std::string>& keys) {
  send(make(Op::kWait, keys));
  return read_u8() == static_cast<uint8_t>(WaitReply::kStopWaiting);
}

}  // namespace ddprun::store::testing
