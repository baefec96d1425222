#include "agent/coordination/port_reservation.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace ddprun::agent {

Result<PortReservation> PortReservation::reserve() {
  PortReservation r;
  r.fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!r.fd_.valid()) return Status::error(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  if (::setsockopt(r.fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    return Status::error(std::string("setsockopt(SO_REUSEADDR): ") + std::strerror(errno));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  if (::bind(r.fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::error(std::string("cannot reserve a free port: ") + std::strerror(errno));
  }
  socklen_t len = sizeof addr;
  if (::getsockname(r.fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status::error(std::string("getsockname: ") + std::strerror(errno));
  }
  r.port_ = ntohs(addr.sin_port);
  return r;
}

}  // namespace ddprun::agent
