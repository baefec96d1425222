#include "launcher/launcher_flags.h"

#include "agent/health/builtin/node_check_spec.h"
#include "agent/process/numa_binding.h"
#include "launcher/value_parsers.h"
#include "metrics/endpoint_flags.h"
#include "progress/stragglers.h"
#include "rendezvous/conf/rdzv_conf.h"

namespace ddprun::launcher {
namespace {

// A value parser as a check: its own message (the parsers name the flag: the entries using it
// say so with check_names_flag).
template <class Parse>
FlagCheck parses(Parse parse) {
  return [parse](const std::string& text) -> Status { return parse(text).status(); };
}

const FlagCheck kSeconds = in_range(0, 1e9);
const FlagCheck kPort = in_range(0, 65535);

}  // namespace

const FlagTable<LauncherFlags>& launcher_flag_table() {
  using F = LauncherFlags;
  using T = ConfigType;
  static const FlagTable<LauncherFlags> table(
      {.underscores = true, .env_prefix = "PET_"},
      {
          {{.name = "config",
            .help = "YAML file of settings (flag names as keys); the command line and PET_* "
                    "variables override it",
            .scope = FlagScope::kConfigPath},
           &F::config},
          {{.name = "nnodes",
            .type = T::kScalar,
            .help = "Number of nodes, N or MIN:MAX",
            .default_text = "1:1",
            .check = parses(parse_nnodes),
            .check_names_flag = true},
           &F::nnodes},
          {{.name = "nproc_per_node",
            .type = T::kScalar,
            .help = "Workers per node: N, cpu, gpu, xpu or auto",
            .default_text = "1",
            .check = parses(parse_nproc_per_node),
            .check_names_flag = true},
           &F::nproc_per_node},
          {{.name = "node_rank",
            .type = T::kInteger,
            .help = "Rank of this node (static rendezvous)",
            .check = in_range(0, 1e6)},
           &F::node_rank},
          {{.name = "rdzv_backend",
            .help = "Rendezvous backend: static or c10d",
            .default_text = "static",
            .check = one_of({"static", "c10d"})},
           &F::rdzv_backend},
          {{.name = "rdzv_endpoint",
            .help = "Rendezvous endpoint host[:port], or h1:port,h2:port,... for "
                    "ddp-rendezvous replicas (tried in turn)"},
           &F::rdzv_endpoint},
          {{.name = "rdzv_id",
            .type = T::kScalar,
            .help = "Job id shared by the job's nodes",
            .default_text = "none"},
           &F::rdzv_id},
          {{.name = "rdzv_conf",
            .type = T::kMap,
            .help = "Rendezvous settings key=value,...",
            .check = parses(rdzv::parse_rdzv_conf),
            .check_names_flag = true},
           &F::rdzv_conf},
          {{.name = "standalone",
            .type = T::kBool,
            .help = "Single node, rendezvous on a free local port"},
           &F::standalone},
          {{.name = "max_restarts",
            .type = T::kInteger,
            .help = "Worker group restarts before failing",
            .default_text = "0",
            .check = in_range(0, 1e9)},
           &F::max_restarts},
          {{.name = "max_no_progress_restarts",
            .type = T::kInteger,
            .help = "Stop, not restartable (exit 79), after this many attempts in a row fail "
                    "without any rank getting past the highest step reached; 0 = off",
            .default_text = "0",
            .check = in_range(0, 1e9)},
           &F::max_no_progress_restarts},
          {{.name = "node_failure_limit",
            .type = T::kInteger,
            .help = "Leave the job (exit 69) once this node's workers were the root cause of "
                    "this many of the job's last --node_failure_window failures, so that a spare "
                    "takes its place; 0 = off",
            .default_text = "0",
            .check = in_range(0, 1000)},
           &F::node_failure_limit},
          {{.name = "node_failure_window",
            .type = T::kInteger,
            .help = "How many of the job's last failures --node_failure_limit looks at; at least "
                    "--node_failure_limit",
            .default_text = "3",
            .check = in_range(1, 1000)},
           &F::node_failure_window},
          {{.name = "monitor_interval",
            .type = T::kNumber,
            .help = "Accepted for compatibility; ddprun reacts to worker exits at once",
            .default_text = "0.1",
            .check = kSeconds},
           &F::monitor_interval},
          {{.name = "start_method",
            .help = "Accepted for compatibility (spawn, fork, forkserver)",
            .default_text = "spawn",
            .check = one_of({"spawn", "fork", "forkserver"})},
           &F::start_method},
          {{.name = "role", .help = "Worker role name", .default_text = "default"}, &F::role},
          {{.name = "module",
            .type = T::kBool,
            .help = "Run the entry point as a Python module (python -m)",
            .short_name = "-m"},
           &F::module},
          {{.name = "no_python",
            .type = T::kBool,
            .help = "Run the entry point as an executable, not with Python"},
           &F::no_python},
          {{.name = "run_path",
            .type = T::kBool,
            .help = "Run the entry point as a Python script path"},
           &F::run_path},
          {{.name = "log_dir", .help = "Base directory for worker logs and error files"},
           &F::log_dir},
          {{.name = "redirects",
            .type = T::kScalar,
            .help = "Streams to log files only: 0-3 or 0:1,1:2",
            .default_text = "0",
            .check =
                [](const std::string& t) { return parse_std_streams("--redirects", t).status(); },
            .check_names_flag = true,
            .short_name = "-r"},
           &F::redirects},
          {{.name = "tee",
            .type = T::kScalar,
            .help = "Streams to log files and the console: 0-3 or 0:1,1:2",
            .default_text = "0",
            .check = [](const std::string& t) { return parse_std_streams("--tee", t).status(); },
            .check_names_flag = true,
            .short_name = "-t"},
           &F::tee},
          {{.name = "local_ranks_filter",
            .type = T::kList,
            .help = "Local ranks shown on the console, e.g. 0,1",
            .check =
                [](const std::string& t) {
                  return parse_rank_list("--local_ranks_filter", t).status();
                },
            .check_names_flag = true},
           &F::local_ranks_filter},
          {{.name = "master_addr",
            .help = "MASTER_ADDR for workers (static rendezvous)",
            .default_text = "127.0.0.1"},
           &F::master_addr},
          {{.name = "master_port",
            .type = T::kInteger,
            .help = "MASTER_PORT for workers; default: a free port per attempt",
            .check = kPort},
           &F::master_port},
          {{.name = "local_addr", .help = "Address this node advertises"}, &F::local_addr},
          {{.name = "shutdown_timeout",
            .type = T::kNumber,
            .help = "Seconds between SIGTERM and SIGKILL",
            .default_text = "30",
            .check = kSeconds,
            .fallback_env = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"},
           &F::shutdown_timeout},
          {{.name = "kill_wait_timeout",
            .type = T::kNumber,
            .help = "Seconds a worker may take to be reaped after SIGKILL; one still there is "
                    "stuck in the kernel: it is named and the node leaves the job (exit 71)",
            .default_text = "30",
            .check = in_range(0.001, 1e9)},
           &F::kill_wait_timeout},
          {{.name = "signals_to_handle",
            .type = T::kList,
            .help = "Signals forwarded to workers",
            .default_text = "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
            .check = [](const std::string& t) { return parse_signal_list(t).status(); },
            .check_names_flag = true},
           &F::signals_to_handle},
          {{.name = "signals_to_forward",
            .type = T::kList,
            .help = "Signals forwarded to workers without ending the job (under SLURM: "
                    "SIGUSR1,SIGUSR2)",
            .check =
                [](const std::string& t) {
                  return parse_signal_list(t, "--signals_to_forward").status();
                },
            .check_names_flag = true},
           &F::signals_to_forward},
          {{.name = "virtual_local_rank",
            .type = T::kBool,
            .help = "LOCAL_RANK=0 for every worker, each seeing only its own GPU"},
           &F::virtual_local_rank},
          {{.name = "duplicate_stdout_filters",
            .type = T::kList,
            .help = "Also copy tee'd stdout lines containing any of these (a,b; ,, for a "
                    "comma) to attempt_<N>/filtered_stdout.log",
            .commas_doubled = true},
           &F::duplicate_stdout_filters},
          {{.name = "duplicate_stderr_filters",
            .type = T::kList,
            .help = "Likewise for stderr, to attempt_<N>/filtered_stderr.log",
            .commas_doubled = true},
           &F::duplicate_stderr_filters},
          {{.name = "numa_binding",
            .help = "Bind workers to CPUs near their device: node, socket, exclusive, "
                    "core-complex",
            .check = parses(agent::parse_numa_mode),
            .check_names_flag = true},
           &F::numa_binding},
          {{.name = "logs_specs",
            .help = "Accepted for compatibility: ddprun writes torchrun's default log layout"},
           &F::logs_specs},
          {{.name = "event_log_handler",
            .help = "Accepted for compatibility: ddprun logs events itself",
            .default_text = "null"},
           &F::event_log_handler},
          {{.name = "log_line_prefix_template",
            .help = "Prefix of tee'd lines: ${role_name}, ${rank}, ${local_rank}, ${hostname}",
            .fallback_env = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"},
           &F::log_line_prefix_template},
          {{.name = "hang_timeout",
            .type = T::kNumber,
            .help = "Seconds without a heartbeat after which a rank is hung (0: off)",
            .default_text = "0",
            .check = kSeconds},
           &F::hang_timeout},
          {{.name = "first_heartbeat_timeout",
            .type = T::kNumber,
            .help = "Seconds a rank may take to its first heartbeat (start-up, data loading); "
                    "0: a rank that never sends one is not stopped for that alone",
            .default_text = "0",
            .check = kSeconds},
           &F::first_heartbeat_timeout},
          {{.name = "no_auto_progress",
            .type = T::kBool,
            .help = "Python workers do not report their steps and busy times by themselves "
                    "(hang and straggler reports then need DDPRUN_HEARTBEAT_FILE)"},
           &F::no_auto_progress},
          {{.name = "no_quick_exit",
            .type = T::kBool,
            .help = "Python workers tear their interpreter down in full at exit (module "
                    "teardown, __del__) instead of leaving once atexit handlers ran"},
           &F::no_quick_exit},
          {{.name = "preload",
            .type = T::kList,
            .help = "Python modules imported once per node by a template interpreter that then "
                    "forks every worker, e.g. torch (docs/preload.md)",
            .check = parses(parse_module_list),
            .check_names_flag = true},
           &F::preload},
          {{.name = "straggler_threshold",
            .type = T::kNumber,
            .help = "Name a rank a straggler when its busy time per step is over this many times "
                    "the job's median, e.g. 1.5 (reported, never stopped; 0: off)",
            .default_text = "0",
            .check = [](const std::string& text) -> Status {
              if (Status number = in_range(0, progress::kMaxStragglerThreshold)(text); !number)
                return number;
              const double ratio = std::strtod(text.c_str(), nullptr);
              return ratio == 0 ? Status{} : progress::straggler_threshold_milli(ratio).status();
            }},
           &F::straggler_threshold},
          {{.name = "health_check",
            .help = "Shell command run before this node joins each round; a failure (any exit "
                    "status but 0) keeps the node out and exits 69. Built-in checks first: "
                    "builtin:gpu[=N],nic[=eth0+ib0],path=/dir[:min_free=10G] [command]",
            .check = parses(agent::builtin::split_health_check)},
           &F::health_check},
          {{.name = "health_check_timeout",
            .type = T::kNumber,
            .help = "Seconds the health check may take; longer is a failure",
            .default_text = "60",
            .check = in_range(0.001, 1e9)},
           &F::health_check_timeout},
          {{.name = "health_check_interval",
            .type = T::kNumber,
            .help = "Seconds between health checks while the workers run; a failure makes the "
                    "node leave the job (0: only before each round)",
            .default_text = "0",
            .check = kSeconds},
           &F::health_check_interval},
          {{.name = "gpu_memory_wait",
            .type = T::kNumber,
            .help = "Seconds a restart waits for the last attempt's processes to free their GPU "
                    "memory (NVML; 0: no wait)",
            .default_text = "30",
            .check = kSeconds},
           &F::gpu_memory_wait},
          {{.name = "exit_barrier_timeout",
            .type = T::kNumber,
            .help = "Seconds a finished node waits for the rest of the job",
            .default_text = "300",
            .check = kSeconds},
           &F::exit_barrier_timeout},
          {metrics::metrics_port_flag(), &F::metrics_port},
          {metrics::metrics_addr_flag(), &F::metrics_addr},
          // The config file's own keys: the entry point and the workers' extra environment.
          {{.name = "training_script", .scope = FlagScope::kFileOnly}},
          {{.name = "training_script_args", .type = T::kList, .scope = FlagScope::kFileOnly}},
          {{.name = "env", .type = T::kMap, .scope = FlagScope::kFileOnly}},
      });
  return table;
}

}  // namespace ddprun::launcher
