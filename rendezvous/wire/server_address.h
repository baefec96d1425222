// Where a client dials a rendezvous server: one address, or (ddp-rendezvous replicas, see
// docs/rendezvous.md "High availability") one of several, each tried in turn.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddprun::rdzv {

struct ServerAddress {
  std::string host;  // IP literal or host name
  uint16_t port = 29400;
  bool operator==(const ServerAddress&) const = default;
};

// "host:port", or "[v6]:port" for an IPv6 literal.
inline std::string to_string(const ServerAddress& a) {
  const bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port);
}

// "h1:29400,h2:29400".
inline std::string to_string(const std::vector<ServerAddress>& addresses) {
  std::string out;
  for (const auto& a : addresses) out += (out.empty() ? "" : ",") + to_string(a);
  return out;
}

}  // namespace ddprun::rdzv
