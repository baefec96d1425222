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
// redirect clients to it and take over when its lease expires. Exit codes (decided by the
// error's kind, common/exit_codes.h): 0 after a shutdown, 2 for bad flags or files they name
// or a state it refuses to use, 1 when it cannot listen or cannot reach its state (a directory
// it cannot create), 3 when a save failed (or, for a replica, the state could not be loaded at
// a takeover).
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
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
#include "rendezvous/conf/rdzv_conf.h"
#include "rendezvous/daemon/daemon_flags.h"
#include "rendezvous/daemon/daemon_security.h"
#include "rendezvous/daemon/release_command.h"
#include "rendezvous/daemon/replica.h"
#include "rendezvous/daemon/status_command.h"
#include "rendezvous/server/server.h"
#include "rendezvous/server/server_metrics.h"
#include "rendezvous/state/etcd/etcd_client.h"
#include "rendezvous/state/open_state_store.h"
#include "rendezvous/wire/server_address.h"

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

// The exit code when the state cannot be used. A state the daemon refuses (not its database,
// corrupt, written by a newer daemon, held by another daemon) waits for the operator to choose
// another --state-dir, as a bad flag does: 2. One it cannot reach (a directory it cannot
// create, an I/O error) is the machine's: 1, and a restart may find it fixed.
int state_exit_code(const ddprun::Status& why) {
  const bool refused = why.is_refused() || why.is_malformed() || why.is_invalid_argument();
  return ddprun::exit_code_for(refused ? why.with_kind(ddprun::ErrorKind::kInvalidArgument) : why);
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
    auto where = ddprun::parse_host_port(flags.advertise, 0, {.port_optional = false});
    if (!where) return where.status().with_context("--advertise");
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
  return ddprun::to_string(ddprun::HostPort{host, port});
}

// With an etcd spec: the replica that drives `server`, which listens on `port`.
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

// The server's options from the daemon's flags: its timeouts and who may talk to it.
ddprun::Result<ddprun::rdzv::ServerOptions> server_options(const DaemonFlags& flags) {
  using namespace ddprun;
  rdzv::ServerOptions options;
  auto idle = rdzv::parse_duration(flags.idle_timeout);
  if (!idle) return idle.status().with_context("--idle-timeout");
  auto grace = rdzv::parse_duration(flags.shutdown_grace);
  if (!grace) return grace.status().with_context("--shutdown-grace");
  auto cooldown = rdzv::parse_duration(flags.exclude_cooldown);
  if (!cooldown) return cooldown.status().with_context("--exclude-cooldown");
  options.idle_timeout = *idle;
  options.shutdown_grace = *grace;
  options.exclude_cooldown = *cooldown;
  if (Status s = rdzv::apply_security(flags.security, flags.host, options); !s) {
    // The files and settings its flags name: whatever failed, the fix is in the command line.
    return s.with_kind(ErrorKind::kInvalidArgument);
  }
  return options;
}

// The first SIGTERM or SIGINT shuts down in two stages: the server closes its connections and
// a replica gives up its lease (the next leader takes over at its next poll), both before the
// loop stops; a second signal stops the loop at once.
struct ShutdownOnSignals {
  boost::asio::io_context& io;
  boost::asio::signal_set& signals;
  ddprun::rdzv::RendezvousServer& server;
  ddprun::rdzv::Replica* replica;
  std::function<void()> stop_reporting;  // the status line, the watchdog, STOPPING
  int signals_seen = 0;

  void arm() {
    signals.async_wait([this](const boost::system::error_code& ec, int signo) {
      if (!ec) on_signal(signo);
    });
  }
  void on_signal(int signo) {
    if (++signals_seen > 1) {
      spdlog::warn("second signal ({}): stopping now", signo);
      io.stop();
      return;
    }
    spdlog::info("signal {}: shutting down", signo);
    stop_reporting();
    auto pending = std::make_shared<int>(replica ? 2 : 1);
    auto one_done = [this, pending] {
      if (--*pending > 0) return;
      signals.cancel();
      io.stop();
    };
    server.shutdown(one_done);
    if (replica) replica->resign(one_done);
    arm();
  }
};

// --metrics-port: the daemon's /metrics and /healthz (nothing without the flag).
ddprun::Result<std::unique_ptr<ddprun::rdzv::ServerMetricsEndpoint>> serve_metrics(
    boost::asio::io_context& io, ddprun::rdzv::RendezvousServer& server, const DaemonFlags& flags) {
  using ddprun::rdzv::ServerMetricsEndpoint;
  if (!flags.metrics_port) return std::unique_ptr<ServerMetricsEndpoint>();
  auto metrics = std::make_unique<ServerMetricsEndpoint>(
      io, server,
      ddprun::metrics::HttpEndpointOptions{flags.metrics_addr,
                                           static_cast<uint16_t>(*flags.metrics_port)});
  if (ddprun::Status s = metrics->listen(); !s) return s.with_context("--metrics-port");
  spdlog::info("serving metrics on http://{}:{}/metrics (health: /healthz)", flags.metrics_addr,
               metrics->port());
  return metrics;
}

