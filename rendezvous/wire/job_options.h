// The terms of one job, agreed by all its nodes: how many nodes, how many restarts, and the
// rendezvous timeouts. Built once from the command line (launcher), carried whole in every
// Join, and fixed by the first node that joins; the server's RoundState decides with them.
#pragma once

#include <cstdint>

#include "common/clock.h"
#include "common/result.h"

namespace ddprun::rdzv {

struct JobOptions {
  // --nnodes MIN:MAX. A round closes at once at max_nodes, or after last_call_timeout at
  // min_nodes. Default 1:1.
  uint32_t min_nodes = 1;
  uint32_t max_nodes = 1;
  // --max_restarts: worker-failure restarts the whole job may consume (not per agent); scale-up
  // and node loss are free. The rendezvous decides restarts with it. Default 0.
  uint32_t max_restarts = 0;
  // Longest a round may stay open with fewer than min_nodes. Default 600 s (torchrun).
  Millis join_timeout{600'000};
  // Wait for more nodes after min_nodes joined. Default 30 s (torchrun).
  Millis last_call_timeout{30'000};
  // How long a node whose connection dropped keeps its place. Default 15 s.
  Millis heartbeat_timeout{15'000};
  // Exit barrier: longest wait, after a member reports success, for all others. Default 300 s.
  Millis exit_barrier_timeout{300'000};
  // The job's store (TCPStore protocol, at MASTER_ADDR:MASTER_PORT) is hosted by the agent of
  // group rank 0, and every worker is its client (TORCHELASTIC_USE_AGENT_STORE=True), as under
  // torchrun. false: rank 0's worker hosts it (torchrun's TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1).
  // Default true.
  bool agent_store = true;

  bool operator==(const JobOptions&) const = default;
};

// Checks values that came from a user or a peer; the error names the value and what to do.
Status validate(const JobOptions& options);

// Whether a node asking for `asked` may join a job running with `agreed`: the node counts, the
// restart budget and who hosts the store must match (the timeouts are the first node's).
bool same_terms(const JobOptions& agreed, const JobOptions& asked);

}  // namespace ddprun::rdzv
