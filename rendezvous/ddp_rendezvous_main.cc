// ddp-rendezvous: the rendezvous server as a standalone daemon for a head node. It serves any
// number of jobs at once (isolated by --rdzv_id) and outlives every agent, so losing any node
// never loses the rendezvous.
//
// Prints "listening on <host>:<port>" as its first stdout line (so --port 0 is usable from
// scripts and tests). SIGTERM/SIGINT start the two-stage shutdown; a second signal ends it now.
// As a systemd Type=notify service (NOTIFY_SOCKET set): READY=1 once it listens, a STATUS=
// line with its jobs and connections, WATCHDOG=1 from the event loop, STOPPING=1 at shutdown.
//
// --state-dir DIR makes it durable (rendezvous/state, docs/rendezvous.md): every decision is
// committed to DIR/rendezvous.db before a client hears of it, and a daemon started again on the
// same directory carries on the jobs it finds there. --state etcd://h1:2379,... makes it one of
// several replicas sharing the jobs in etcd (replica.h): one leads and serves, the others
// redirect clients to it and take over when its lease expires. Exit codes: 0 after a
// shutdown, 1 when it cannot listen, 2 for bad flags or a state it refuses to use, 3 when a
// save failed (or, for a replica, the state could not be loaded at a takeover).
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "common/config_file.h"
#include "common/exit_codes.h"
#include "common/logging.h"
#include "common/periodic_status.h"
#include "common/service_watchdog.h"
#include "common/systemd_notifier.h"
#include "rendezvous/daemon_security.h"
#include "rendezvous/rdzv_conf.h"
#include "rendezvous/replica.h"
#include "rendezvous/server.h"
#include "rendezvous/server_address.h"
#include "rendezvous/server_metrics.h"
#include "rendezvous/state/etcd_client.h"
#include "rendezvous/state/state_store.h"
#include "rendezvous/status_command.h"

