#include "rendezvous/server/server_metrics.h"

#include <array>

#include "metrics/process_metrics.h"
#include "rendezvous/server/status_report.h"

namespace ddprun::rdzv {
namespace {

using metrics::FamilyData;
using metrics::Labels;
using metrics::MetricType;

constexpr std::array<const char*, 11> kClientLabels = {
    "hello", "join",     "resume",         "heartbeat",    "report_failure", "report_success",
    "leave", "progress", "progress_query", "status_query", "auth_proof"};
constexpr std::array<const char*, 11> kServerLabels = {
    "hello_ack",     "reply", "round_assigned", "restart_requested", "job_failed", "job_succeeded",
    "heartbeat_ack", "error", "status_report",  "auth_challenge",    "redirect"};
static_assert(kClientLabels.size() == std::variant_size_v<ClientMessage>);
static_assert(kServerLabels.size() == std::variant_size_v<ServerMessage>);

constexpr JobPhase kJobPhases[] = {JobPhase::kNoRound, JobPhase::kGathering, JobPhase::kRunning,
                                   JobPhase::kSucceeded, JobPhase::kFailed};
constexpr NodePhase kNodePhases[] = {NodePhase::kPending, NodePhase::kStandby, NodePhase::kMember,
                                     NodePhase::kIdle};

FamilyData& family(std::vector<FamilyData>& out, const char* name, const char* help,
                   MetricType type) {
  out.push_back({name, help, type, {}});
  return out.back();
}

void collect_connections(const ServerStats& s, std::vector<FamilyData>& out) {
  const ServerCounters& c = s.totals;
  family(out, "ddprun_rendezvous_connections", "Client connections open now.", MetricType::kGauge)
      .add({}, static_cast<double>(s.connections));
  family(out, "ddprun_rendezvous_connections_accepted_total", "Client connections accepted.",
         MetricType::kCounter)
      .add({}, static_cast<double>(c.accepted));
  FamilyData& rejected =
      family(out, "ddprun_rendezvous_connections_rejected_total",
             "Connections and requests refused: at the handshake (bad magic, unsupported "
             "version, no Hello first), by authentication (token or TLS), or by a limit "
             "(reason: the limit).",
             MetricType::kCounter);
  rejected.add({{"reason", "handshake"}}, static_cast<double>(c.rejected_handshake));
  rejected.add({{"reason", "auth"}}, static_cast<double>(c.rejected_auth));
  for (size_t i = 0; i < kLimitCount; ++i) {
    rejected.add({{"reason", to_string(static_cast<Limit>(i))}},
                 static_cast<double>(c.rejected_limit[i]));
  }
  family(out, "ddprun_rendezvous_deadline_drops_total",
         "Connections closed because a read deadline passed (handshake, idle or heartbeat "
         "timeout).",
         MetricType::kCounter)
      .add({}, static_cast<double>(c.deadline_drops));
  family(out, "ddprun_rendezvous_accepts_out_of_descriptors_total",
         "Accepts tried while the process had no file descriptor left (each sheds one waiting "
         "connection, or finds none, then rests).",
         MetricType::kCounter)
      .add({}, static_cast<double>(c.accepts_out_of_descriptors));
  FamilyData& messages =
      family(out, "ddprun_rendezvous_messages_total",
             "Protocol frames received (in) and sent (out), by type.", MetricType::kCounter);
  for (size_t i = 0; i < c.messages_in.size(); ++i) {
    messages.add({{"direction", "in"}, {"type", kClientLabels[i]}},
                 static_cast<double>(c.messages_in[i]));
  }
  for (size_t i = 0; i < c.messages_out.size(); ++i) {
    messages.add({{"direction", "out"}, {"type", kServerLabels[i]}},
                 static_cast<double>(c.messages_out[i]));
  }
  FamilyData& bytes = family(out, "ddprun_rendezvous_bytes_total",
                             "Protocol bytes received (in) and sent (out), frame headers included.",
                             MetricType::kCounter);
  bytes.add({{"direction", "in"}}, static_cast<double>(c.bytes_in));
  bytes.add({{"direction", "out"}}, static_cast<double>(c.bytes_out));
}

void collect_excluded_hosts(const ServerStats& s, std::vector<FamilyData>& out) {
  family(out, "ddprun_rendezvous_excluded_hosts",
         "Hosts kept out of every job now: a node of theirs left unfit to train, and their "
         "cool-down (--exclude-cooldown) has not ended nor been released.",
         MetricType::kGauge)
      .add({}, static_cast<double>(s.excluded_hosts));
  family(out, "ddprun_rendezvous_host_exclusions_total",
         "Nodes that left a job unfit to train and had their host kept out (a cool-down begun "
         "or extended).",
         MetricType::kCounter)
      .add({}, static_cast<double>(s.totals.hosts_excluded));
  family(out, "ddprun_rendezvous_joins_refused_excluded_total",
         "Joins refused because the node's host was kept out.", MetricType::kCounter)
      .add({}, static_cast<double>(s.totals.joins_refused_excluded));
}

void collect_round_durations(const RoundDurations& d, std::vector<FamilyData>& out) {
  FamilyData& h = family(out, "ddprun_rendezvous_round_duration_seconds",
                         "Time from a round opening to its ranks being assigned, all jobs.",
                         MetricType::kHistogram);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= RoundDurations::kBounds.size(); ++i) {
    cumulative += d.counts[i];
    const std::string le = i < RoundDurations::kBounds.size()
                               ? metrics::format_value(RoundDurations::kBounds[i])
                               : "+Inf";
    h.samples.push_back({h.name + "_bucket", {{"le", le}}, static_cast<double>(cumulative)});
  }
  h.samples.push_back({h.name + "_sum", {}, d.sum_seconds});
  h.samples.push_back({h.name + "_count", {}, static_cast<double>(d.count)});
}

void collect_jobs(const std::vector<JobRegistry::JobView>& jobs, std::vector<FamilyData>& out) {
  // The families below are held by reference while the next ones are added: no reallocation
  // may move them (it did once three families were added before these, issue 36).
  constexpr size_t kJobFamilies = 8;
  out.reserve(out.size() + kJobFamilies);
  family(out, "ddprun_rendezvous_jobs", "Jobs the server knows now.", MetricType::kGauge)
      .add({}, static_cast<double>(jobs.size()));
  FamilyData& state = family(out, "ddprun_rendezvous_job_state",
                             "1 for the job's state (no_round, gathering, running, succeeded, "
                             "failed), 0 for the others.",
                             MetricType::kGauge);
  FamilyData& nodes = family(out, "ddprun_rendezvous_job_nodes",
                             "Nodes of the job by state (pending: in the open round; standby: "
                             "waiting for the next; member: in the running round; idle).",
                             MetricType::kGauge);
  FamilyData& disconnected =
      family(out, "ddprun_rendezvous_job_nodes_disconnected",
             "Nodes whose connection is gone, kept for heartbeat_timeout.", MetricType::kGauge);
  FamilyData& round = family(out, "ddprun_rendezvous_job_round",
                             "The job's current round number (rounds so far).", MetricType::kGauge);
  FamilyData& restarts = family(out, "ddprun_rendezvous_job_restarts", "Restarts the job has used.",
                                MetricType::kGauge);
  FamilyData& max_restarts = family(out, "ddprun_rendezvous_job_max_restarts",
                                    "The job's restart budget.", MetricType::kGauge);
  FamilyData& connections = family(out, "ddprun_rendezvous_job_connections",
                                   "Connections of the job open now.", MetricType::kGauge);
  for (const auto& job : jobs) {
    const Labels id = {{"job_id", job.id}};
    const JobPhase phase = job_phase(job);
    for (JobPhase p : kJobPhases) {
      state.add({{"job_id", job.id}, {"state", to_string(p)}}, p == phase ? 1 : 0);
    }
    std::array<double, 5> by_phase{};  // indexed by NodePhase
    double gone = 0;
    if (job.round) {
      for (const auto& n : job.round->nodes) {
        ++by_phase[static_cast<size_t>(n.phase)];
        if (n.detached) ++gone;
      }
    }
    for (NodePhase p : kNodePhases) {
      nodes.add({{"job_id", job.id}, {"state", to_string(p)}}, by_phase[static_cast<size_t>(p)]);
    }
    disconnected.add(id, gone);
    round.add(id, job.round ? static_cast<double>(job.round->round) : 0);
    restarts.add(id, job.round ? job.round->restart_count : 0);
    max_restarts.add(id, job.round ? job.round->options.max_restarts : 0);
    connections.add(id, static_cast<double>(job.connections));
  }
}

}  // namespace

const char* client_message_label(size_t index) {
  return index < kClientLabels.size() ? kClientLabels[index] : "unknown";
}
const char* server_message_label(size_t index) {
  return index < kServerLabels.size() ? kServerLabels[index] : "unknown";
}

void add_server_metrics(metrics::Registry& registry, const RendezvousServer& server) {
  registry.add_collector([&server](std::vector<FamilyData>& out) {
    const ServerStats stats = server.stats();
    collect_connections(stats, out);
    collect_round_durations(stats.totals.round_durations, out);
    collect_excluded_hosts(stats, out);
    collect_jobs(server.jobs(), out);
  });
}

}  // namespace ddprun::rdzv

namespace ddprun::rdzv {

ServerMetricsEndpoint::ServerMetricsEndpoint(boost::asio::io_context& io,
                                             const RendezvousServer& server,
                                             metrics::HttpEndpointOptions options)
    : endpoint_(
          io, std::move(options), [this] { return registry_.render(); },
          [&server]() -> Status {
            if (server.stopping()) return Status::unavailable("the server is shutting down");
            return {};
          }) {
  add_server_metrics(registry_, server);
  metrics::add_process_collector(registry_);
}

}  // namespace ddprun::rdzv
