// What one node brings to a round: who it is, how many workers it runs, and where it would host
// the job's store should it become group rank 0. Filled by the agent's coordinator at each
// join; the server's RoundState places nodes with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ddprun::rdzv {

struct NodeInfo {
  // Unique within the job, e.g. "<host>:<pid>:<random>"; proves nothing (see the token).
  std::string node_id;
  uint32_t local_world_size = 1;  // workers on this node (--nproc_per_node)
  // --node_rank given to a c10d job: honoured when valid and free.
  std::optional<uint32_t> node_rank_hint;
  // MASTER_ADDR/PORT this node offers to the job if it becomes group rank 0.
  std::string master_addr;
  uint16_t master_port = 0;

  bool operator==(const NodeInfo&) const = default;
};

}  // namespace ddprun::rdzv
