#include "rendezvous/daemon/status_command.h"

#include <fmt/format.h>

#include "common/exit_codes.h"
#include "common/host_port.h"
#include "progress/stragglers.h"
#include "rendezvous/daemon/status_client.h"
#include "rendezvous/security/tls_context.h"
#include "rendezvous/security/token_file.h"
#include "rendezvous/server/excluded_hosts.h"
#include "rendezvous/wire/server_address.h"

namespace ddprun::rdzv {
namespace {

constexpr uint16_t kDefaultPort = 29400;

std::string heard(int64_t ms) {
  if (ms < 0) return "disconnected";
  return fmt::format("{:.1f}s ago", static_cast<double>(ms) / 1000.0);
}

std::string rank(int32_t r) { return r < 0 ? "-" : std::to_string(r); }

// How long until `until_ms` from `now_ms`, for people: "in 42m", "in 3h05m".
std::string time_left(int64_t until_ms, int64_t now_ms) {
  const int64_t minutes = std::max<int64_t>(0, (until_ms - now_ms + 59'999) / 60'000);
  if (minutes < 60) return fmt::format("{}m", minutes);
  return fmt::format("{}h{:02}m", minutes / 60, minutes % 60);
}

std::string render_excluded_hosts(const StatusReport& report, int64_t now_ms) {
  if (report.excluded_hosts.empty()) return {};
  std::string out = fmt::format("\n{:<24} {:<21} {:>9} {:<20} {:<24} {}\n", "EXCLUDED HOST",
                                "UNTIL (UTC)", "REMAINING", "JOB", "NODE", "REASON");
  for (const ExcludedHostStatus& h : report.excluded_hosts) {
    out += fmt::format("{:<24} {:<21} {:>9} {:<20} {:<24} {}\n", h.host,
                       format_utc(from_unix_ms(h.until_ms)), time_left(h.until_ms, now_ms),
                       h.job_id, h.node, h.reason);
  }
  return out;
}

std::string node_range(const JobStatus& j) {
  if (j.phase == JobPhase::kNoRound) return "-";
  return j.min_nodes == j.max_nodes ? std::to_string(j.max_nodes)
                                    : fmt::format("{}:{}", j.min_nodes, j.max_nodes);
}

}  // namespace

std::string render_status_table(const StatusReport& report, WallTime now) {
  if (report.jobs.empty()) return "no jobs\n" + render_excluded_hosts(report, unix_ms(now));
  std::string out = fmt::format("{:<24} {:<10} {:>6} {:>9} {:>6} {:>6} {:>11}\n", "JOB", "STATE",
                                "ROUND", "RESTARTS", "NODES", "OF", "CONNECTIONS");
  for (const JobStatus& j : report.jobs) {
    out +=
        fmt::format("{:<24} {:<10} {:>6} {:>9} {:>6} {:>6} {:>11}\n", j.job_id, to_string(j.phase),
                    j.round, fmt::format("{}/{}", j.restart_count, j.max_restarts), j.nodes.size(),
                    node_range(j), j.connections);
    const StragglerFinding& f = j.stragglers;
    if (f.threshold_milli > 0) {
      out +=
          fmt::format("  stragglers (busy over {:g}x the median of {} ranks, {}): {}\n",
                      f.threshold_milli / 1000.0, f.ranks_measured,
                      f.ranks_measured == 0 ? "none measured" : progress::format_busy(f.median_us),
                      f.stragglers.empty() ? "none" : std::to_string(f.stragglers.size()));
      for (const StragglerEntry& s : f.stragglers) {
        out += "    " + progress::format_straggler(s, f) + "\n";
      }
    }
    if (j.nodes.empty()) continue;
    out += fmt::format("  {:<36} {:<22} {:>4} {:<8} {:>7} {}\n", "NODE", "ADDRESS", "RANK", "STATE",
                       "WORKERS", "LAST HEARTBEAT");
    for (const NodeStatus& n : j.nodes) {
      out += fmt::format("  {:<36} {:<22} {:>4} {:<8} {:>7} {}\n", n.node_id,
                         n.address.empty() ? "-" : n.address, rank(n.group_rank),
                         to_string(n.phase), n.local_world_size, heard(n.last_heard_ms));
    }
  }
  out += render_excluded_hosts(report, unix_ms(now));
  if (report.truncated) {
    out += "(truncated: more jobs, nodes or excluded hosts than one report holds)\n";
  }
  return out;
}

nlohmann::json status_to_json(const StatusReport& report) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const JobStatus& j : report.jobs) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const NodeStatus& n : j.nodes) {
      nodes.push_back(
          {{"node_id", n.node_id},
           {"address", n.address.empty() ? nlohmann::json() : nlohmann::json(n.address)},
           {"group_rank", n.group_rank < 0 ? nlohmann::json() : nlohmann::json(n.group_rank)},
           {"state", to_string(n.phase)},
           {"local_world_size", n.local_world_size},
           {"last_heartbeat_age_seconds",
            n.last_heard_ms < 0 ? nlohmann::json()
                                : nlohmann::json(static_cast<double>(n.last_heard_ms) / 1000.0)}});
    }
    nlohmann::json stragglers;  // null: the job's nodes judge none
    if (j.stragglers.threshold_milli > 0) {
      nlohmann::json named = nlohmann::json::array();
      for (const StragglerEntry& s : j.stragglers.stragglers) {
        named.push_back({{"rank", s.rank},
                         {"node", s.node},
                         {"local_rank", s.local_rank},
                         {"busy_seconds", static_cast<double>(s.busy_us) / 1e6}});
      }
      stragglers = {{"threshold", j.stragglers.threshold_milli / 1000.0},
                    {"ranks_measured", j.stragglers.ranks_measured},
                    {"median_busy_seconds", static_cast<double>(j.stragglers.median_us) / 1e6},
                    {"ranks", std::move(named)}};
    }
    jobs.push_back({{"job_id", j.job_id},
                    {"state", to_string(j.phase)},
                    {"round", j.round},
                    {"restarts", j.restart_count},
                    {"max_restarts", j.max_restarts},
                    {"min_nodes", j.min_nodes},
                    {"max_nodes", j.max_nodes},
                    {"connections", j.connections},
                    {"nodes", std::move(nodes)},
                    {"stragglers", std::move(stragglers)}});
  }
  nlohmann::json excluded = nlohmann::json::array();
  for (const ExcludedHostStatus& h : report.excluded_hosts) {
    excluded.push_back({{"host", h.host},
                        {"reason", h.reason},
                        {"job_id", h.job_id},
                        {"node", h.node},
                        {"since", format_utc(from_unix_ms(h.since_ms))},
                        {"until", format_utc(from_unix_ms(h.until_ms))},
                        {"until_unix_ms", h.until_ms}});
  }
  return {{"jobs", std::move(jobs)},
          {"excluded_hosts", std::move(excluded)},
          {"truncated", report.truncated}};
}

