#include "launcher/command_line.h"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>

#include "agent/process_launcher.h"
#include "agent/worker_env.h"
#include "launcher/job_config.h"
#include "launcher/python_interpreter.h"
#include "launcher/slurm_env.h"
#include "launcher/value_parsers.h"
#include "rendezvous/rdzv_conf.h"

namespace ddprun::launcher {
namespace {

// torchrun's MASTER_PORT default, used when static nodes must agree on a port without talking.
constexpr int kStaticMultiNodeMasterPort = 29500;
constexpr uint16_t kDefaultC10dPort = 29400;  // torchrun's c10d rendezvous port

// Every flag as written on the command line, before validation.
struct RawFlags {
  std::string nnodes = "1:1";
  std::string nproc_per_node = "1";
  int node_rank = -1;  // -1: not given (static: 0; c10d: no hint)
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_id = "none";
  std::string rdzv_conf;
  bool standalone = false;
  int max_restarts = 0;
  double monitor_interval = 0.1;       // accepted for compatibility: supervision is event-driven
  std::string start_method = "spawn";  // accepted: workers are always fresh processes
  std::string role = "default";
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  std::string log_dir;
  std::string redirects = "0";
  std::string tee = "0";
  std::string local_ranks_filter;
  std::string master_addr = "127.0.0.1";
  int master_port = -1;  // -1: unset, a free port per attempt
  std::string local_addr;
  double shutdown_timeout = 30;  // seconds
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  std::string signals_to_forward;     // none; SIGUSR1,SIGUSR2 under SLURM (slurm_env.h)
  double exit_barrier_timeout = 300;  // seconds (ddprun's flag; torchrun's is not on its CLI)
  // torchrun 2.x flags.
  bool virtual_local_rank = false;
  std::string duplicate_stdout_filters;  // comma-separated, ",," for a literal comma
  std::string duplicate_stderr_filters;
  std::string numa_binding;                // node, socket, exclusive, core-complex
  std::string logs_specs;                  // accepted: ddprun has no log plugins
  std::string event_log_handler = "null";  // accepted: ddprun logs events itself
  std::string log_line_prefix_template;
  // Hang detection (ddprun's).
  double hang_timeout = 0;               // seconds; 0 = off
  double first_heartbeat_timeout = 600;  // seconds
  int metrics_port = -1;                 // -1: no metrics endpoint
  std::string metrics_addr = "127.0.0.1";
};

// Defaults torchrun takes from its own environment variables (below PET_* and the flags).
Status apply_environment_defaults(RawFlags& f) {
  if (const char* v = std::getenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT"); v && *v) {
    char* end = nullptr;
    const double seconds = std::strtod(v, &end);
    if (*end != '\0' || seconds < 0) {
      return Status::invalid_argument(std::string("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=") + v +
                                      " is not a number of seconds");
    }
    f.shutdown_timeout = seconds;
  }
  if (const char* v = std::getenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"); v) {
    f.log_line_prefix_template = v;
  }
  return {};
}

// torchrun's comma_separated_list: "a,b" → {a, b}; ",," is a literal comma; empty → {}.
std::vector<std::string> comma_separated_list(const std::string& text) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  std::string item;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ',' && i + 1 < text.size() && text[i + 1] == ',') {
      item += ',';
      ++i;
    } else if (text[i] == ',') {
      items.push_back(std::exchange(item, {}));
    } else {
      item += text[i];
    }
  }
  items.push_back(item);
  return items;
}

// "--nproc_per_node,--nproc-per-node" and its environment default PET_NPROC_PER_NODE.
struct FlagName {
  std::string names;
  std::string env;
};
FlagName flag_name(const std::string& underscored, const std::string& short_name = "") {
  std::string dashed = underscored;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  std::string names = short_name.empty() ? "" : short_name + ",";
  names += "--" + underscored;
  if (dashed != underscored) names += ",--" + dashed;
  std::string env = "PET_" + underscored;
  std::transform(env.begin(), env.end(), env.begin(), ::toupper);
  return {names, env};
}

