#include "launcher/command_line.h"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>

#include "agent/process/process_launcher.h"
#include "agent/process/worker_env.h"
#include "common/exit_codes.h"
#include "common/host_port.h"
#include "launcher/job_config.h"
#include "launcher/launcher_flags.h"
#include "launcher/python_interpreter.h"
#include "launcher/slurm_env.h"
#include "launcher/value_parsers.h"
#include "progress/stragglers.h"
#include "rendezvous/conf/rdzv_conf.h"

namespace ddprun::launcher {
namespace {

// torchrun's MASTER_PORT default, used when static nodes must agree on a port without talking.
constexpr int kStaticMultiNodeMasterPort = 29500;
constexpr uint16_t kDefaultC10dPort = 29400;  // torchrun's c10d rendezvous port

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

Status validate_values(const LauncherFlags& f, LaunchConfig& config);
Status build_command(const LauncherFlags& f, std::vector<std::string> rest, LaunchConfig& config);

std::string local_host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
}

const char kAbout[] =
    "ddprun: a torchrun-compatible elastic launcher for PyTorch distributed training";

}  // namespace

ParsedCommandLine parse_command_line(const std::vector<std::string>& args) {
  ParsedCommandLine parsed;
  // Whatever part of a command line fails, the fix is in what the user gave: the usage kind.
  auto usage_error = [&parsed](const Status& why) {
    const Status usage = why.with_kind(ErrorKind::kInvalidArgument);
    parsed.exit_code = exit_code_for(usage);
    parsed.output = "ddprun: error: " + usage.message();
    return parsed;
  };
  LauncherFlags flags;
  CLI::App app{kAbout, "ddprun"};
  app.footer("usage: ddprun [--config job.yaml] [options] <script|module|executable> [args...]");
  // Installed copies (pip, the Debian package) say which release they are.
  app.set_version_flag("--version", std::string("ddprun ") + DDPRUN_VERSION);
  // Everything from the script on belongs to the script.
  auto table_parse = launcher_flag_table().parse(app, flags, args, {.prefix_command = true});
  if (!table_parse) return usage_error(table_parse.status());
  if (table_parse->output) {  // --help, --version
    parsed.output = *table_parse->output;
    return parsed;
  }
  JobConfigExtras from_file;
  if (!table_parse->config_path.empty()) {
    auto extras = job_config_extras(table_parse->config_path, table_parse->from_file);
    if (!extras) return usage_error(extras.status());
    from_file = std::move(*extras);
  }
  LaunchConfig config;
  // Settings no layer above gave, from srun's environment (below the file, above defaults).
  auto slurm = apply_slurm_layer(app, from_file.keys, agent::current_environment());
  if (!slurm) return usage_error(slurm.status());
  if (*slurm) config.notes.push_back(**slurm);
  for (const auto& [key, value] : from_file.env) config.agent.extra_env[key] = value;
  std::vector<std::string> entry = table_parse->remaining;
  if (entry.empty()) entry = from_file.entry_point;  // the command line's script wins
  Status status = validate_values(flags, config);
  if (status) status = build_command(flags, entry, config);
  if (!status) {
    if (entry.empty() && !flags.config.empty()) {
      return usage_error(
          Status::invalid_argument("the entry point is missing: give training_script in " +
                                   flags.config + " or a script on the command line"));
    }
    return usage_error(status);
  }
  parsed.config = std::move(config);
  return parsed;
}

