// Where the job's store lives, round by round, as the agent sees it: the port this node offers,
// what a round assignment means for the store, and the round's end. StoreHost (store_host.h)
// serves a real store; the agent's lifecycle tests use a fake that opens no port.
//
// Not thread-safe: use on the agent's io_context thread.
#pragma once

#include "agent/coordination/coordinator.h"
#include "common/result.h"

namespace ddprun::store {
class StoreServer;
}

namespace ddprun::agent {

class JobStoreHost {
 public:
  virtual ~JobStoreHost() = default;
  // The MASTER_PORT this node offers to the next round. Errors name the address.
  virtual Result<int> offer_port() = 0;
  // This node's place in the round: keeps, starts or closes the store accordingly.
  virtual Status on_assigned(const RoundAssignment& assignment) = 0;
  // The round's workers have all exited.
  virtual void end_round() = 0;
  // The store of the current round, when this node hosts one (for metrics); else nullptr.
  virtual const store::StoreServer* server() const = 0;
};

}  // namespace ddprun::agent
