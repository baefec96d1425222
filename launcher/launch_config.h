// Everything ddprun was asked to do, validated, as one value per concept: what this node's
// agent runs, the job's terms that every node must agree on, and how this node meets the others.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/options.h"
#include "agent/process/numa_binding.h"
#include "rendezvous/conf/rdzv_conf.h"
#include "rendezvous/wire/job_options.h"
#include "rendezvous/wire/server_address.h"

namespace ddprun::launcher {

// How nodes coordinate: torchrun's static rendezvous (no server; --node_rank of a fixed
// --nnodes) or the c10d-like rendezvous server (--standalone embeds one).
enum class RendezvousBackend { kStatic, kC10d };

// How this node finds the others (torchrun's --rdzv_* flags, --node_rank, --standalone).
struct RendezvousSettings {
  RendezvousBackend backend = RendezvousBackend::kStatic;
  std::string endpoint_host;       // --rdzv_endpoint host[:port]; --standalone: 127.0.0.1
  uint16_t endpoint_port = 29400;  // c10d's default port; 0 = a free one (hosting node only)
  // --rdzv_endpoint h1:p,h2:p,...: the addresses after the first, ddp-rendezvous replicas of
  // one rendezvous. The client tries them all in turn; an agent never hosts them.
  std::vector<rdzv::ServerAddress> more_endpoints;
  std::string job_id = "none";  // --rdzv_id; --standalone picks a random one
  // --rdzv_conf: the client's timeouts and is_host (the job's own timeouts are in JobOptions).
  rdzv::RendezvousConf conf;
  // --node_rank: static: this node's rank (default 0); c10d: a hint, when given.
  std::optional<int> node_rank;
  bool standalone = false;
  // --local_addr: the address this node advertises; empty: its host name.
  std::string local_addr;
  // --master_addr: the static backend's MASTER_ADDR (where node 0's store listens).
  std::string master_addr = "127.0.0.1";
};

// --metrics_port / --metrics_addr: the agent's HTTP endpoint (/metrics, /healthz).
struct MetricsSettings {
  // Unset: no endpoint (the default). 0: a free port, logged at start.
  std::optional<uint16_t> port;
  // Where it listens. Default 127.0.0.1: any other address exposes job information to the
  // network (there is no authentication).
  std::string address = "127.0.0.1";
};

struct LaunchConfig {
  // What this node runs and how (MASTER_ADDR is chosen by run_job from `rendezvous`).
  agent::AgentOptions agent;
  // The job's terms (--nnodes, --max_restarts, rendezvous timeouts, exit barrier): built once
  // here and carried whole to whoever decides with them (LocalCoordinator or the server's
  // RoundState).
  rdzv::JobOptions job;
  RendezvousSettings rendezvous;
  // --numa-binding: resolved into AgentOptions::cpu_binding from the machine's topology when
  // the job starts (run_job.cc).
  std::optional<agent::NumaMode> numa_binding;
  MetricsSettings metrics;
  // --signals_to_forward: signals forwarded to every running worker group without ending the
  // job (agent/process/signal_forwarder.h). Default none; SIGUSR1,SIGUSR2 under SLURM.
  std::vector<int> signals_to_forward;
  // --preload: modules a template interpreter imports once per node; workers are forked from it
  // (agent/preload/preload_launcher.h). Empty: every worker is a fresh process.
  std::vector<std::string> preload;
  std::vector<std::string> warnings;  // printed before the job starts
  std::vector<std::string> notes;     // printed at info level before the job starts
};

}  // namespace ddprun::launcher