namespace {

// The token and TLS files the flags name; errors name the flag.
Result<ClientCredentials> load_credentials(const StatusCommandOptions& options) {
  ClientCredentials credentials;
  if (!options.token_file.empty()) {
    auto token = load_token_file(options.token_file);
    // A file a flag names that cannot be used: the fix is in the command line.
    if (!token)
      return token.status().with_context("--token-file").with_kind(ErrorKind::kInvalidArgument);
    credentials.token = std::move(*token);
  }
  if (options.tls_ca.empty()) {
    if (!options.tls_cert.empty() || !options.tls_key.empty() || !options.tls_server_name.empty()) {
      return Status::invalid_argument(
          "--tls-cert, --tls-key and --tls-server-name need --tls-ca (the CA that signed the "
          "daemon's certificate)");
    }
    return credentials;
  }
  auto tls = make_client_tls(
      TlsClientFiles{options.tls_ca, options.tls_cert, options.tls_key, options.tls_server_name});
  if (!tls) {
    return tls.status()
        .with_context("--tls-ca/--tls-cert/--tls-key")
        .with_kind(ErrorKind::kInvalidArgument);
  }
  credentials.tls = std::move(*tls);
  credentials.tls_server_name = options.tls_server_name;
  return credentials;
}

// The parser's message names the text: the flag goes in front of it once.
Status is_endpoint(const std::string& text) {
  return parse_host_port(text, kDefaultPort).status().with_context("--endpoint");
}

}  // namespace