template <class T>
void add_option(CLI::App& app, T& target, const std::string& name, const std::string& help,
                const std::string& short_name = "") {
  const FlagName f = flag_name(name, short_name);
  app.add_option(f.names, target, help)
      ->envname(f.env)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->capture_default_str();
}

void add_flag(CLI::App& app, bool& target, const std::string& name, const std::string& help,
              const std::string& short_name = "") {
  const FlagName f = flag_name(name, short_name);
  app.add_flag(f.names, target, help)->envname(f.env);
}

void declare_flags(CLI::App& app, RawFlags& f) {
  add_option(app, f.nnodes, "nnodes", "Number of nodes, N or MIN:MAX");
  add_option(app, f.nproc_per_node, "nproc_per_node", "Workers per node: N, cpu, gpu or auto");
  add_option(app, f.node_rank, "node_rank", "Rank of this node (static rendezvous)");
  add_option(app, f.rdzv_backend, "rdzv_backend", "Rendezvous backend: static or c10d");
  add_option(app, f.rdzv_endpoint, "rdzv_endpoint",
             "Rendezvous endpoint host[:port], or h1:port,h2:port,... for ddp-rendezvous "
             "replicas (tried in turn)");
  add_option(app, f.rdzv_id, "rdzv_id", "Job id shared by the job's nodes");
  add_option(app, f.rdzv_conf, "rdzv_conf", "Rendezvous settings key=value,...");
  add_flag(app, f.standalone, "standalone", "Single node, rendezvous on a free local port");
  add_option(app, f.max_restarts, "max_restarts", "Worker group restarts before failing");
  add_option(app, f.monitor_interval, "monitor_interval",
             "Accepted for compatibility; ddprun reacts to worker exits at once");
  add_option(app, f.start_method, "start_method",
             "Accepted for compatibility (spawn, fork, forkserver)");
  add_option(app, f.role, "role", "Worker role name");
  add_flag(app, f.module, "module", "Run the entry point as a Python module (python -m)", "-m");
  add_flag(app, f.no_python, "no_python", "Run the entry point as an executable, not with Python");
  add_flag(app, f.run_path, "run_path", "Run the entry point as a Python script path");
  add_option(app, f.log_dir, "log_dir", "Base directory for worker logs and error files");
  add_option(app, f.redirects, "redirects", "Streams to log files only: 0-3 or 0:1,1:2", "-r");
  add_option(app, f.tee, "tee", "Streams to log files and the console: 0-3 or 0:1,1:2", "-t");
  add_option(app, f.local_ranks_filter, "local_ranks_filter",
             "Local ranks shown on the console, e.g. 0,1");
  add_option(app, f.master_addr, "master_addr", "MASTER_ADDR for workers (static rendezvous)");
  add_option(app, f.master_port, "master_port",
             "MASTER_PORT for workers; default: a free port per attempt");
  add_option(app, f.local_addr, "local_addr", "Address this node advertises");
  add_option(app, f.shutdown_timeout, "shutdown_timeout", "Seconds between SIGTERM and SIGKILL");
  add_option(app, f.signals_to_handle, "signals_to_handle", "Signals forwarded to workers");
  add_option(app, f.signals_to_forward, "signals_to_forward",
             "Signals forwarded to workers without ending the job (under SLURM: "
             "SIGUSR1,SIGUSR2)");
  add_flag(app, f.virtual_local_rank, "virtual_local_rank",
           "LOCAL_RANK=0 for every worker, each seeing only its own GPU");
  add_option(app, f.duplicate_stdout_filters, "duplicate_stdout_filters",
             "Also copy tee'd stdout lines containing any of these (a,b; ,, for a comma) to "
             "attempt_<N>/filtered_stdout.log");
  add_option(app, f.duplicate_stderr_filters, "duplicate_stderr_filters",
             "Likewise for stderr, to attempt_<N>/filtered_stderr.log");
  add_option(app, f.numa_binding, "numa_binding",
             "Bind workers to CPUs near their device: node, socket, exclusive, core-complex");
  add_option(app, f.logs_specs, "logs_specs",
             "Accepted for compatibility: ddprun writes torchrun's default log layout");
  add_option(app, f.event_log_handler, "event_log_handler",
             "Accepted for compatibility: ddprun logs events itself");
  add_option(app, f.log_line_prefix_template, "log_line_prefix_template",
             "Prefix of tee'd lines: ${role_name}, ${rank}, ${local_rank}, ${hostname}");
  add_option(app, f.hang_timeout, "hang_timeout",
             "Seconds without a heartbeat after which a rank is hung (0: off)");
  add_option(app, f.first_heartbeat_timeout, "first_heartbeat_timeout",
             "Seconds a rank may take to its first heartbeat (start-up, data loading)");
  add_option(app, f.exit_barrier_timeout, "exit_barrier_timeout",
             "Seconds a finished node waits for the rest of the job");
  add_option(app, f.metrics_port, "metrics_port",
             "Serve /metrics (Prometheus) and /healthz on this port; 0 picks a free one "
             "(logged); default: off");
  add_option(app, f.metrics_addr, "metrics_addr",
             "Address of the metrics endpoint; anything but loopback exposes job information "
             "to the network");
}

