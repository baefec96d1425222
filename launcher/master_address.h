// The MASTER_ADDR a node offers (where its store listens if it becomes group rank 0).
//
// Static backend: --master_addr (every node names node 0's address). --standalone: loopback.
// c10d: --local_addr when given; otherwise the local address of this node's route to the
// rendezvous endpoint — the address its connection to the rendezvous comes from, which the
// other nodes, meeting at the same rendezvous, can reach by construction. The host name is not
// used: on a stock Debian or Ubuntu host it resolves locally to 127.0.1.1, an address no other
// node can reach (torchrun's store avoids that by listening on every interface; ddprun's store
// never listens on a wildcard). The host name remains the fallback when there is no route.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace ddprun::launcher {

// The local address the kernel picks for reaching `host`:`port` (resolved; the first address
// that routes): a UDP socket connected there, then getsockname. Sends nothing.
Result<std::string> local_address_toward(const std::string& host, uint16_t port);

}  // namespace ddprun::launcher
