#include "tests/support/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace ddprun::testing {

uint16_t free_port_outside_ephemeral_range(const std::string& addr) {
  int low = 32768, high = 60999;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> low >> high;
  const int first = std::max(1024, low / 2);
  if (low - first < 16) throw std::runtime_error("no port range below the ephemeral one");
  std::mt19937 rng(std::random_device{}());
  const int start = std::uniform_int_distribution<int>(first, low - 1)(rng);
  for (int i = 0; i < low - first; ++i) {
    const int port = first + (start - first + i) % (low - first);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    ::close(fd);
    if (bound) return static_cast<uint16_t>(port);
  }
  throw std::runtime_error("no free port below the ephemeral range on " + addr);
}

}  // namespace ddprun::testing