namespace {

struct DaemonFlags {
  std::string host = "0.0.0.0";
  uint16_t port = 29400;
  std::string log_level;
  std::string idle_timeout = "60";
  std::string shutdown_grace = "2";
  int metrics_port = -1;  // -1: no metrics endpoint
  std::string metrics_addr = "127.0.0.1";
  ddprun::rdzv::DaemonSecurityFlags security;
  std::string state_dir;
  std::string state;
  std::string advertise;
  std::string lease_ttl = "5";
};

void declare_daemon_flags(CLI::App& app, DaemonFlags& flags) {
  // A flag given twice takes its last value, as ddprun's (and argparse's) do.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--host", flags.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", flags.port, "TCP port; 0 picks a free one (printed on stdout)")
      ->capture_default_str();
  app.add_option("--log-level", flags.log_level,
                 "trace|debug|info|warn|error|off (default: $DDPRUN_LOG_LEVEL or info)");
  app.add_option("--idle-timeout", flags.idle_timeout,
                 "Drop a connection that has not joined after this long silent (s, or 500ms)")
      ->capture_default_str();
  app.add_option("--shutdown-grace", flags.shutdown_grace,
                 "On SIGTERM, wait this long for clients to hang up before closing them")
      ->capture_default_str();
  app.add_option("--metrics-port", flags.metrics_port,
                 "Serve /metrics (Prometheus) and /healthz on this port; 0 picks a free one "
                 "(logged); default: off")
      ->check(CLI::Range(0, 65535));
  app.add_option("--metrics-addr", flags.metrics_addr,
                 "Address of the metrics endpoint; anything but loopback exposes job "
                 "information to the network")
      ->capture_default_str();
  ddprun::rdzv::declare_security_flags(app, flags.security);
  app.add_option("--state-dir", flags.state_dir,
                 "Keep the jobs' state in DIR/rendezvous.db (SQLite) so that a restarted daemon "
                 "resumes them (default: memory only)");
  app.add_option(
      "--state", flags.state,
      "State store as a spec: DIR, sqlite:DIR, memory:, or etcd://h1:2379,h2:2379[/name] "
      "for replicas that share it (overrides --state-dir)");
  app.add_option("--advertise", flags.advertise,
                 "With etcd: this replica's address as clients dial it, host:port (default: "
                 "--host and the bound port; this machine's host name when --host is a wildcard)");
  app.add_option("--lease-ttl", flags.lease_ttl,
                 "With etcd: the leader's lease; a dead leader is replaced within about this "
                 "(s, or 500ms; etcd counts whole seconds)")
      ->capture_default_str();
}

// The keys of `ddp-rendezvous --config daemon.yaml`: the flags' names, with underscores.
const std::vector<ddprun::ConfigKey>& daemon_config_schema() {
  using T = ddprun::ConfigType;
  auto duration = [](const std::string& text) -> ddprun::Status {
    return ddprun::rdzv::parse_duration(text).status();
  };
  static const std::vector<ddprun::ConfigKey> schema = [&] {
    std::vector<ddprun::ConfigKey> keys = {
        {"host", T::kString, {}},
        {"port", T::kInteger, ddprun::in_range(0, 65535)},
        {"log_level", T::kString,
         ddprun::one_of({"trace", "debug", "info", "warn", "error", "off"})},
        {"idle_timeout", T::kScalar, duration},
        {"shutdown_grace", T::kScalar, duration},
        {"state_dir", T::kString, {}},
        {"state", T::kString, {}},
        {"advertise", T::kString, {}},
        {"lease_ttl", T::kScalar, duration},
        {"metrics_port", T::kInteger, ddprun::in_range(0, 65535)},
        {"metrics_addr", T::kString, {}},
    };
    for (auto& key : ddprun::rdzv::security_config_keys()) keys.push_back(std::move(key));
    return keys;
  }();
  return schema;
}

// Makes the file's settings the defaults of `app`'s options: the command line still wins.
ddprun::Status apply_daemon_config(const std::string& path, CLI::App& app, DaemonFlags& flags) {
  auto values = ddprun::load_config_file(path, daemon_config_schema());
  if (!values) return values.status();
  for (const auto& v : *values) {
    if (v.key == "tokens") {  // a map of job → token file: no single flag takes it
      flags.security.file_job_tokens = v.map;
      continue;
    }
    std::string flag = "--" + v.key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    try {
      app.get_option(flag)->run_callback_for_default(true)->default_val(v.text);
    } catch (const CLI::Error& e) {
      return ddprun::Status::invalid_argument(v.where + ": key '" + v.key + "': " + e.what());
    }
  }
  return {};
}

// The --config path in `argv`, from a throwaway parse that knows every flag's arity.
std::string find_config_path(int argc, char** argv, DaemonFlags scratch) {
  CLI::App app;
  std::string path;
  declare_daemon_flags(app, scratch);
  app.add_option("--config", path);
  app.set_help_flag();
  try {
    app.parse(argc, argv);
  } catch (const CLI::Error&) {
  }
  return path;
}

// How often the STATUS= line is brought up to date (sent only when it changed).
constexpr std::chrono::seconds kStatusRefresh{2};

std::string status_line(const std::string& host, const ddprun::rdzv::RendezvousServer& server,
                        const ddprun::rdzv::Replica* replica) {
  const ddprun::rdzv::ServerStats stats = server.stats();
  return fmt::format("listening on {}:{}{}; {} job{}, {} connection{} ({} accepted since start)",
                     host, server.port(), replica ? ", " + replica->role() : std::string(),
                     stats.jobs, stats.jobs == 1 ? "" : "s", stats.connections,
                     stats.connections == 1 ? "" : "s", stats.totals.accepted);
}

// The state spec the flags name; nullopt: memory only.
ddprun::Result<std::optional<ddprun::rdzv::state::StateSpec>> state_spec(const DaemonFlags& flags) {
  std::string spec = flags.state;
  if (spec.empty() && !flags.state_dir.empty()) spec = "sqlite:" + flags.state_dir;
  if (spec.empty()) return std::optional<ddprun::rdzv::state::StateSpec>();
  auto parsed = ddprun::rdzv::state::parse_state_spec(spec);
  if (!parsed) return parsed.status().with_context("--state");
  return std::optional(std::move(*parsed));
}

// --advertise, or host:port from --host (the host name for a wildcard) and the bound port.
ddprun::Result<std::string> advertised_address(const DaemonFlags& flags, uint16_t port) {
  if (!flags.advertise.empty()) {
    auto where = ddprun::rdzv::state::split_host_port(flags.advertise, 0);
    if (!where || where->second == 0) {
      return ddprun::Status::invalid_argument("--advertise " + flags.advertise +
                                              ": expected host:port");
    }
    return flags.advertise;
  }
  std::string host = flags.host;
  if (host == "0.0.0.0" || host == "::" || host.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) {
      return ddprun::Status::invalid_argument(
          "--host is a wildcard and the host name is unknown: give --advertise host:port");
    }
    host = name;
  }
  return ddprun::rdzv::to_string(ddprun::rdzv::ServerAddress{host, port});
}

