// builtin:nic: the network this node trains over is up. A network interface passes when its
// operstate is "up", or "unknown" with carrier 1 (what loopback and many virtual drivers
// report); an InfiniBand device passes when every port's state is "4: ACTIVE". Without names,
// the interface carrying the node's address (the address it advertises to the job) and every
// InfiniBand port of the node are checked; `nic=a+b` names them instead (a network interface
// under class/net, or an InfiniBand device under class/infiniband).
#pragma once

#include <string>

#include "agent/health/builtin/check_outcome.h"
#include "agent/health/builtin/node_check_spec.h"
#include "common/result.h"

namespace ddprun::agent::builtin {

// The interface whose address is `address` (a literal IPv4/IPv6 address or a host name this
// node resolves), from getifaddrs. The error names the address.
Result<std::string> interface_of_address(const std::string& address);

// `node_address`: used when `spec` names no interface. `sysfs_root`: /sys, or a test's tree.
CheckOutcome check_nics(const NicCheckSpec& spec, const std::string& node_address,
                        const std::string& sysfs_root);

}  // namespace ddprun::agent::builtin
