#include "rendezvous/daemon/daemon_flags.h"

#include "metrics/endpoint_flags.h"
#include "rendezvous/conf/rdzv_conf.h"

namespace ddprun::rdzv {
namespace {

Status is_duration(const std::string& text) { return parse_duration(text).status(); }

std::vector<Flag<DaemonFlags>> daemon_flags() {
  using F = DaemonFlags;
  using T = ConfigType;
  std::vector<Flag<DaemonFlags>> flags = {
      {{.name = "config",
        .help = "YAML file of settings (flag names as keys, with underscores); the command "
                "line overrides it",
        .scope = FlagScope::kConfigPath},
       &F::config},
      {{.name = "host", .help = "Address to listen on", .default_text = "0.0.0.0"}, &F::host},
      {{.name = "port",
        .type = T::kInteger,
        .help = "TCP port; 0 picks a free one (printed on stdout)",
        .default_text = "29400",
        .check = in_range(0, 65535)},
       &F::port},
      {{.name = "log_level",
        .help = "trace|debug|info|warn|error|off (default: $DDPRUN_LOG_LEVEL or info)",
        .check = one_of({"trace", "debug", "info", "warn", "error", "off"})},
       &F::log_level},
      {{.name = "idle_timeout",
        .type = T::kScalar,
        .help = "Drop a connection that has not joined after this long silent (s, or 500ms)",
        .default_text = "60",
        .check = is_duration},
       &F::idle_timeout},
      {{.name = "shutdown_grace",
        .type = T::kScalar,
        .help = "On SIGTERM, wait this long for clients to hang up before closing them",
        .default_text = "2",
        .check = is_duration},
       &F::shutdown_grace},
      {{.name = "exclude_cooldown",
        .type = T::kScalar,
        .help = "Keep the host of a node that left a job unfit to train (too many failures, "
                "a failed health check, a rank's request) out of every job this long (s, or "
                "500ms); 0: only out of the job it left. `ddp-rendezvous release HOST` "
                "lets one in sooner",
        .default_text = "3600",
        .check = is_duration},
       &F::exclude_cooldown},
      {metrics::metrics_port_flag(), &F::metrics_port},
      {metrics::metrics_addr_flag(), &F::metrics_addr},
  };
  for (Flag<DaemonSecurityFlags>& flag : security_flags()) {
    flags.push_back(Flag<DaemonFlags>::inside(std::move(flag), &F::security));
  }
  flags.insert(
      flags.end(),
      {
          {{.name = "state_dir",
            .help = "Keep the jobs' state in DIR/rendezvous.db (SQLite) so that a restarted "
                    "daemon resumes them (default: memory only)"},
           &F::state_dir},
          {{.name = "state",
            .help = "State store as a spec: DIR, sqlite:DIR, memory:, or "
                    "etcd://h1:2379,h2:2379[/name] for replicas that share it (overrides "
                    "--state-dir)"},
           &F::state},
          {{.name = "advertise",
            .help = "With etcd: this replica's address as clients dial it, host:port "
                    "(default: --host and the bound port; this machine's host name when --host "
                    "is a wildcard)"},
           &F::advertise},
          {{.name = "lease_ttl",
            .type = T::kScalar,
            .help = "With etcd: the leader's lease; a dead leader is replaced within about "
                    "this (s, or 500ms; etcd counts whole seconds)",
            .default_text = "5",
            .check = is_duration},
           &F::lease_ttl},
          {{.name = "etcd_max_job_bytes",
            .type = T::kInteger,
            .help = "With etcd: the largest job's state written, bytes (one etcd value: about "
                    "200 bytes a node). Raise it together with etcd's --max-request-bytes for "
                    "jobs of more than about 5,000 nodes",
            .default_text = "1048576",
            .check = in_range(1024, 1 << 30)},
           &F::etcd_max_job_bytes},
      });
  return flags;
}

}  // namespace

const FlagTable<DaemonFlags>& daemon_flag_table() {
  static const FlagTable<DaemonFlags> table({.underscores = false, .env_prefix = ""},
                                            daemon_flags());
  return table;
}

}  // namespace ddprun::rdzv