// With an etcd spec: the replica that drives `server`, which listens on `port`. Errors are
// printed; the exit code is 2.
ddprun::Result<std::unique_ptr<ddprun::rdzv::Replica>> make_replica(
    boost::asio::io_context& io, ddprun::rdzv::RendezvousServer& server, const DaemonFlags& flags,
    uint16_t port, ddprun::rdzv::state::StateSpec spec,
    std::function<void(const ddprun::Status&)> on_failure) {
  ddprun::rdzv::ReplicaOptions options;
  options.etcd = std::move(spec);
  auto ttl = ddprun::rdzv::parse_duration(flags.lease_ttl);
  if (!ttl) return ttl.status().with_context("--lease-ttl");
  options.lease_ttl = *ttl;
  auto advertised = advertised_address(flags, port);
  if (!advertised) return advertised.status();
  options.advertised_address = std::move(*advertised);
  return std::make_unique<ddprun::rdzv::Replica>(io, server, std::move(options),
                                                 std::move(on_failure));
}

int run(const DaemonFlags& flags) {
  using namespace ddprun;
  rdzv::ServerOptions options;
  auto idle = rdzv::parse_duration(flags.idle_timeout);
  auto grace = rdzv::parse_duration(flags.shutdown_grace);
  if (!idle || !grace) {
    spdlog::error("{}", !idle ? idle.error_message() : grace.error_message());
    return 2;
  }
  options.idle_timeout = *idle;
  options.shutdown_grace = *grace;
  if (Status s = rdzv::apply_security(flags.security, flags.host, options); !s) {
    spdlog::error("{}", s.message());
    return 2;
  }

  boost::asio::io_context io;
  // Caught from before the "listening" line: a SIGTERM right after it must still shut down
  // gracefully (the handlers run once the loop does).
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  auto spec = state_spec(flags);
  if (!spec) {
    spdlog::error("{}", spec.error_message());
    return 2;
  }
  const bool replicated = *spec && (*spec)->kind == rdzv::state::StateSpec::Kind::kEtcd;
  std::unique_ptr<rdzv::state::StateStore> store;  // before the server: it must outlive it
  if (*spec && !replicated) {
    auto opened = rdzv::state::open_state_store(io, **spec);
    if (!opened) {
      spdlog::error("{}", opened.error_message());
      return 2;
    }
    store = std::move(*opened);
  }
  rdzv::RendezvousServer server(io, options);
  int exit_code = 0;
  auto on_save_failure = [&](const Status&) {
    exit_code = kExitStateLost;  // agents reconnect to the daemon started in our place
    io.stop();
  };
  if (store) {
    Status restored = server.restore_state(*store, on_save_failure);
    if (!restored) {
      spdlog::error("{}", restored.message());
      return 2;
    }
    spdlog::info("state: {}", store->describe());
  }
  // A replica serves nobody until it has won the lead (replica.h).
  if (replicated) server.redirect_clients(rdzv::Redirect{});
  if (Status s = server.listen(flags.host, flags.port); !s) {
    spdlog::error("{}", s.message());
    return exit_code_for(s);
  }
  std::unique_ptr<rdzv::Replica> replica;
  if (replicated) {
    auto made = make_replica(io, server, flags, server.port(), **spec, [&](const Status& why) {
      spdlog::error("replica: {}", why.message());
      on_save_failure(why);
    });
    if (!made) {
      spdlog::error("{}", made.error_message());
      return 2;
    }
    replica = std::move(*made);
    replica->start();
    spdlog::info("state: {}", replica->describe());
  }
  std::optional<rdzv::ServerMetricsEndpoint> metrics;
  if (flags.metrics_port >= 0) {
    metrics.emplace(io, server,
                    ddprun::metrics::HttpEndpointOptions{
                        flags.metrics_addr, static_cast<uint16_t>(flags.metrics_port)});
    if (Status s = metrics->listen(); !s) {
      spdlog::error("--metrics-port: {}", s.message());
      return exit_code_for(s);
    }
    spdlog::info("serving metrics on http://{}:{}/metrics (health: /healthz)", flags.metrics_addr,
                 metrics->port());
  }
  std::printf("listening on %s:%u\n", flags.host.c_str(), static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  auto notifier = make_service_notifier();
  ServiceWatchdog watchdog(io, *notifier);
  PeriodicStatus status(io, *notifier, kStatusRefresh,
                        [&] { return status_line(flags.host, server, replica.get()); });
  status.start(/*with_ready=*/true);
  watchdog.start();

  int signals_seen = 0;
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int signo) {
        if (ec) return;
        if (++signals_seen > 1) {
          spdlog::warn("second signal ({}): stopping now", signo);
          io.stop();
          return;
        }
        spdlog::info("signal {}: shutting down", signo);
        status.stop();
        watchdog.stop();
        notifier->stopping();
        // A replica gives up its lease at once (the next leader takes over at its next poll)
        // while the server closes its connections; both finish before the loop stops.
        auto pending = std::make_shared<int>(replica ? 2 : 1);
        auto one_done = [&, pending] {
          if (--*pending > 0) return;
          signals.cancel();
          io.stop();
        };
        server.shutdown(one_done);
        if (replica) replica->resign(one_done);
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  io.run();
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ddp-rendezvous: rendezvous server for ddprun jobs (many jobs, one daemon)"};
  DaemonFlags flags;
  declare_daemon_flags(app, flags);
  std::string config_path;
  app.add_option("--config", config_path,
                 "YAML file of settings (flag names as keys, with underscores); the command "
                 "line overrides it");
  if (const std::string path = find_config_path(argc, argv, flags); !path.empty()) {
    if (ddprun::Status s = apply_daemon_config(path, app, flags); !s) {
      std::fprintf(stderr, "ddp-rendezvous: error: %s\n", s.message().c_str());
      return 2;
    }
  }
  ddprun::rdzv::StatusCommandOptions status;
  CLI::App* status_command = app.add_subcommand(
      "status", "Show a running daemon's jobs, rounds, nodes and restarts (read-only)");
  status_command->add_option("--endpoint", status.endpoint, "The daemon's host:port")
      ->capture_default_str();
  status_command->add_flag("--json", status.json, "Print JSON instead of a table");
  status_command->add_option("--token-file", status.token_file,
                             "The daemon's token (its --token-file), when it requires one");
  status_command->add_option("--tls-ca", status.tls_ca,
                             "CA bundle that signed the daemon's TLS certificate (TLS daemons)");
  status_command->add_option("--tls-cert", status.tls_cert,
                             "This client's certificate, for a daemon that requires one");
  status_command->add_option("--tls-key", status.tls_key, "The key of --tls-cert");
  status_command->add_option("--tls-server-name", status.tls_server_name,
                             "The name the daemon's certificate carries (default: the "
                             "endpoint's host)");
  CLI11_PARSE(app, argc, argv);
  if (status_command->parsed()) return ddprun::rdzv::run_status_command(status, stdout, stderr);

  ddprun::init_logging("ddp-rendezvous");
  if (!flags.log_level.empty()) spdlog::set_level(spdlog::level::from_str(flags.log_level));
  return run(flags);
}