Status validate_values(const RawFlags& f, LaunchConfig& config);
Status build_command(const RawFlags& f, std::vector<std::string> rest, LaunchConfig& config);

std::string local_host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
}

}  // namespace

namespace {

const char kAbout[] =
    "ddprun: a torchrun-compatible elastic launcher for PyTorch distributed training";

// The --config file named in `args`, if any. A throwaway parse with every flag declared, so
// that flags taking a value are skipped correctly; its errors are the real parse's to report.
std::string find_config_path(const std::vector<std::string>& args) {
  RawFlags scratch;
  std::string path;
  CLI::App app{kAbout, "ddprun"};
  declare_flags(app, scratch);
  app.add_option("--config", path);
  app.prefix_command();
  app.set_help_flag();
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::Error&) {
  }
  return path;
}

}  // namespace

ParsedCommandLine parse_command_line(const std::vector<std::string>& args) {
  ParsedCommandLine parsed;
  auto usage_error = [&parsed](const std::string& message) {
    parsed.exit_code = 2;
    parsed.output = "ddprun: error: " + message;
    return parsed;
  };
  RawFlags flags;
  if (Status env = apply_environment_defaults(flags); !env) return usage_error(env.message());
  CLI::App app{kAbout, "ddprun"};
  app.footer("usage: ddprun [--config job.yaml] [options] <script|module|executable> [args...]");
  declare_flags(app, flags);
  std::string config_path;
  app.add_option("--config", config_path,
                 "YAML file of settings (flag names as keys); the command line and PET_* "
                 "variables override it");
  app.prefix_command();  // everything from the script on belongs to the script
  JobConfigExtras from_file;
  if (std::string path = find_config_path(args); !path.empty()) {
    auto loaded = apply_job_config(path, app);  // its values become the flags' defaults
    if (!loaded) return usage_error(loaded.status().message());
    from_file = std::move(loaded.value());
  }
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    parsed.output = app.help();
    return parsed;
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  LaunchConfig config;
  // Settings no layer above gave, from srun's environment (below the file, above defaults).
  auto slurm = apply_slurm_layer(app, from_file.keys, agent::current_environment());
  if (!slurm) return usage_error(slurm.status().message());
  if (*slurm) config.notes.push_back(**slurm);
  for (const auto& [key, value] : from_file.env) config.agent.extra_env[key] = value;
  std::vector<std::string> entry = app.remaining();
  if (entry.empty()) entry = from_file.entry_point;  // the command line's script wins
  Status status = validate_values(flags, config);
  if (status) status = build_command(flags, entry, config);
  if (!status) {
    if (entry.empty() && !config_path.empty()) {
      return usage_error("the entry point is missing: give training_script in " + config_path +
                         " or a script on the command line");
    }
    return usage_error(status.message());
  }
  parsed.config = std::move(config);
  return parsed;
}

