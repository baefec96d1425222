// Everything ddprun was asked to do, validated: what the agent runs and how nodes meet.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/options.h"

namespace ddprun::launcher {

// How nodes find each other (torchrun's --rdzv_* flags, --nnodes, --node_rank, --standalone).
struct RendezvousSettings {
  std::string backend = "static";  // "static" or "c10d" (--standalone implies c10d)
  std::string endpoint;            // host[:port]; c10d's default port is 29400
  std::string job_id = "none";     // --rdzv_id; --standalone picks a random one
  std::map<std::string, std::string> conf;  // --rdzv_conf key=value pairs (keys validated)
  int min_nodes = 1;               // --nnodes MIN[:MAX]
  int max_nodes = 1;
  int node_rank = 0;               // static backend: this node's rank
  bool standalone = false;
  std::string local_addr;          // address this node advertises; empty: its host name
};

struct LaunchConfig {
  agent::AgentOptions agent;
  RendezvousSettings rendezvous;
  std::vector<std::string> warnings;  // printed before the job starts
};

}  // namespace ddprun::launcher
