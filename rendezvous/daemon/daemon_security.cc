#include "rendezvous/daemon/daemon_security.h"

#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <boost/asio/ip/address.hpp>

#include "rendezvous/security/credentials.h"

namespace ddprun::rdzv {

std::vector<Flag<DaemonSecurityFlags>> security_flags() {
  using F = DaemonSecurityFlags;
  using T = ConfigType;
  const ServerOptions defaults;
  auto limit = [](const std::string& name, const std::string& help, size_t value, double max) {
    return FlagInfo{.name = name,
                    .type = T::kInteger,
                    .help = help,
                    .default_text = std::to_string(value),
                    .check = in_range(1, max)};
  };
  return {
      {{.name = "token_file",
        .help = "Token of every job without its own (a file only its owner can read)"},
       &F::token_file},
      {{.name = "job_token",
        .help = "A job's own token file: JOB=PATH (repeatable)",
        .scope = FlagScope::kCommandLineOnly},
       &F::job_tokens},
      {{.name = "tokens", .type = T::kMap, .scope = FlagScope::kFileOnly}},
      {{.name = "tls_cert", .help = "Serve TLS with this PEM certificate chain"}, &F::tls_cert},
      {{.name = "tls_key", .help = "The PEM private key of --tls-cert"}, &F::tls_key},
      {{.name = "tls_client_ca",
        .help = "Require client certificates signed by this CA (mutual TLS)"},
       &F::tls_client_ca},
      {limit("max_connections", "Open connections in total", defaults.max_connections, 1e9),
       &F::max_connections},
      {limit("max_connections_per_source", "Open connections from one address",
             defaults.max_connections_per_source, 1e9),
       &F::max_connections_per_source},
      {limit("max_jobs", "Jobs served at once", defaults.max_jobs, 1e9), &F::max_jobs},
      {limit("max_nodes_per_job", "Nodes in one job", defaults.max_nodes_per_job, 1e7),
       &F::max_nodes_per_job},
      {limit("max_requests_in_flight",
             "Unread answers queued for one connection before it is refused",
             defaults.max_requests_in_flight, 1e9),
       &F::max_requests_in_flight},
  };
}

namespace {

Result<ServerCredentialFiles> credential_files(const DaemonSecurityFlags& flags) {
  ServerCredentialFiles files;
  files.token_file = flags.token_file;
  for (const auto& [job, path] : flags.file_job_tokens) files.job_token_files[job] = path;
  for (const std::string& item : flags.job_tokens) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return Status::invalid_argument(
          fmt::format("--job-token '{}': expected JOB=PATH (a job id and its token file)", item));
    }
    files.job_token_files[item.substr(0, eq)] = item.substr(eq + 1);
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return Status::invalid_argument("--tls-cert and --tls-key go together");
  }
  if (!flags.tls_client_ca.empty() && flags.tls_cert.empty()) {
    return Status::invalid_argument(
        "--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked "
        "inside TLS");
  }
  files.tls = TlsServerFiles{flags.tls_cert, flags.tls_key, flags.tls_client_ca};
  return files;
}

bool is_loopback(const std::string& host) {
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  if (ec) return host == "localhost";
  return address.is_loopback();
}

}  // namespace

Status apply_security(const DaemonSecurityFlags& flags, const std::string& listen_host,
                      ServerOptions& options) {
  auto files = credential_files(flags);
  if (!files) return files.status();
  auto credentials = load_server_credentials(*files);
  if (!credentials) return credentials.status();
  options.credentials = *credentials;
  options.max_connections = flags.max_connections;
  options.max_connections_per_source = flags.max_connections_per_source;
  options.max_jobs = flags.max_jobs;
  options.max_nodes_per_job = flags.max_nodes_per_job;
  options.max_requests_in_flight = flags.max_requests_in_flight;
  const bool authenticated =
      (*credentials)->has_tokens() || (*credentials)->requires_client_certificates();
  if (!authenticated && !is_loopback(listen_host)) {
    spdlog::warn(
        "listening on {} without authentication: anyone who can reach this port can join, "
        "restart or end any job. Give it --token-file (and the agents --rdzv_conf "
        "token_file=...), or --tls-client-ca for mutual TLS; see docs/reliability.md",
        listen_host);
  }
  return Status();
}

}  // namespace ddprun::rdzv
