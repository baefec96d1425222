// One network address as people write it, "host:port", and its one parser. Used for every
// address a user or a peer gives: ddprun's --rdzv_endpoint, `ddp-rendezvous status
// --endpoint`, --advertise, etcd endpoints, and the servers a rendezvous client dials.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ddprun {

struct HostPort {
  std::string host;  // an IP literal (IPv6 without brackets) or a host name; never empty
  uint16_t port = 0;
  bool operator==(const HostPort&) const = default;
};

// "host:port", or "[v6]:port" for an IPv6 literal.
std::string to_string(const HostPort& address);
// "h1:29400,h2:29400".
std::string to_string(const std::vector<HostPort>& addresses);

// Options of parse_host_port; each field's default is stated.
struct HostPortRules {
  // Whether port 0 ("pick a free one") is accepted. Default no: a port to dial is 1-65535.
  bool allow_port_zero = false;
  // Whether the port may be left out (then `default_port` is used). Default yes.
  bool port_optional = true;
};

// "host", "host:port", "[v6]" or "[v6]:port". A missing port is `default_port` (when
// rules.port_optional). Errors are Status::invalid_argument naming the text and what is wrong:
// "'h:70000': port 70000 is out of range (1-65535)". Pure.
Result<HostPort> parse_host_port(std::string_view text, uint16_t default_port,
                                 HostPortRules rules = {});

// "h1[:p1],h2[:p2],...": one or more addresses as above, in order; an empty item is an error.
Result<std::vector<HostPort>> parse_host_port_list(std::string_view text, uint16_t default_port,
                                                   HostPortRules rules = {});

}  // namespace ddprun
