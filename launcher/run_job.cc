#include "launcher/run_job.h"

#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "agent/agent.h"
#include "agent/coordination/local_coordinator.h"
#include "agent/coordination/rendezvous_coordinator.h"
#include "agent/process/process_launcher.h"
#include "agent/process/worker_env.h"
#include "agent/python/python_bootstrap.h"
#include "common/exit_codes.h"
#include "launcher/address_check.h"
#include "launcher/agent_watchers.h"
#include "launcher/entry_point_check.h"
#include "launcher/master_address.h"
#include "launcher/metrics_service.h"
#include "launcher/python_torch.h"
#include "launcher/worker_launcher.h"
#include "rendezvous/server/server.h"

namespace ddprun::launcher {
namespace {

// Bound on the graceful end: leaving the rendezvous, and flushing a hosted server's last pushes.
constexpr Millis kShutdownGrace{3000};

// --numa-binding: each local rank's CPUs from this machine's topology, within the CPUs this
// process may use.
Result<std::vector<std::vector<int>>> numa_cpu_binding(agent::NumaMode mode, int nproc) {
  cpu_set_t own;
  std::set<int> allowed;
  if (::sched_getaffinity(0, sizeof own, &own) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &own)) allowed.insert(cpu);
    }
  }
  auto topology = agent::read_cpu_topology("/sys", allowed);
  if (!topology) return topology.status().with_context("--numa-binding");
  auto plan = agent::plan_numa_binding(mode, nproc, *topology);
  if (!plan) return plan.status();
  std::vector<std::vector<int>> cpus;
  for (int rank = 0; rank < nproc; ++rank) {
    cpus.emplace_back((*plan)[rank].begin(), (*plan)[rank].end());
    spdlog::info("--numa-binding {}: local rank {} runs on CPUs {}", agent::to_string(mode), rank,
                 agent::format_cpu_list((*plan)[rank]));
  }
  return cpus;
}

// MASTER_ADDR this node offers (master_address.h): static: --master_addr; --standalone:
// loopback; c10d: --local_addr, else the local address of the route to the rendezvous.
std::string offered_master_addr(const LaunchConfig& config) {
  const RendezvousSettings& r = config.rendezvous;
  if (r.standalone) return "127.0.0.1";
  if (r.backend == RendezvousBackend::kStatic) return r.master_addr;
  if (!r.local_addr.empty()) return r.local_addr;
  auto routed = local_address_toward(r.endpoint_host, r.endpoint_port);
  if (routed) {
    spdlog::debug("offering MASTER_ADDR {} (this node's address toward the rendezvous {}:{})",
                  *routed, r.endpoint_host, r.endpoint_port);
    return *routed;
  }
  spdlog::warn("{}; offering the host name {} as MASTER_ADDR (set --local_addr to choose)",
               routed.error_message(), config.agent.hostname);
  return config.agent.hostname;
}

agent::AgentOptions agent_options(const LaunchConfig& config) {
  agent::AgentOptions options = config.agent;
  // A static job's nodes have no id; they are named the same way (rendezvous/wire/node_name.h).
  options.node_name = config.agent.hostname + ":" + std::to_string(::getpid());
  options.master_addr = offered_master_addr(config);
  options.agent_store = config.job.agent_store;
  return options;
}

int run_static(const LaunchConfig& config, const agent::EnvMap& environment) {
  boost::asio::io_context io(1);
  const agent::AgentOptions options = agent_options(config);
  // First: handled signals are caught from here on.
  agent::SystemAgentParts parts(io, options, SystemClock::instance(), environment);
  WorkerLauncher workers(io, config, environment);
  agent::ProcessLauncher& launcher = workers.get();
  AgentWatchers watchers(io, launcher, config);
  agent::LocalCoordinator coordinator(io, config.job, config.rendezvous.node_rank.value_or(0));
  agent::Agent node_agent(options, io, parts.with(launcher, coordinator));
  auto metrics = MetricsService::start(io, config.metrics, node_agent, config.agent.run_id);
  if (!metrics) {
    spdlog::error("{}", metrics.error_message());
    return exit_code_for(metrics.status());
  }
  watchers.attach(node_agent);
  return node_agent.run();
}

std::string make_node_id(const std::string& host) {
  std::random_device entropy;
  return host + ":" + std::to_string(::getpid()) + ":" + std::to_string(entropy());
}

bool is_ip_literal(const std::string& text) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(text, ec);
  return !ec;
}

rdzv::ClientOptions client_options(const RendezvousSettings& r, uint16_t server_port,
                                   std::shared_ptr<const rdzv::ClientCredentials> credentials) {
  rdzv::ClientOptions o =
      rdzv::ClientOptions::from_conf(r.conf, r.endpoint_host, server_port, r.job_id);
  o.more_servers = r.more_endpoints;
  if (is_ip_literal(r.local_addr)) o.local_address = r.local_addr;
  o.credentials = std::move(credentials);
  return o;
}

