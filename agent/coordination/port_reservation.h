// A free TCP port for rank 0's worker to listen on (MASTER_PORT), held so that no other
// process on the host is given it meanwhile.
//
// Why this works: the reservation is a socket bound with SO_REUSEADDR that never listens. The
// kernel never hands a bound port to another bind(port 0), so concurrent ddprun jobs cannot
// pick it; and the worker's TCPStore (which also sets SO_REUSEADDR) can still bind and listen
// on it, since no listener holds it. Released when the attempt ends.
#pragma once

#include "common/posix_fd.h"
#include "common/result.h"

namespace ddprun::agent {

class PortReservation {
 public:
  // Reserves a free port on every local address.
  static Result<PortReservation> reserve();
  int port() const { return port_; }
  void release() { fd_.reset(); }

 private:
  UniqueFd fd_;  // close-on-exec: never inherited by workers
  int port_ = 0;
};

}  // namespace ddprun::agent
