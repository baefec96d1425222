// Who may talk to the ddp-rendezvous daemon, and how much: its authentication flags (job
// tokens, TLS) and limits, their YAML keys, and the ServerOptions they make. Part of the
// daemon program only (it uses CLI11).
//
//   --token-file PATH          the token of every job without its own
//   --job-token JOB=PATH       a job's own token (repeatable; YAML: tokens: {JOB: PATH})
//   --tls-cert, --tls-key      serve TLS with this certificate and key
//   --tls-client-ca PATH       and require client certificates signed by this CA (mutual TLS)
//   --max-connections, --max-connections-per-source, --max-jobs, --max-nodes-per-job,
//   --max-requests-in-flight   (server_options.h has their meaning and defaults)
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/flag_table.h"
#include "common/result.h"
#include "rendezvous/server/server_options.h"

namespace ddprun::rdzv {

struct DaemonSecurityFlags {
  std::string token_file;
  std::vector<std::string> job_tokens;  // "JOB=PATH"
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // The limits; their defaults (ServerOptions') are set by the table.
  size_t max_connections = 0;
  size_t max_connections_per_source = 0;
  size_t max_jobs = 0;
  uint32_t max_nodes_per_job = 0;
  size_t max_requests_in_flight = 0;
  // From the config file's `tokens:` map (job, path); --job-token wins for the same job.
  std::vector<std::pair<std::string, std::string>> file_job_tokens;
};

// The table entries of these flags (common/flag_table.h), for the daemon's table, with the
// config file's `tokens` map (FlagScope::kFileOnly: the daemon puts it in file_job_tokens).
std::vector<Flag<DaemonSecurityFlags>> security_flags();

// Loads the token and certificate files and sets `options`' credentials and limits. Errors
// name the flag and the file. Logs a warning when `listen_host` is not a loopback address and
// nothing authenticates clients: anyone who can reach the port could join or end any job.
Status apply_security(const DaemonSecurityFlags& flags, const std::string& listen_host,
                      ServerOptions& options);

}  // namespace ddprun::rdzv
