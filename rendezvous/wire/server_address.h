// Where a client dials a rendezvous server: one address, or (ddp-rendezvous replicas, see
// docs/rendezvous.md "High availability") one of several, each tried in turn. The address type
// is the program-wide one (common/host_port.h); this name says what it addresses.
#pragma once

#include "common/host_port.h"

namespace ddprun::rdzv {

using ServerAddress = ddprun::HostPort;
using ddprun::to_string;  // "host:port", "[v6]:port", and lists "h1:p,h2:p"

}  // namespace ddprun::rdzv
