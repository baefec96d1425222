// What every TCP listener of the project does to its sockets (the rendezvous server, the
// agent's store, the metrics endpoint): descriptors close-on-exec, so that workers never
// inherit them, and one way to open a listening acceptor.
#pragma once

#include <fcntl.h>

#include <boost/asio/ip/tcp.hpp>

namespace ddprun {

// Marks `fd` close-on-exec (Asio does not for accepted sockets).
inline void set_cloexec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

// Opens, binds (address reuse on) and starts `acceptor` listening on `endpoint`. Returns the
// step that failed ("open", "bind", "listen") with `ec` set, or nullptr.
inline const char* open_listener(boost::asio::ip::tcp::acceptor& acceptor,
                                 const boost::asio::ip::tcp::endpoint& endpoint, int backlog,
                                 boost::system::error_code& ec) {
  if (acceptor.open(endpoint.protocol(), ec); ec) return "open";
  set_cloexec(acceptor.native_handle());
  acceptor.set_option(boost::asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (acceptor.bind(endpoint, ec); ec) return "bind";
  if (acceptor.listen(backlog, ec); ec) return "listen";
  return nullptr;
}

}  // namespace ddprun
