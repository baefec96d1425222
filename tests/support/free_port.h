// A TCP port for a program that binds it by number later (torchrun's store, a daemon that
// restarts on its port): free a moment ago, and below the kernel's ephemeral range, so that
// until the program binds it no connection on this machine takes it as its source port and no
// server bound to port 0 gets it (a port from bind(0) could be taken either way; a test beside
// another failed with "Address already in use" that way).
#pragma once

#include <cstdint>
#include <string>

namespace ddprun::testing {

// Throws std::runtime_error when no port below the ephemeral range can be bound on `addr`.
uint16_t free_port_outside_ephemeral_range(const std::string& addr = "127.0.0.1");

}  // namespace ddprun::testing