namespace {

Status validate_rendezvous(const RawFlags& f, LaunchConfig& config) {
  RendezvousSettings& r = config.rendezvous;
  auto nodes = parse_nnodes(f.nnodes);
  if (!nodes) return nodes.status();
  auto conf = rdzv::parse_rdzv_conf(f.rdzv_conf);
  if (!conf) return conf.status().with_context("--rdzv_conf");
  if (f.rdzv_backend != "static" && f.rdzv_backend != "c10d") {
    return Status::invalid_argument("--rdzv_backend=" + f.rdzv_backend +
                                    " is not supported: use static or c10d");
  }
  const bool static_backend = f.rdzv_backend == "static" && !f.standalone;
  if (f.node_rank < -1 || f.node_rank >= nodes->max) {
    return Status::invalid_argument("--node_rank=" + std::to_string(f.node_rank) +
                                    " must be in [0, " + std::to_string(nodes->max) + ")");
  }
  if (f.standalone && nodes->max > 1) {
    return Status::invalid_argument("--standalone runs a single node, but --nnodes=" + f.nnodes);
  }
  if (nodes->max > 1 && static_backend && nodes->min != nodes->max) {
    return Status::invalid_argument("--nnodes=" + f.nnodes +
                                    ": the static rendezvous needs a fixed number of nodes; use "
                                    "--rdzv_backend c10d for MIN:MAX elasticity");
  }
  if (!static_backend && !f.standalone) {
    if (f.rdzv_endpoint.empty()) {
      return Status::invalid_argument("--rdzv_backend c10d needs --rdzv_endpoint host[:port]");
    }
    // "h1:p,h2:p": replicas of one rendezvous (docs/rendezvous.md, "High availability").
    auto endpoints = parse_endpoints(f.rdzv_endpoint, kDefaultC10dPort);
    if (!endpoints) return endpoints.status();
    r.endpoint_host = endpoints->front().host;
    r.endpoint_port = endpoints->front().port;
    for (size_t i = 1; i < endpoints->size(); ++i) {
      r.more_endpoints.push_back({(*endpoints)[i].host, (*endpoints)[i].port});
    }
    if (!r.more_endpoints.empty() && conf->is_host.value_or(false)) {
      return Status::invalid_argument(
          "--rdzv_endpoint " + f.rdzv_endpoint +
          " names several servers (ddp-rendezvous replicas); an agent cannot host them: drop "
          "is_host=1 from --rdzv_conf");
    }
  }
  if (f.exit_barrier_timeout < 0) {
    return Status::invalid_argument("--exit_barrier_timeout must be >= 0 seconds");
  }
  if (f.max_restarts < 0) return Status::invalid_argument("--max_restarts must be >= 0");
  rdzv::JobOptions& job = config.job;
  job.min_nodes = static_cast<uint32_t>(nodes->min);
  job.max_nodes = static_cast<uint32_t>(nodes->max);
  job.max_restarts = static_cast<uint32_t>(f.max_restarts);
  job.join_timeout = conf->join_timeout;
  job.last_call_timeout = conf->last_call_timeout;
  job.heartbeat_timeout = conf->heartbeat_timeout;
  job.exit_barrier_timeout = Millis(static_cast<long long>(f.exit_barrier_timeout * 1000));
  // torchrun's switch for workers that insist on hosting their own store (torch >= 2.4).
  const char* no_share = std::getenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE");
  job.agent_store = !(no_share && std::string(no_share) == "1");
  if (!conf->ignored_keys.empty()) {
    config.warnings.push_back(
        fmt::format("--rdzv_conf: ignoring keys ddprun does not know (torchrun ignores them "
                    "too): {}",
                    fmt::join(conf->ignored_keys, ", ")));
  }
  for (const auto& note : conf->notes) config.warnings.push_back(note);
  r.conf = std::move(conf.value());
  if (f.node_rank >= 0) r.node_rank = f.node_rank;
  r.local_addr = f.local_addr;
  r.master_addr = f.master_addr;
  r.standalone = f.standalone;
  r.backend = static_backend ? RendezvousBackend::kStatic : RendezvousBackend::kC10d;
  if (f.standalone) {  // an embedded server on a free loopback port, hosted by this node
    r.endpoint_host = "127.0.0.1";
    r.endpoint_port = 0;
    r.conf.is_host = true;
  }
  r.job_id = f.standalone ? boost::uuids::to_string(boost::uuids::random_generator()()) : f.rdzv_id;
  return {};
}

Status validate_values(const RawFlags& f, LaunchConfig& config) {
  if (Status s = validate_rendezvous(f, config); !s) return s;
  agent::AgentOptions& a = config.agent;
  auto nproc = parse_nproc_per_node(f.nproc_per_node);
  if (!nproc) return nproc.status();
  auto redirects = parse_std_streams("--redirects", f.redirects);
  if (!redirects) return redirects.status();
  auto tee = parse_std_streams("--tee", f.tee);
  if (!tee) return tee.status();
  auto filter = parse_rank_list("--local_ranks_filter", f.local_ranks_filter);
  if (!filter) return filter.status();
  auto signals = parse_signal_list(f.signals_to_handle);
  if (!signals) return signals.status();
  auto forwarded = parse_signal_list(f.signals_to_forward, "--signals_to_forward");
  if (!forwarded) return forwarded.status();
  for (int signo : *forwarded) {
    if (std::find(signals->begin(), signals->end(), signo) != signals->end()) {
      return Status::invalid_argument(agent::signal_name(signo) +
                                      " is in both --signals_to_handle (ends the job) and "
                                      "--signals_to_forward (does not): choose one");
    }
  }
  config.signals_to_forward = *forwarded;
  if (f.shutdown_timeout < 0) return Status::error("--shutdown_timeout must be >= 0 seconds");
  if (f.monitor_interval < 0) return Status::error("--monitor_interval must be >= 0 seconds");
  if (f.master_port < -1 || f.master_port > 65535) {
    return Status::error("--master_port=" + std::to_string(f.master_port) + " is not a TCP port");
  }
  if (f.start_method != "spawn" && f.start_method != "fork" && f.start_method != "forkserver") {
    return Status::error("--start_method=" + f.start_method + ": use spawn, fork or forkserver");
  }
  a.nproc_per_node = *nproc;
  a.role = f.role;
  a.shutdown_timeout = Millis(static_cast<long long>(f.shutdown_timeout * 1000));
  a.signals_to_handle = *signals;
  const RendezvousSettings& rdzv = config.rendezvous;
  if (f.master_port > 0) a.master_port = f.master_port;  // 0 or unset: a free port per attempt
  if (rdzv.backend == RendezvousBackend::kStatic && config.job.max_nodes > 1 && !a.master_port) {
    // Every node must name the same port without talking to the others: torchrun's default.
    a.master_port = kStaticMultiNodeMasterPort;
  }
  a.run_id = config.rendezvous.job_id;
  a.hostname = f.local_addr.empty() ? local_host_name() : f.local_addr;
  a.logs.log_dir = f.log_dir;
  a.logs.redirects = *redirects;
  a.logs.tee = *tee;
  a.logs.console_ranks = *filter;
  a.logs.line_prefix_template = f.log_line_prefix_template;
  a.logs.duplicate_stdout_filters = comma_separated_list(f.duplicate_stdout_filters);
  a.logs.duplicate_stderr_filters = comma_separated_list(f.duplicate_stderr_filters);
  a.virtual_local_rank = f.virtual_local_rank;
  if (f.hang_timeout < 0 || f.first_heartbeat_timeout < 0) {
    return Status::invalid_argument("--hang_timeout and --first_heartbeat_timeout must be >= 0");
  }
  a.hang.hang_timeout = Millis(static_cast<long long>(f.hang_timeout * 1000));
  a.hang.first_heartbeat_timeout = std::max(
      a.hang.hang_timeout, Millis(static_cast<long long>(f.first_heartbeat_timeout * 1000)));
  // torchrun's switch for torch's FileTimerClient (torch.distributed.elastic.timer).
  const char* file_timer = std::getenv("TORCHELASTIC_ENABLE_FILE_TIMER");
  a.hang.file_timer = file_timer && std::string(file_timer) == "1";
  // Stacks of hung workers reach the report even when their stderr goes to the console.
  a.logs.capture_stderr = a.hang.hang_timeout > Millis(0);
  if (f.metrics_port < -1 || f.metrics_port > 65535) {
    return Status::invalid_argument("--metrics_port=" + std::to_string(f.metrics_port) +
                                    " is not a TCP port");
  }
  if (f.metrics_port >= 0) config.metrics.port = static_cast<uint16_t>(f.metrics_port);
  config.metrics.address = f.metrics_addr;
  if (!f.numa_binding.empty()) {
    auto mode = agent::parse_numa_mode(f.numa_binding);
    if (!mode) return mode.status();
    config.numa_binding = *mode;
  }
  if (!f.logs_specs.empty()) {
    config.warnings.push_back("--logs-specs " + f.logs_specs +
                              " has no effect: ddprun has no log plugins; it writes torchrun's "
                              "default layout (--log-dir, --redirects, --tee)");
  }
  if (f.event_log_handler != "null") {
    config.warnings.push_back("--event-log-handler " + f.event_log_handler +
                              " has no effect: ddprun logs its events to stderr (and to its "
                              "metrics endpoint when one is enabled)");
  }
  if (a.nproc_per_node > 1 && std::getenv("OMP_NUM_THREADS") == nullptr &&
      !a.extra_env.count("OMP_NUM_THREADS")) {
    a.extra_env["OMP_NUM_THREADS"] = "1";
    config.warnings.push_back(
        "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
        "avoid your system being overloaded, please further tune the variable for optimal "
        "performance in your application as needed.");
  }
  return {};
}

Status build_command(const RawFlags& f, std::vector<std::string> rest, LaunchConfig& config) {
  if (!rest.empty() && rest.front() == "--")
    rest.erase(rest.begin());
  else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    return Status::error(
        "unrecognized argument: " + rest.front() +
        " (run ddprun --help for the flags; put it after the script to pass it on)");
  }
  if (rest.empty())
    return Status::error("the entry point is missing: ddprun [options] <script> [args...]");
  if (f.no_python && f.module) {
    return Status::error(
        "don't use both the '--no_python' flag and the '--module' flag at the same time");
  }
  if (f.no_python && f.run_path) {
    return Status::error(
        "don't use both the '--run_path' flag and the '--no_python' flag at the same time");
  }
  const char* path_env = std::getenv("PATH");
  agent::WorkerCommand& cmd = config.agent.command;
  cmd.display_name = rest.front();
  if (f.no_python) {
    auto exe = agent::find_executable(rest.front(), path_env ? path_env : "");
    if (!exe) return exe.status().with_context("--no_python entry point");
    cmd.executable = *exe;
    cmd.argv = rest;
    return {};
  }
  const char* python_exec = std::getenv("PYTHON_EXEC");
  auto python = choose_python(python_exec ? python_exec : "", own_executable_dir(),
                              path_env ? path_env : "");
  if (!python) return python.status();
  cmd.executable = python->executable;
  cmd.argv = {python->argv0, "-u"};
  if (f.module) cmd.argv.push_back("-m");
  cmd.argv.insert(cmd.argv.end(), rest.begin(), rest.end());
  cmd.python = true;
  return {};
}

}  // namespace
}  // namespace ddprun::launcher
