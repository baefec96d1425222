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

#include "common/exit_codes.h"
#include "common/logging.h"
#include "common/periodic_status.h"
#include "common/service_watchdog.h"
#include "common/systemd_notifier.h"
#include "rendezvous/daemon/daemon_flags.h"
#include "rendezvous/daemon/daemon_security.h"
#include "rendezvous/conf/rdzv_conf.h"
#include "rendezvous/daemon/replica.h"
#include "rendezvous/server/server.h"
#include "rendezvous/wire/server_address.h"
#include "rendezvous/server/server_metrics.h"
#include "rendezvous/state/etcd/etcd_client.h"
#include "rendezvous/state/open_state_store.h"
#include "rendezvous/daemon/status_command.h"

namespace {

using ddprun::rdzv::DaemonFlags;

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
  options.max_job_bytes = static_cast<size_t>(flags.etcd_max_job_bytes);
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
    return kExitUsage;
  }
  options.idle_timeout = *idle;
  options.shutdown_grace = *grace;
  if (Status s = rdzv::apply_security(flags.security, flags.host, options); !s) {
    spdlog::error("{}", s.message());
    return kExitUsage;
  }

  boost::asio::io_context io;
  // Caught from before the "listening" line: a SIGTERM right after it must still shut down
  // gracefully (the handlers run once the loop does).
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  auto spec = state_spec(flags);
  if (!spec) {
    spdlog::error("{}", spec.error_message());
    return kExitUsage;
  }
  const bool replicated = *spec && (*spec)->kind == rdzv::state::StateSpec::Kind::kEtcd;
  std::unique_ptr<rdzv::state::StateStore> store;  // before the server: it must outlive it
  if (*spec && !replicated) {
    auto opened = rdzv::state::open_state_store(io, **spec);
    if (!opened) {
      spdlog::error("{}", opened.error_message());
      return kExitUsage;
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
      return kExitUsage;
    }
    spdlog::info("state: {}", store->describe());
  }
  // A replica serves nobody until it has won the lead (replica.h).
  if (replicated) server.redirect_clients(rdzv::Redirect{});
  if (Status s = server.listen(flags.host, static_cast<uint16_t>(flags.port)); !s) {
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
      return kExitUsage;
    }
    replica = std::move(*made);
    replica->start();
    spdlog::info("state: {}", replica->describe());
  }
  std::optional<rdzv::ServerMetricsEndpoint> metrics;
  if (flags.metrics_port) {
    metrics.emplace(io, server,
                    ddprun::metrics::HttpEndpointOptions{
                        flags.metrics_addr, static_cast<uint16_t>(*flags.metrics_port)});
    if (Status s = metrics->listen(); !s) {
      spdlog::error("--metrics-port: {}", s.message());
      return exit_code_for(s);
    }
    spdlog::info("serving metrics on http://{}:{}/metrics (health: /healthz)", flags.metrics_addr,
                 metrics->port());
  }
  std::printf("listening on %s:%u\n", flags.host.c_str(), static_cast<unsigned>(server.port()));
  (void)std::fflush(stdout);
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

// Loads `path` and makes its settings the defaults of `app`'s options (the command line wins);
// the `tokens` map, which no single flag takes, goes to `flags`.
ddprun::Status apply_daemon_config(const std::string& path, CLI::App& app, DaemonFlags& flags) {
  auto settings = ddprun::rdzv::daemon_flag_table().catalog().apply_config_file(path, app);
  if (!settings) return settings.status();
  for (const ddprun::ConfigValue& v : settings->file_only) {
    if (v.key == "tokens") flags.security.file_job_tokens = v.map;
  }
  return {};
}

int usage_error(const std::string& message) {
  (void)std::fprintf(stderr, "ddp-rendezvous: error: %s\n", message.c_str());
  return ddprun::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ddp-rendezvous: rendezvous server for ddprun jobs (many jobs, one daemon)"};
  app.set_version_flag("--version", std::string("ddp-rendezvous ") + DDPRUN_VERSION);
  const auto& table = ddprun::rdzv::daemon_flag_table();
  DaemonFlags flags;
  if (ddprun::Status s = table.declare(app, flags); !s) return usage_error(s.message());
  std::string config_path;
  app.add_option("--config", config_path,
                 "YAML file of settings (flag names as keys, with underscores); the command "
                 "line overrides it");
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (const std::string path = table.catalog().find_config_path(args, /*prefix_command=*/false);
      !path.empty()) {
    if (ddprun::Status s = apply_daemon_config(path, app, flags); !s) {
      return usage_error(s.message());
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
  if (ddprun::Status s = table.catalog().check_parsed(app); !s) return usage_error(s.message());

  ddprun::init_logging("ddp-rendezvous");
  if (!flags.log_level.empty()) spdlog::set_level(spdlog::level::from_str(flags.log_level));
  return run(flags);
}
