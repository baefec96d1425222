#include "common/host_port.h"

#include <algorithm>

#include <fmt/format.h>

namespace ddprun {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

std::string to_string(const HostPort& address) {
  if (address.host.find(':') != std::string::npos) {  // IPv6
    return fmt::format("[{}]:{}", address.host, address.port);
  }
  return fmt::format("{}:{}", address.host, address.port);
}

std::string to_string(const std::vector<HostPort>& addresses) {
  std::string out;
  for (const HostPort& a : addresses) out += (out.empty() ? "" : ",") + to_string(a);
  return out;
}

Result<HostPort> parse_host_port(std::string_view text, uint16_t default_port,
                                 HostPortRules rules) {
  auto bad = [&](const std::string& why) {
    return Status::invalid_argument(fmt::format("'{}': {}", text, why));
  };
  HostPort out{std::string(text), default_port};
  std::string_view port_text;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("no ']' after the IPv6 address");
    out.host = std::string(text.substr(1, close - 1));
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return bad("expected ':' and a port after ']'");
      has_port = true;
      port_text = text.substr(close + 2);
    }
    if (out.host.find(':') == std::string::npos && !out.host.empty()) {
      return bad("brackets are for IPv6 addresses only");
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    // Like torchrun, the port is what follows the last ':' ("::1:29400" is [::1]:29400).
    if (colon > 0 && text[colon - 1] == ':') {
      return bad("an IPv6 address needs brackets and a port: [" + std::string(text) + "]:PORT");
    }
    out.host = std::string(text.substr(0, colon));
    has_port = true;
    port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) return bad("no host (expected host:port)");
  const uint16_t lowest = rules.allow_port_zero ? 0 : 1;
  if (!has_port) {
    if (!rules.port_optional) return bad("no port (expected host:port)");
    return out;
  }
  if (port_text.empty()) return bad("no port after ':'");
  if (!all_digits(port_text)) {
    return bad(fmt::format("port '{}' is not a number", port_text));
  }
  // Digits only: compare as text first so that a long run of digits cannot overflow.
  const bool huge = port_text.size() > 5;
  const unsigned long port = huge ? 0 : std::stoul(std::string(port_text));
  if (huge || port > 65535 || port < lowest) {
    return bad(fmt::format("port {} is out of range ({}-65535)", port_text, lowest));
  }
  out.port = static_cast<uint16_t>(port);
  return out;
}

Result<std::vector<HostPort>> parse_host_port_list(std::string_view text, uint16_t default_port,
                                                   HostPortRules rules) {
  std::vector<HostPort> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma == start) {
      return Status::invalid_argument(
          fmt::format("'{}': an empty address (expected host[:port],host[:port],...)", text));
    }
    auto one = parse_host_port(text.substr(start, comma - start), default_port, rules);
    if (!one) return one.status();
    out.push_back(std::move(*one));
    if (comma == text.size()) return out;
    start = comma + 1;
  }
}

}  // namespace ddprun
