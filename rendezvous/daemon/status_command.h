// `ddp-rendezvous status [--endpoint host:port] [--json] [--token-file PATH] [--tls-ca PATH
// [--tls-cert PATH --tls-key PATH] [--tls-server-name NAME]]`: what a daemon is doing, read
// through the rendezvous protocol's status query (status_client.h): its jobs, their rounds,
// restarts and state, and each job's nodes (address, group rank, time since their last
// heartbeat). A daemon with --token-file answers only a query that proves the same token; one
// that serves TLS, only a TLS client (with a certificate, when it asks for one).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/flag_table.h"
#include "common/result.h"
#include "rendezvous/daemon/status_client.h"
#include "rendezvous/wire/messages.h"

namespace ddprun::rdzv {

struct StatusCommandOptions {
  std::string endpoint = "127.0.0.1:29400";  // host:port, [v6]:port, or host (port 29400)
  bool json = false;                         // JSON instead of the table
  Millis timeout{5000};                      // the whole query
  // Authentication (default none): the daemon's --token-file, and TLS as an agent's
  // --rdzv_conf tls_* (the CA that signed the daemon's certificate; this client's certificate
  // and key when the daemon requires them; the name the daemon's certificate carries when it
  // is not the endpoint's host).
  std::string token_file;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
};

// The subcommand's flags (common/flag_table.h), spelled --with-dashes, no environment or file.
const FlagTable<StatusCommandOptions>& status_flag_table();

// Queries and prints to `out`; errors go to `err` as one line naming the endpoint. Returns the
// exit code (common/exit_codes.h): 0, or 1 when the daemon cannot be reached or refuses
// (authentication included), 2 for a bad --endpoint or a token or TLS file that cannot be used.
int run_status_command(const StatusCommandOptions& options, std::FILE* out, std::FILE* err);

// `ddp-rendezvous status ARGS...`: parses `args` (after "status") with status_flag_table() and
// runs the query; --help prints to `out`. Returns the exit code as above.
int status_main(const std::vector<std::string>& args, std::FILE* out, std::FILE* err);

// The query the flags describe (endpoint, token, TLS; shared with `ddp-rendezvous release`).
// Errors name the flag; kInvalidArgument for a file a flag names that cannot be used.
Result<StatusQueryOptions> status_query_options(const StatusCommandOptions& options);

// The report as a table a person reads (one line per job, then its nodes indented, then the
// hosts kept out with the time left at `now`), and as JSON for tools. Pure.
std::string render_status_table(const StatusReport& report,
                                WallTime now = std::chrono::system_clock::now());
nlohmann::json status_to_json(const StatusReport& report);

}  // namespace ddprun::rdzv