// The hosted server's options: the agent's own token and TLS files guard it. `node_id`: the
// agent's own, so that its rounds name a successor (protocol.md, "When the hosting node is
// lost").
Result<rdzv::ServerOptions> hosted_server_options(const RendezvousSettings& r,
                                                  const std::string& node_id) {
  rdzv::ServerOptions options;
  const rdzv::ServerCredentialFiles files = rdzv::embedded_server_files(r.conf);
  if (!r.conf.tls_ca_file.empty() && files.tls.cert_file.empty()) {
    return Status::invalid_argument(
        "--rdzv_conf: this agent hosts the rendezvous server, which serves TLS: give it "
        "tls_cert_file and tls_key_file (the server's certificate), or is_host=0");
  }
  auto credentials = rdzv::load_server_credentials(files);
  if (!credentials) return credentials.status().with_context("--rdzv_conf");
  options.credentials = std::move(*credentials);
  options.host_node_id = node_id;
  options.exclude_cooldown = r.conf.exclude_cooldown;
  return options;
}

// A non-hosting c10d node's idle rendezvous server, on the address it offers the job, ready to
// take the rendezvous over should the hosting node be lost. None with --standalone (one node),
// with ddp-rendezvous replicas (they fail over among themselves), or when this node cannot
// serve what the host serves (TLS without a certificate of its own): then it says so once.
void start_standby(std::optional<rdzv::RendezvousServer>& standby, boost::asio::io_context& io,
                   const RendezvousSettings& r, const std::string& address,
                   const std::string& node_id) {
  if (r.standalone || !r.more_endpoints.empty()) return;
  auto options = hosted_server_options(r, node_id);
  if (!options) {
    spdlog::info("this node cannot take over the rendezvous should its host be lost: {}",
                 options.error_message());
    return;
  }
  standby.emplace(io, std::move(*options));
  if (Status listening = standby->listen(address, 0); !listening) {
    spdlog::info("this node cannot take over the rendezvous should its host be lost: {}",
                 listening.message());
    standby.reset();
    return;
  }
  spdlog::debug("standby rendezvous server on {}:{}", address, standby->port());
}

agent::RendezvousCoordinatorOptions coordinator_options(const LaunchConfig& config,
                                                        uint16_t server_port,
                                                        const std::string& node_id,
                                                        uint16_t standby_port) {
  agent::RendezvousCoordinatorOptions o;
  o.job = config.job;
  o.node_id = node_id;
  o.standby_port = standby_port;
  o.node_rank_hint = config.rendezvous.node_rank;
  std::vector<rdzv::ServerAddress> servers{{config.rendezvous.endpoint_host, server_port}};
  servers.insert(servers.end(), config.rendezvous.more_endpoints.begin(),
                 config.rendezvous.more_endpoints.end());
  o.server = rdzv::to_string(servers);
  return o;
}

// Whether this node may host the rendezvous server: never with several endpoints (they are
// ddp-rendezvous replicas); is_host when given; otherwise a node that
// names its address (--local_addr) hosts only an endpoint on that address — several nodes can
// share a machine — and a node that does not hosts whenever the endpoint binds here.
bool may_host(const RendezvousSettings& r) {
  if (!r.more_endpoints.empty()) return false;  // replicated daemons serve it
  if (r.conf.is_host) return *r.conf.is_host;
  if (r.local_addr.empty()) return true;
  if (r.local_addr == r.endpoint_host) return true;
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec_local, ec_endpoint;
  auto local = resolver.resolve(r.local_addr, "", ec_local);
  auto endpoint = resolver.resolve(r.endpoint_host, "", ec_endpoint);
  if (ec_local || ec_endpoint) return false;
  for (const auto& l : local) {
    for (const auto& e : endpoint) {
      if (l.endpoint().address() == e.endpoint().address()) return true;
    }
  }
  return false;
}

