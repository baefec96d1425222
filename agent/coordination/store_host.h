// The job's store, hosted by this agent for one round: a TCPStore-compatible server
// (store/server.h) on MASTER_ADDR:MASTER_PORT that every worker, rank 0 included, uses as a
// client (TORCHELASTIC_USE_AGENT_STORE=True), as under torchrun.
//
// Why the agent and not rank 0's worker: every rank can connect the moment it starts (a rank
// that connects before rank 0 has imported torch no longer waits out torch's one-second
// connect retry), and the store outlives every worker, so rank 0 may exit first (a torchrun
// bug class: pytorch#125743, #128096).
//
// Per round:  offer_port()  before joining: the port this node offers as MASTER_PORT. The
//                           store already listens on it (on the address this node advertises,
//                           never a wildcard), so it is up before any worker can learn of it.
//             on_assigned() the round is known: group rank 0 keeps serving (or, with a fixed
//                           --master_port, starts listening there now); other nodes close theirs.
//             end_round()   every worker of the attempt has exited: the store goes; the next
//                           round gets a new one on a new port.
// With agent_store off (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1), rank 0's worker hosts the store:
// offer_port() then holds a free port for it (PortReservation) instead.
//
// Not thread-safe: use on the agent's io_context thread.
#pragma once

#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "agent/coordination/coordinator.h"
#include "agent/coordination/job_store_host.h"
#include "agent/coordination/port_reservation.h"
#include "common/result.h"
#include "store/server.h"

namespace ddprun::agent {

struct StoreHostOptions {
  // Whether the agent hosts the job's store (the job's agreed JobOptions::agent_store).
  // Default true.
  bool agent_store = true;
  // Where the store listens: the address this node offers as MASTER_ADDR.
  std::string address = "127.0.0.1";
  // --master_port: a port every node names without talking (static multi-node jobs); then only
  // group rank 0 hosts, on it. Unset: a fresh free port every round.
  std::optional<int> fixed_port;
  // Limits of the store server.
  store::StoreServerOptions server;
};

class StoreHost final : public JobStoreHost {
 public:
  StoreHost(boost::asio::io_context& io, StoreHostOptions options);

  Result<int> offer_port() override;
  Status on_assigned(const RoundAssignment& assignment) override;
  void end_round() override;
  const store::StoreServer* server() const override { return server_ ? &*server_ : nullptr; }

 private:
  Status listen(uint16_t port);

  boost::asio::io_context& io_;
  const StoreHostOptions options_;
  std::optional<store::StoreServer> server_;
  std::optional<PortReservation> reservation_;  // agent_store off: held for rank 0's worker
};

}  // namespace ddprun::agent