int run(const DaemonFlags& flags) {
  using namespace ddprun;
  auto options = server_options(flags);
  if (!options) {
    spdlog::error("{}", options.error_message());
    return exit_code_for(options.status());
  }

  boost::asio::io_context io;
  // Caught from before the "listening" line: a SIGTERM right after it must still shut down
  // gracefully (the handlers run once the loop does).
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  auto spec = state_spec(flags);
  if (!spec) {
    spdlog::error("{}", spec.error_message());
    return exit_code_for(spec.status());
  }
  const bool replicated = *spec && (*spec)->kind == rdzv::state::StateSpec::Kind::kEtcd;
  std::unique_ptr<rdzv::state::StateStore> store;  // before the server: it must outlive it
  if (*spec && !replicated) {
    auto opened = rdzv::state::open_state_store(io, **spec);
    if (!opened) {
      spdlog::error("{}", opened.error_message());
      return state_exit_code(opened.status());
    }
    store = std::move(*opened);
  }
  rdzv::RendezvousServer server(io, *options);
  int exit_code = 0;
  auto on_save_failure = [&](const Status&) {
    exit_code = kExitStateLost;  // agents reconnect to the daemon started in our place
    io.stop();
  };
  if (store) {
    Status restored = server.restore_state(*store, on_save_failure);
    if (!restored) {
      spdlog::error("{}", restored.message());
      return state_exit_code(restored);
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
      return exit_code_for(made.status());
    }
    replica = std::move(*made);
    replica->start();
    spdlog::info("state: {}", replica->describe());
  }
  auto metrics = serve_metrics(io, server, flags);
  if (!metrics) {
    spdlog::error("{}", metrics.error_message());
    return exit_code_for(metrics.status());
  }
  std::printf("listening on %s:%u\n", flags.host.c_str(), static_cast<unsigned>(server.port()));
  (void)std::fflush(stdout);
  auto notifier = make_service_notifier();
  ServiceWatchdog watchdog(io, *notifier);
  PeriodicStatus status(io, *notifier, kStatusRefresh,
                        [&] { return status_line(flags.host, server, replica.get()); });
  status.start(/*with_ready=*/true);
  watchdog.start();

  ShutdownOnSignals shutdown{io, signals, server, replica.get(), [&] {
                               status.stop();
                               watchdog.stop();
                               notifier->stopping();
                             }};
  shutdown.arm();
  io.run();
  return exit_code;
}

int usage_error(const ddprun::Status& why) {
  (void)std::fprintf(stderr, "ddp-rendezvous: error: %s\n", why.message().c_str());
  return ddprun::exit_code_for(why);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args.front() == "status") {
    return ddprun::rdzv::status_main({args.begin() + 1, args.end()}, stdout, stderr);
  }
  if (!args.empty() && args.front() == "release") {
    return ddprun::rdzv::release_main({args.begin() + 1, args.end()}, stdout, stderr);
  }
  CLI::App app{"ddp-rendezvous: rendezvous server for ddprun jobs (many jobs, one daemon)",
               "ddp-rendezvous"};
  app.footer(
      "ddp-rendezvous status [--endpoint host:port] [--json]: show a running daemon's jobs, "
      "rounds, nodes, restarts and the hosts kept out (ddp-rendezvous status --help)\n"
      "ddp-rendezvous release HOST [--endpoint host:port]: let a host kept out after a node of "
      "it left unfit join again before its --exclude-cooldown ends (ddp-rendezvous release "
      "--help)");
  app.set_version_flag("--version", std::string("ddp-rendezvous ") + DDPRUN_VERSION);
  DaemonFlags flags;
  auto parsed = ddprun::rdzv::daemon_flag_table().parse(app, flags, args, {});
  if (!parsed) return usage_error(parsed.status());
  if (parsed->output) {  // --help, --version
    (void)std::printf("%s\n", parsed->output->c_str());
    return 0;
  }
  for (const ddprun::ConfigValue& v : parsed->from_file.file_only) {
    if (v.key == "tokens") flags.security.file_job_tokens = v.map;  // no single flag takes it
  }

  ddprun::init_logging("ddp-rendezvous");
  if (!flags.log_level.empty()) spdlog::set_level(spdlog::level::from_str(flags.log_level));
  return run(flags);
}