// c10d backend and --standalone: this node joins rounds on a rendezvous server, and hosts it
// in-process when it is the endpoint's host (see may_host) and can bind it.
int run_with_rendezvous_server(const LaunchConfig& config, const agent::EnvMap& environment) {
  const RendezvousSettings& r = config.rendezvous;
  boost::asio::io_context io(1);
  auto credentials = rdzv::load_client_credentials(r.conf);
  if (!credentials) {
    spdlog::error("{}", credentials.error_message());
    // The files --rdzv_conf names: whatever failed, the fix is in the command line.
    return exit_code_for(credentials.status().with_kind(ErrorKind::kInvalidArgument));
  }
  const agent::AgentOptions options = agent_options(config);
  const std::string node_id = make_node_id(config.agent.hostname);
  std::optional<rdzv::RendezvousServer> server;
  uint16_t port = r.endpoint_port;
  if (may_host(r)) {
    auto hosted = hosted_server_options(r, node_id);
    if (!hosted) {
      spdlog::error("{}", hosted.error_message());
      return exit_code_for(hosted.status().with_kind(ErrorKind::kInvalidArgument));
    }
    server.emplace(io, std::move(*hosted));
    Status listening = server->listen(r.endpoint_host, r.endpoint_port);
    if (listening) {
      port = server->port();
      spdlog::debug("hosting the rendezvous server on {}:{}", r.endpoint_host, port);
    } else if (r.conf.is_host.value_or(false)) {
      spdlog::error("is_host=1, but the rendezvous server cannot listen: {}", listening.message());
      return exit_code_for(listening);
    } else {
      server.reset();  // not this host, or another agent here hosts it: be a client
    }
  }
  std::optional<rdzv::RendezvousServer> standby;
  if (!server) start_standby(standby, io, r, options.master_addr, node_id);
  WorkerLauncher workers(io, config, environment);
  agent::ProcessLauncher& launcher = workers.get();
  AgentWatchers watchers(io, launcher, config);
  rdzv::TcpRendezvousClient client(
      io, client_options(r, port,
                         std::make_shared<const rdzv::ClientCredentials>(std::move(*credentials))));
  agent::RendezvousCoordinator coordinator(
      coordinator_options(config, port, node_id, standby ? standby->port() : 0), client);
  int exit_code = 0;
  {
    agent::SystemAgentParts parts(io, options, SystemClock::instance(), environment);
    agent::Agent node_agent(options, io, parts.with(launcher, coordinator));
    auto metrics = MetricsService::start(io, config.metrics, node_agent, config.agent.run_id,
                                         server ? &*server : nullptr);
    if (!metrics) {
      spdlog::error("{}", metrics.error_message());
      return exit_code_for(metrics.status());
    }
    watchers.attach(node_agent);
    exit_code = node_agent.run();
  }
  // Leave cleanly and let a hosted server (or a standby that took over) deliver its last
  // decisions before it goes.
  io.restart();
  coordinator.close_gracefully([&] {
    rdzv::RendezvousServer* serving = server ? &*server : standby ? &*standby : nullptr;
    if (serving) {
      serving->shutdown([&io] { io.stop(); });
    } else {
      io.stop();
    }
  });
  io.run_for(kShutdownGrace);
  return exit_code;
}

}  // namespace

int run_job(const LaunchConfig& input) {
  for (const auto& warning : input.warnings) spdlog::warn("{}", warning);
  for (const auto& note : input.notes) spdlog::info("{}", note);
  LaunchConfig config = input;
  // ddprun's environment, read once: the workers, the health check, the preload template and
  // the torch version lookup all start from this one snapshot (AgentParts::worker_base_env).
  const agent::EnvMap environment = agent::current_environment();
  std::error_code cwd_error;
  const std::string cwd = std::filesystem::current_path(cwd_error).string();
  if (Status entry = check_entry_point(config.agent.command, cwd); !entry) {
    spdlog::error("{}", entry.message());
    return exit_code_for(entry);
  }
  // Python workers run their script through ddprun's bootstrap (agent/python/python_bootstrap.h).
  std::unique_ptr<agent::PythonBootstrap> bootstrap;
  if (config.agent.command.python) {
    auto made = agent::PythonBootstrap::create();
    if (!made) {
      spdlog::error("{}", made.error_message());
      return exit_code_for(made.status());
    }
    bootstrap = std::move(made.value());
    config.agent.command.argv = bootstrap->wrap(config.agent.command.argv);
    config.agent.command.bootstrap_program = bootstrap->program();
  }
  // torch 1.x reads only the old name of the NCCL async error handling variable: which torch
  // the workers' Python imports is read from its files (python_torch.h), once, here.
  if (config.agent.command.python) {
    const auto torch = find_torch_version(config.agent.command.executable, environment);
    const auto major = torch ? torch_major_version(*torch) : std::nullopt;
    config.agent.legacy_nccl_env = major && *major < 2;
  }
  if (config.numa_binding) {
    auto cpus = numa_cpu_binding(*config.numa_binding, config.agent.nproc_per_node);
    if (!cpus) {
      spdlog::error("{}", cpus.error_message());
      return exit_code_for(cpus.status());
    }
    config.agent.cpu_binding = std::move(cpus.value());
  }
  if (Status hosts = check_job_hosts(config); !hosts) {  // a typo fails now, not in 600 s
    spdlog::error("{}", hosts.message());
    return exit_code_for(hosts);
  }
  if (config.rendezvous.backend == RendezvousBackend::kStatic)
    return run_static(config, environment);
  return run_with_rendezvous_server(config, environment);
}

}  // namespace ddprun::launcher
