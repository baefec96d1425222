#include "rendezvous/daemon_security.h"

#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <boost/asio/ip/address.hpp>

#include "rendezvous/security/credentials.h"

namespace ddprun::rdzv {

void declare_security_flags(CLI::App& app, DaemonSecurityFlags& flags) {
  app.add_option("--token-file", flags.token_file,
                 "Token of every job without its own (a file only its owner can read)");
  app.add_option("--job-token", flags.job_tokens, "A job's own token file: JOB=PATH (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--tls-cert", flags.tls_cert, "Serve TLS with this PEM certificate chain");
  app.add_option("--tls-key", flags.tls_key, "The PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", flags.tls_client_ca,
                 "Require client certificates signed by this CA (mutual TLS)");
  app.add_option("--max-connections", flags.max_connections, "Open connections in total")
      ->capture_default_str();
  app.add_option("--max-connections-per-source", flags.max_connections_per_source,
                 "Open connections from one address")
      ->capture_default_str();
  app.add_option("--max-jobs", flags.max_jobs, "Jobs served at once")->capture_default_str();
  app.add_option("--max-nodes-per-job", flags.max_nodes_per_job, "Nodes in one job")
      ->capture_default_str();
  app.add_option("--max-requests-in-flight", flags.max_requests_in_flight,
                 "Unread answers queued for one connection before it is refused")
      ->capture_default_str();
}

std::vector<ConfigKey> security_config_keys() {
  using T = ConfigType;
  auto count = in_range(1, 1e9);
  return {
      {"token_file", T::kString, {}},
      {"tokens", T::kMap, {}},
      {"tls_cert", T::kString, {}},
      {"tls_key", T::kString, {}},
      {"tls_client_ca", T::kString, {}},
      {"max_connections", T::kInteger, count},
      {"max_connections_per_source", T::kInteger, count},
      {"max_jobs", T::kInteger, count},
      {"max_nodes_per_job", T::kInteger, in_range(1, 1e7)},
      {"max_requests_in_flight", T::kInteger, count},
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
