// JobRegistry and the job's progress: each node's Progress (kept for queries, answered with
// the job's stragglers, progress/stragglers.h) and ProgressQuery (every node's latest
// progress). The rest of the registry is job_registry.cc.
#include "rendezvous/server/job_registry.h"

#include "progress/stragglers.h"
#include "rendezvous/wire/node_name.h"
#include "rendezvous/wire/payload_codec.h"

namespace ddprun::rdzv {

void JobRegistry::progress(Job& job, Peer& peer, const ProgressMsg& msg,
                           const std::string& node_id) {
  Reply reply;
  reply.request_id = msg.request_id;
  // A report for another round is stale: not kept, but still answered (the sender waits).
  auto link = job.links.find(node_id);
  if (!node_id.empty() && job.round && msg.round == job.round->round() && link != job.links.end()) {
    link->second.progress = msg.ranks;
    link->second.progress_round = msg.round;
    link->second.progress_at = clock_.steady_now();
  }
  job.straggler_threshold_milli = msg.straggler_threshold_milli;
  if (msg.straggler_threshold_milli > 0) {
    const uint64_t round = job.round ? job.round->round() : 0;
    if (job.stragglers_round != round) job.stragglers = {};
    job.stragglers_round = round;
    reply.payload = encode_stragglers(progress::publish_stragglers(
        job.stragglers, stragglers_of(job, msg.straggler_threshold_milli)));
  }
  peer.send(reply);
}

StragglerFinding JobRegistry::stragglers_of(const Job& job, uint32_t threshold_milli) {
  // Named as every line names a node (node_name.h).
  std::vector<std::string> hosts;
  std::vector<std::span<const RankProgressEntry>> ranks;
  if (job.round) {
    for (const auto& [id, link] : job.links) {
      if (link.progress_round != job.round->round() || link.progress.empty()) continue;
      auto placement = job.round->member_placement(id);
      if (!placement) continue;
      hosts.push_back(node_display_name(id));
      ranks.emplace_back(link.progress);
    }
  }
  std::vector<progress::NodeRanks> nodes;
  nodes.reserve(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) nodes.push_back({hosts[i], ranks[i]});
  return progress::find_stragglers(nodes, threshold_milli);
}

void JobRegistry::query_progress(Job& job, Peer& peer, const ProgressQueryMsg& msg) {
  std::vector<NodeProgress> nodes;
  const SteadyTime now = clock_.steady_now();
  for (const auto& [id, link] : job.links) {
    if (!job.round || link.progress_round != job.round->round() || link.progress.empty()) continue;
    auto placement = job.round->member_placement(id);
    if (!placement) continue;
    NodeProgress node{id, placement->second, placement->first, link.progress};
    const auto since =
        static_cast<uint64_t>(std::chrono::duration_cast<Millis>(now - link.progress_at).count());
    for (auto& rank : node.ranks) rank.heartbeat_age_ms += since;
    nodes.push_back(std::move(node));
  }
  Reply reply;
  reply.request_id = msg.request_id;
  reply.payload = encode_job_progress(nodes);
  peer.send(reply);
}

}  // namespace ddprun::rdzv
