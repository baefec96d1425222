#include "launcher/master_address.h"

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>

namespace ddprun::launcher {

Result<std::string> local_address_toward(const std::string& host, uint16_t port) {
  namespace ip = boost::asio::ip;
  boost::asio::io_context io;
  boost::system::error_code ec;
  ip::udp::resolver resolver(io);
  // The route does not depend on the port; 0 (a hosting node's free port) is not connectable.
  const auto endpoints = resolver.resolve(host, std::to_string(port == 0 ? 9 : port), ec);
  if (ec) {
    return Status::unavailable(fmt::format("cannot resolve {}: {}", host, ec.message()));
  }
  std::string last_error = "no address";
  for (const auto& entry : endpoints) {
    ip::udp::socket socket(io);
    // connect() on a datagram socket only chooses the route and the local address.
    if (socket.open(entry.endpoint().protocol(), ec) || socket.connect(entry.endpoint(), ec)) {
      last_error = ec.message();
      continue;
    }
    const auto local = socket.local_endpoint(ec);
    if (ec) {
      last_error = ec.message();
      continue;
    }
    ip::address address = local.address();
    if (address.is_v6() && address.to_v6().is_v4_mapped()) {
      address = ip::make_address_v4(ip::v4_mapped, address.to_v6());
    }
    return address.to_string();
  }
  return Status::unavailable(fmt::format("no route to {}:{}: {}", host, port, last_error));
}

}  // namespace ddprun::launcher
