// Hostile TCP peers at the rendezvous endpoint (the server hosted by node 1) while a two-node
// job runs: garbage, a bad magic, zero-length and oversized frames are closed by the server;
// silent connections and half a frame are held open until the job ends. None of it disturbs
// the job, which still rendezvouses at its exit barrier and succeeds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/posix_fd.h"
#include "tests/multinode/multinode_fixture.h"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

// A blocking TCP connection to 127.0.0.1:port from `source` (so it looks like another node).
UniqueFd connect_to(uint16_t port, const std::string& source) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &local.sin_addr);
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof local);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) {
    ADD_FAILURE() << "connect 127.0.0.1:" << port << ": " << std::strerror(errno);
    return UniqueFd();
  }
  return fd;
}

void send_bytes(const UniqueFd& fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

std::string u32_be(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// Reads (and drops) whatever the server sends until it closes the connection. True when it
// did by the deadline.
bool closed_by_server(const UniqueFd& fd, Deadline deadline) {
  for (;;) {
    pollfd p{fd.get(), POLLIN, 0};
    const int timeout = poll_timeout_ms(deadline);
    if (timeout == 0 || ::poll(&p, 1, timeout) <= 0) return false;
    char buffer[4096];
    const ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n < 0 && errno != EINTR && errno != EAGAIN) return true;
  }
}

class HostileTest : public MultinodeTest {};

TEST_F(HostileTest, GarbageOversizedAndStalledConnectionsDoNotDisturbARunningJob) {
  const uint16_t port = free_port();
  make_fifo(out("release.fifo"));
  std::vector<std::unique_ptr<ChildProcess>> nodes;
  for (int n : {1, 2}) {
    NodeSpec spec;
    spec.node = n;
    spec.nnodes = "2";
    spec.endpoint = "127.0.0.1:" + std::to_string(port);
    spec.entry = {mn_worker("hold.py"), "--release", out("release.fifo")};
    nodes.push_back(start_node(spec));
    ASSERT_NE(nodes.back(), nullptr);
  }
  ASSERT_TRUE(wait_for_markers("run_n", 4, deadline_after(30s)));

  // Connections the server must close: each is a broken peer of its own.
  std::string garbage;
  for (int i = 0; i < 512; ++i) garbage.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  const std::vector<std::pair<std::string, std::string>> closed = {
      {"garbage", garbage},
      {"oversized frame", u32_be(0xfffffff0u) + std::string(1, '\x01')},
      {"zero-length frame", u32_be(0)},
      {"bad magic",
       u32_be(11) + std::string(1, '\x01') + u32_be(0x12345678) + std::string(2, '\0') + u32_be(0)},
  };
  std::vector<UniqueFd> to_close;
  for (const auto& [what, bytes] : closed) {
    to_close.push_back(connect_to(port, "127.0.0.9"));
    ASSERT_TRUE(to_close.back().valid()) << what;
    send_bytes(to_close.back(), bytes);
  }
  // Connections held open while the job goes on: silent ones, and half a frame.
  std::vector<UniqueFd> stalled;
  for (int i = 0; i < 16; ++i) {
    stalled.push_back(connect_to(port, "127.0.0.9"));
    ASSERT_TRUE(stalled.back().valid());
  }
  stalled.push_back(connect_to(port, "127.0.0.9"));
  send_bytes(stalled.back(), u32_be(100) + std::string(10, '\x01'));

  for (std::size_t i = 0; i < to_close.size(); ++i) {
    EXPECT_TRUE(closed_by_server(to_close[i], deadline_after(10s)))
        << closed[i].first << ": the server kept the connection";
  }

  release("release.fifo", 4);
  const auto runs = finish_all(nodes, deadline_after(30s));
  EXPECT_TRUE(ExitedWith(runs[0], 0));
  EXPECT_TRUE(ExitedWith(runs[1], 0));
}

}  // namespace
}  // namespace ddprun::testing
