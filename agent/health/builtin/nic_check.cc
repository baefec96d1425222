#include "agent/health/builtin/nic_check.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "agent/health/builtin/sysfs.h"

namespace ddprun::agent::builtin {
namespace {

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==  // NOLINT: sockaddr
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;    // NOLINT
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,  // NOLINT
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr,  // NOLINT
                       sizeof(in6_addr)) == 0;
  }
  return false;
}

void check_interface(const std::string& net, const std::string& name,
                     std::vector<std::string>& problems) {
  const auto operstate = read_attribute(fmt::format("{}/{}/operstate", net, name));
  if (!operstate) {
    problems.push_back(fmt::format("interface {}: not found ({}/{})", name, net, name));
    return;
  }
  const auto carrier = read_attribute(fmt::format("{}/{}/carrier", net, name));
  const bool has_carrier = carrier == "1";
  if (*operstate == "up" || (*operstate == "unknown" && has_carrier)) {
    if (has_carrier || !carrier) return;
  }
  problems.push_back(fmt::format("interface {}: operstate {}, carrier {}", name, *operstate,
                                 carrier.value_or("unreadable")));
}

void check_infiniband(const std::string& ib, const std::string& device,
                      std::vector<std::string>& problems) {
  const std::string ports = fmt::format("{}/{}/ports", ib, device);
  const std::vector<std::string> names = list_directory(ports);
  if (names.empty()) {
    problems.push_back(fmt::format("InfiniBand {}: no ports under {}", device, ports));
  }
  for (const std::string& port : names) {
    const auto state = read_attribute(fmt::format("{}/{}/state", ports, port));
    if (state == "4: ACTIVE") continue;
    problems.push_back(
        fmt::format("InfiniBand {} port {}: state {}", device, port, state.value_or("unreadable")));
  }
}

}  // namespace

Result<std::string> interface_of_address(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  if (const int rc = ::getaddrinfo(address.c_str(), nullptr, &hints, &resolved); rc != 0) {
    return Status::not_found(
        fmt::format("the node's address {} does not resolve: {}", address, ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> resolved_owner(resolved, ::freeaddrinfo);
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) {
    return Status::unavailable(
        fmt::format("the node's interfaces cannot be listed: {}", std::strerror(errno)));
  }
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> interfaces_owner(interfaces, ::freeifaddrs);
  for (const addrinfo* a = resolved; a != nullptr; a = a->ai_next) {
    for (const ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
      if (same_address(a->ai_addr, i->ifa_addr)) return std::string(i->ifa_name);
    }
  }
  return Status::not_found(fmt::format("no interface of this node has its address {}", address));
}

CheckOutcome check_nics(const NicCheckSpec& spec, const std::string& node_address,
                        const std::string& sysfs_root) {
  CheckOutcome outcome{"nic", {}};
  const std::string net = sysfs_root + "/class/net";
  const std::string ib = sysfs_root + "/class/infiniband";
  if (spec.names.empty()) {
    if (auto name = interface_of_address(node_address); name) {
      check_interface(net, *name, outcome.problems);
    } else {
      outcome.problems.push_back(name.error_message());
    }
    for (const std::string& device : list_directory(ib)) {
      check_infiniband(ib, device, outcome.problems);
    }
    return outcome;
  }
  for (const std::string& name : spec.names) {
    if (read_attribute(fmt::format("{}/{}/operstate", net, name))) {
      check_interface(net, name, outcome.problems);
    } else if (!list_directory(fmt::format("{}/{}", ib, name)).empty()) {
      check_infiniband(ib, name, outcome.problems);
    } else {
      outcome.problems.push_back(fmt::format("interface {}: not found (neither {}/{} nor {}/{})",
                                             name, net, name, ib, name));
    }
  }
  return outcome;
}

}  // namespace ddprun::agent::builtin
