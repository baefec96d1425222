// Everything ddprun was asked to do, validated: what the agent runs and how nodes meet.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/options.h"
#include "rendezvous/rdzv_conf.h"

namespace ddprun::launcher {

// How nodes find each other (torchrun's --rdzv_* flags, --nnodes, --node_rank, --standalone).
// The static backend needs no server; c10d (and --standalone) use the rendezvous server.
struct RendezvousSettings {
  std::string backend = "static";  // "static" or "c10d" (--standalone implies c10d)
  std::string endpoint_host;       // --rdzv_endpoint host[:port]; --standalone: 127.0.0.1
  uint16_t endpoint_port = 29400;  // c10d's default port; 0 = a free one (hosting node only)
  std::string job_id = "none";     // --rdzv_id; --standalone picks a random one
  rdzv::RendezvousConf conf;       // --rdzv_conf, typed (timeouts, is_host)
  // How long a node whose workers finished waits for the rest of the job (exit barrier).
  Millis exit_barrier_timeout{300'000};
  int min_nodes = 1;  // --nnodes MIN[:MAX]
  int max_nodes = 1;
  int node_rank = 0;             // static: this node's rank; c10d: a hint when given
  bool node_rank_given = false;  // --node_rank was on the command line
  bool standalone = false;
  std::string local_addr;  // address this node advertises; empty: its host name
};

struct LaunchConfig {
  agent::AgentOptions agent;
  RendezvousSettings rendezvous;
  std::vector<std::string> warnings;  // printed before the job starts
};

}  // namespace ddprun::launcher