const FlagTable<StatusCommandOptions>& status_flag_table() {
  using F = StatusCommandOptions;
  static const FlagTable<StatusCommandOptions> table(
      {.underscores = false, .env_prefix = ""},
      {
          {{.name = "endpoint",
            .help = "The daemon's host:port ([v6]:port; a bare host: port 29400)",
            .default_text = "127.0.0.1:29400",
            .check = is_endpoint,
            .check_names_flag = true},
           &F::endpoint},
          {{.name = "json", .type = ConfigType::kBool, .help = "Print JSON instead of a table"},
           &F::json},
          {{.name = "token_file",
            .help = "The daemon's token (its --token-file), when it requires one"},
           &F::token_file},
          {{.name = "tls_ca",
            .help = "CA bundle that signed the daemon's TLS certificate (TLS daemons)"},
           &F::tls_ca},
          {{.name = "tls_cert",
            .help = "This client's certificate, for a daemon that requires one"},
           &F::tls_cert},
          {{.name = "tls_key", .help = "The key of --tls-cert"}, &F::tls_key},
          {{.name = "tls_server_name",
            .help = "The name the daemon's certificate carries (default: the endpoint's host)"},
           &F::tls_server_name},
      });
  return table;
}

int status_main(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  StatusCommandOptions options;
  CLI::App app{"Show a running daemon's jobs, rounds, nodes and restarts (read-only)",
               "ddp-rendezvous status"};
  auto parsed = status_flag_table().parse(app, options, args, {});
  if (!parsed) {
    (void)std::fprintf(err, "ddp-rendezvous status: error: %s\n", parsed.error_message().c_str());
    return exit_code_for(parsed.status());
  }
  if (parsed->output) {
    (void)std::fprintf(out, "%s\n", parsed->output->c_str());
    return 0;
  }
  return run_status_command(options, out, err);
}

Result<StatusQueryOptions> status_query_options(const StatusCommandOptions& options) {
  auto endpoint = parse_host_port(options.endpoint, kDefaultPort);
  if (!endpoint) return endpoint.status().with_context("--endpoint");
  auto credentials = load_credentials(options);
  if (!credentials) return credentials.status();
  StatusQueryOptions query;
  query.host = endpoint->host;
  query.port = endpoint->port;
  query.timeout = options.timeout;
  query.credentials = std::move(*credentials);
  return query;
}

int run_status_command(const StatusCommandOptions& options, std::FILE* out, std::FILE* err) {
  auto query = status_query_options(options);
  if (!query) {
    (void)std::fprintf(err, "ddp-rendezvous status: %s\n", query.error_message().c_str());
    return exit_code_for(query.status());
  }
  auto answer = query_status(*query);
  if (!answer) {
    (void)std::fprintf(err, "ddp-rendezvous status: %s\n", answer.error_message().c_str());
    return exit_code_for(answer.status());
  }
  const std::string asked = to_string(ServerAddress{query->host, query->port});
  std::string text;
  if (options.json) {
    nlohmann::json json = status_to_json(answer->report);
    json["answered_by"] = answer->answered_by;
    text = json.dump(2) + "\n";
  } else {
    text = render_status_table(answer->report, std::chrono::system_clock::now());
    if (answer->answered_by != asked) {
      // The replica asked does not lead; the table is the leader's.
      text =
          fmt::format("(from the leader at {}; {} does not lead)\n", answer->answered_by, asked) +
          text;
    }
  }
  (void)std::fputs(text.c_str(), out);
  return 0;
}

}  // namespace ddprun::rdzv
