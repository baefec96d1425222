#include "rendezvous/server/status_report.h"

#include "rendezvous/wire/codec.h"

namespace ddprun::rdzv {
namespace {

// Encoded sizes (protocol.md, StatusReport): fixed fields plus the strings' bytes.
constexpr size_t kReportFixedBytes = kFrameHeaderBytes + 1 + 1 + 4;
constexpr size_t kJobFixedBytes = 4 + 1 + 8 + 4 * 5 + 4 + 4 + 4 + 8 + 4;
constexpr size_t kStragglerFixedBytes = 4 + 4 + 4 + 8;
constexpr size_t kNodeFixedBytes = 4 + 4 + 1 + 4 + 4 + 8;
constexpr size_t kExcludedListBytes = 4;
constexpr size_t kExcludedFixedBytes = 4 * 4 + 8 + 8;

// Adds the hosts kept out that fit in what is left of the frame after `size` bytes.
void add_excluded_hosts(StatusReport& report, const std::vector<ExcludedHost>& excluded,
                        size_t size, uint32_t max_frame_bytes) {
  for (const ExcludedHost& host : excluded) {
    const size_t bytes = kExcludedFixedBytes + host.host.size() + host.reason.size() +
                         host.job_id.size() + host.node.size();
    if (size + bytes > max_frame_bytes) {
      report.truncated = true;
      return;
    }
    size += bytes;
    report.excluded_hosts.push_back(ExcludedHostStatus{
        host.host, host.reason, host.job_id, host.node, unix_ms(host.since), unix_ms(host.until)});
  }
}

JobStatus job_status(const JobRegistry::JobView& job) {
  JobStatus j;
  j.job_id = job.id;
  j.phase = job_phase(job);
  j.connections = static_cast<uint32_t>(job.connections);
  if (job.round) {
    j.round = job.round->round;
    j.restart_count = job.round->restart_count;
    j.max_restarts = job.round->options.max_restarts;
    j.min_nodes = job.round->options.min_nodes;
    j.max_nodes = job.round->options.max_nodes;
  }
  j.stragglers = job.stragglers;
  return j;
}

NodeStatus node_status(const RoundState::NodeView& node, const JobRegistry::JobView& job,
                       SteadyTime now) {
  NodeStatus n;
  n.node_id = node.node_id;
  n.phase = node.phase;
  n.group_rank = node.group_rank ? static_cast<int32_t>(*node.group_rank) : -1;
  n.local_world_size = node.local_world_size;
  auto link = job.links.find(node.node_id);
  if (link != job.links.end() && !node.detached) {
    n.address = link->second.address;
    if (link->second.last_heard) {
      n.last_heard_ms = std::max<int64_t>(
          0, std::chrono::duration_cast<Millis>(now - *link->second.last_heard).count());
    }
  }
  return n;
}

}  // namespace

JobPhase job_phase(const JobRegistry::JobView& job) {
  if (!job.round) return JobPhase::kNoRound;
  switch (job.round->phase) {
    case RoundState::Phase::kGathering:
      return JobPhase::kGathering;
    case RoundState::Phase::kRunning:
      return JobPhase::kRunning;
    case RoundState::Phase::kSucceeded:
      return JobPhase::kSucceeded;
    case RoundState::Phase::kFailed:
      return JobPhase::kFailed;
  }
  return JobPhase::kNoRound;
}

StatusReport build_status_report(const std::vector<JobRegistry::JobView>& jobs, SteadyTime now,
                                 uint32_t max_frame_bytes,
                                 const std::vector<ExcludedHost>& excluded) {
  StatusReport report;
  size_t size = kReportFixedBytes + kExcludedListBytes;
  for (const auto& job : jobs) {
    const size_t job_bytes = kJobFixedBytes + job.id.size();
    if (size + job_bytes > max_frame_bytes) {
      report.truncated = true;
      break;
    }
    size += job_bytes;
    JobStatus status = job_status(job);
    // Stragglers before nodes: they are few, and what an operator looks for.
    auto straggler = status.stragglers.stragglers.begin();
    for (; straggler != status.stragglers.stragglers.end(); ++straggler) {
      const size_t bytes = kStragglerFixedBytes + straggler->node.size();
      if (size + bytes > max_frame_bytes) {
        report.truncated = true;
        break;
      }
      size += bytes;
    }
    status.stragglers.stragglers.erase(straggler, status.stragglers.stragglers.end());
    if (job.round && !report.truncated) {
      for (const auto& node : job.round->nodes) {
        NodeStatus n = node_status(node, job, now);
        const size_t node_bytes = kNodeFixedBytes + n.node_id.size() + n.address.size();
        if (size + node_bytes > max_frame_bytes) {
          report.truncated = true;
          break;
        }
        size += node_bytes;
        status.nodes.push_back(std::move(n));
      }
    }
    report.jobs.push_back(std::move(status));
    if (report.truncated) break;
  }
  if (!report.truncated) add_excluded_hosts(report, excluded, size, max_frame_bytes);
  return report;
}

}  // namespace ddprun::rdzv
