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
// same directory carries on the jobs it finds there. Exit codes: 0 after a shutdown, 1 when it
// cannot listen, 2 for bad flags or a state it refuses to use, 3 when a save failed.
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
#include "common/logging.h"
#include "common/periodic_status.h"
#include "common/service_watchdog.h"
#include "common/systemd_notifier.h"
#include "rendezvous/daemon_security.h"
#include "rendezvous/rdzv_conf.h"
#include "rendezvous/server.h"
#include "rendezvous/server_metrics.h"
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
  app.add_option("--state", flags.state,
                 "State store as a spec: DIR, sqlite:DIR or memory: (overrides --state-dir)");
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

std::string status_line(const std::string& host, const ddprun::rdzv::RendezvousServer& server) {
  const ddprun::rdzv::ServerStats stats = server.stats();
  return fmt::format("listening on {}:{}; {} job{}, {} connection{} ({} accepted since start)",
                     host, server.port(), stats.jobs, stats.jobs == 1 ? "" : "s", stats.connections,
                     stats.connections == 1 ? "" : "s", stats.totals.accepted);
}

// The store the flags name, or nullptr without one. Errors are printed; the exit code is 2.
ddprun::Result<std::unique_ptr<ddprun::rdzv::state::StateStore>> open_store(
    boost::asio::io_context& io, const DaemonFlags& flags) {
  using namespace ddprun::rdzv::state;
  std::string spec = flags.state;
  if (spec.empty() && !flags.state_dir.empty()) spec = "sqlite:" + flags.state_dir;
  if (spec.empty()) return std::unique_ptr<StateStore>();
  auto parsed = parse_state_spec(spec);
  if (!parsed) return parsed.status();
  if (parsed->kind == StateSpec::Kind::kEtcd) {
    return ddprun::Status::invalid_argument(
        "--state etcd://... is not supported by this build of ddp-rendezvous yet; use "
        "--state-dir DIR");
  }
  return open_state_store(io, *parsed);
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
  auto store = open_store(io, flags);  // before the server: it must outlive it
  if (!store) {
    spdlog::error("{}", store.error_message());
    return 2;
  }
  rdzv::RendezvousServer server(io, options);
  int exit_code = 0;
  if (*store) {
    Status restored = server.restore_state(**store, [&](const Status&) {
      exit_code = 3;  // agents reconnect to the daemon started in our place
      io.stop();
    });
    if (!restored) {
      spdlog::error("{}", restored.message());
      return 2;
    }
    spdlog::info("state: {}", (*store)->describe());
  }
  if (Status s = server.listen(flags.host, flags.port); !s) {
    spdlog::error("{}", s.message());
    return 1;
  }
  std::optional<rdzv::ServerMetricsEndpoint> metrics;
  if (flags.metrics_port >= 0) {
    metrics.emplace(io, server,
                    ddprun::metrics::HttpEndpointOptions{
                        flags.metrics_addr, static_cast<uint16_t>(flags.metrics_port)});
    if (Status s = metrics->listen(); !s) {
      spdlog::error("--metrics-port: {}", s.message());
      return 1;
    }
    spdlog::info("serving metrics on http://{}:{}/metrics (health: /healthz)", flags.metrics_addr,
                 metrics->port());
  }
  std::printf("listening on %s:%u\n", flags.host.c_str(), static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  auto notifier = make_service_notifier();
  ServiceWatchdog watchdog(io, *notifier);
  PeriodicStatus status(io, *notifier, kStatusRefresh,
                        [&] { return status_line(flags.host, server); });
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
        server.shutdown([&] {
          signals.cancel();
          io.stop();
        });
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
