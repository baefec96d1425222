// ddp-rendezvous's settings, declared once in daemon_flags.cc (common/flag_table.h): each makes
// its --flag-with-dashes, its `ddp-rendezvous --config daemon.yaml` key (the name with
// underscores), default and check. What they mean is in ddp_rendezvous_main.cc.
#pragma once

#include <optional>
#include <string>

#include "common/flag_table.h"
#include "rendezvous/daemon/daemon_security.h"

namespace ddprun::rdzv {

// Every setting as given; defaults are the table's.
struct DaemonFlags {
  std::string config;  // --config daemon.yaml: the file whose settings are the defaults
  std::string host;
  int port = 0;
  std::string log_level;  // empty: $DDPRUN_LOG_LEVEL, else info
  std::string idle_timeout;
  std::string shutdown_grace;
  std::string exclude_cooldown;     // how long a host is kept out after a node left unfit
  std::optional<int> metrics_port;  // unset: no metrics endpoint
  std::string metrics_addr;
  DaemonSecurityFlags security;
  std::string state_dir;
  std::string state;
  std::string advertise;
  std::string lease_ttl;
  int etcd_max_job_bytes = 0;  // the largest job the etcd state store writes (one etcd value)
};

const FlagTable<DaemonFlags>& daemon_flag_table();

}  // namespace ddprun::rdzv