namespace {

Status validate_rendezvous(const LauncherFlags& f, LaunchConfig& config) {
  RendezvousSettings& r = config.rendezvous;
  auto nodes = parse_nnodes(f.nnodes);
  if (!nodes) return nodes.status();
  auto conf = rdzv::parse_rdzv_conf(f.rdzv_conf);
  if (!conf) return conf.status().with_context("--rdzv_conf");
  const bool static_backend = f.rdzv_backend == "static" && !f.standalone;
  if (f.node_rank && *f.node_rank >= nodes->max) {
    return Status::invalid_argument("--node_rank=" + std::to_string(*f.node_rank) +
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
    // "h1:p,h2:p": replicas of one rendezvous (docs/rendezvous.md, "High availability");
    // port 0: a free one, picked by the hosting agent (torchrun's meaning).
    auto endpoints =
        parse_host_port_list(f.rdzv_endpoint, kDefaultC10dPort, {.allow_port_zero = true});
    if (!endpoints) return endpoints.status().with_context("--rdzv_endpoint");
    r.endpoint_host = endpoints->front().host;
    r.endpoint_port = endpoints->front().port;
    for (size_t i = 1; i < endpoints->size(); ++i) {
      r.more_endpoints.push_back((*endpoints)[i]);
    }
    if (!r.more_endpoints.empty() && conf->is_host.value_or(false)) {
      return Status::invalid_argument(
          "--rdzv_endpoint " + f.rdzv_endpoint +
          " names several servers (ddp-rendezvous replicas); an agent cannot host them: drop "
          "is_host=1 from --rdzv_conf");
    }
  }
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
  r.node_rank = f.node_rank;
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

// --signals_to_handle (they end the job) and --signals_to_forward (they reach the workers
// only): no signal may be both.
Status validate_signals(const LauncherFlags& f, LaunchConfig& config) {
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
  config.agent.signals_to_handle = *signals;
  return {};
}

// What is watched of the workers' progress and health: hangs, stragglers, the health check,
// torch's file timer.
Status validate_progress(const LauncherFlags& f, LaunchConfig& config) {
  agent::AgentOptions& a = config.agent;
  a.progress.hang_timeout = Millis(static_cast<long long>(f.hang_timeout * 1000));
  a.progress.first_heartbeat_timeout =
      Millis(static_cast<long long>(f.first_heartbeat_timeout * 1000));
  if (a.progress.hang_timeout > Millis(0) && a.progress.first_heartbeat_timeout > Millis(0) &&
      a.progress.first_heartbeat_timeout < a.progress.hang_timeout) {
    // A rank's first step is never held to less than any later one (hang_detector.h).
    config.warnings.push_back(
        fmt::format("--first_heartbeat_timeout {} is below --hang_timeout {}: a rank gets {} s "
                    "for its first heartbeat too",
                    f.first_heartbeat_timeout, f.hang_timeout, f.hang_timeout));
    a.progress.first_heartbeat_timeout = a.progress.hang_timeout;
  }
  if (f.straggler_threshold > 0) {
    auto milli = progress::straggler_threshold_milli(f.straggler_threshold);
    if (!milli) return milli.status().with_context("--straggler_threshold");
    a.progress.straggler_threshold_milli = *milli;
  }
  a.progress.max_no_progress_restarts = static_cast<uint32_t>(f.max_no_progress_restarts);
  if (f.node_failure_limit > f.node_failure_window) {
    return Status::invalid_argument(fmt::format(
        "--node_failure_limit {} is more than --node_failure_window {}: a node cannot cause more "
        "of the job's last failures than are looked at; give a window of at least {}",
        f.node_failure_limit, f.node_failure_window, f.node_failure_limit));
  }
  a.node_failures.limit = static_cast<uint32_t>(f.node_failure_limit);
  a.node_failures.window = static_cast<uint32_t>(f.node_failure_window);
  a.health_check.command = f.health_check;
  a.health_check.timeout = Millis(static_cast<long long>(f.health_check_timeout * 1000));
  a.health_check.interval = Millis(static_cast<long long>(f.health_check_interval * 1000));
  a.gpu_memory_wait = Millis(static_cast<long long>(f.gpu_memory_wait * 1000));
  // torchrun's switch for torch's FileTimerClient (torch.distributed.elastic.timer).
  const char* file_timer = std::getenv("TORCHELASTIC_ENABLE_FILE_TIMER");
  a.progress.file_timer = file_timer && std::string(file_timer) == "1";
  return {};
}

// Flags torchrun has and ddprun gives no meaning, and torchrun's OMP_NUM_THREADS default: said
// once at start, as warnings.
void add_warnings(const LauncherFlags& f, LaunchConfig& config) {
  agent::AgentOptions& a = config.agent;
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
}

Status validate_values(const LauncherFlags& f, LaunchConfig& config) {
  if (Status s = validate_rendezvous(f, config); !s) return s;
  agent::AgentOptions& a = config.agent;
  auto resolved = resolve_nproc_per_node(f.nproc_per_node);
  if (!resolved) return resolved.status();
  const int nproc = resolved->count;
  auto redirects = parse_std_streams("--redirects", f.redirects);
  if (!redirects) return redirects.status();
  auto tee = parse_std_streams("--tee", f.tee);
  if (!tee) return tee.status();
  auto filter = parse_rank_list("--local_ranks_filter", f.local_ranks_filter);
  if (!filter) return filter.status();
  for (int rank : *filter) {
    if (rank >= nproc) {
      return Status::invalid_argument(fmt::format(
          "--local_ranks_filter {}: there is no local rank {} with --nproc_per_node {} (local "
          "ranks are 0 to {})",
          f.local_ranks_filter, rank, nproc, nproc - 1));
    }
  }
  if (Status s = validate_signals(f, config); !s) return s;
  a.nproc_per_node = nproc;
  a.accelerator = resolved->accelerator;
  a.role = f.role;
  a.shutdown_timeout = Millis(static_cast<long long>(f.shutdown_timeout * 1000));
  a.kill_wait_timeout = Millis(static_cast<long long>(f.kill_wait_timeout * 1000));
  const RendezvousSettings& rdzv = config.rendezvous;
  if (f.master_port.value_or(0) > 0) a.master_port = *f.master_port;  // 0/unset: a free one
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
  if (Status s = validate_progress(f, config); !s) return s;
  // Stacks of hung workers reach the report even when their stderr goes to the console.
  a.logs.capture_stderr = a.progress.hang_timeout > Millis(0);
  if (f.metrics_port) config.metrics.port = static_cast<uint16_t>(*f.metrics_port);
  config.metrics.address = f.metrics_addr;
  if (!f.numa_binding.empty()) {
    auto mode = agent::parse_numa_mode(f.numa_binding);
    if (!mode) return mode.status();
    config.numa_binding = *mode;
  }
  add_warnings(f, config);
  return {};
}

// With hang detection on and workers that will not report progress by themselves: what
// --hang_timeout can and cannot do for them, said once at start.
void warn_unwatched_ranks(const LauncherFlags& f, const std::string& because,
                          LaunchConfig& config) {
  if (f.hang_timeout <= 0) return;
  std::string what = fmt::format(
      "--hang_timeout: {}, so a rank is watched only once it writes DDPRUN_HEARTBEAT_FILE (the "
      "worker SDK and ddprun.heartbeat() do)",
      because);
  if (f.first_heartbeat_timeout > 0) {
    what += fmt::format("; a rank that has written none {} s after its start is stopped as hung",
                        f.first_heartbeat_timeout);
  } else {
    what +=
        "; a rank that never writes one is not stopped for that (--first_heartbeat_timeout "
        "asks for it)";
  }
  config.warnings.push_back(std::move(what));
}

Status build_command(const LauncherFlags& f, std::vector<std::string> rest, LaunchConfig& config) {
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    return Status::invalid_argument(
        "unrecognized argument: " + rest.front() +
        " (run ddprun --help for the flags; put it after the script to pass it on)");
  }
  if (rest.empty()) {
    return Status::invalid_argument(
        "the entry point is missing: ddprun [options] <script> [args...]");
  }
  if (f.no_python && f.module) {
    return Status::invalid_argument(
        "don't use both the '--no_python' flag and the '--module' flag at the same time");
  }
  if (f.no_python && f.run_path) {
    return Status::invalid_argument(
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
    warn_unwatched_ranks(f, "it is not a Python script", config);
    if (!f.preload.empty()) {
      config.warnings.push_back(
          "--preload applies to Python entry points; ignored with "
          "--no_python");
    }
    return {};
  }
  const char* python_exec = std::getenv("PYTHON_EXEC");
  auto python =
      choose_python(python_exec ? python_exec : "", own_executable_dir(), path_env ? path_env : "");
  if (!python) return python.status();
  cmd.executable = python->executable;
  cmd.interpreter = python->executable + " (" + python->how + ")";
  cmd.argv = {python->argv0, "-u"};
  if (f.module) cmd.argv.push_back("-m");
  cmd.argv.insert(cmd.argv.end(), rest.begin(), rest.end());
  cmd.python = true;
  config.agent.progress.auto_progress = !f.no_auto_progress;
  if (f.no_auto_progress) warn_unwatched_ranks(f, "--no_auto_progress is set", config);
  if (f.no_quick_exit) config.agent.extra_env["DDPRUN_QUICK_EXIT"] = "0";
  if (!f.preload.empty()) {
    auto modules = parse_module_list(f.preload);
    if (!modules) return modules.status();
    config.preload = std::move(*modules);
  }
  return {};
}

}  // namespace
}  // namespace ddprun::launcher
