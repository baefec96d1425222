// JobRegistry and its durable state: what a decision saves (each job's record and its changed
// nodes' records, job_snapshot.h) and how a server takes the jobs back from its store at
// start or takeover. The rest of the registry is job_registry.cc.
#include "rendezvous/server/job_registry.h"

#include <spdlog/spdlog.h>

#include "rendezvous/server/job_snapshot.h"

namespace ddprun::rdzv {

// Read when the journal saves, not when the decision is made: one save covers every decision
// made while the previous one was in flight. A job erased meanwhile is forgotten.
DecisionJournal::StateSource JobRegistry::state_of(const std::string& job_id) {
  return [this, job_id]() -> state::JobChange {
    auto it = jobs_.find(job_id);
    return it == jobs_.end() ? state::JobChange{} : changes(*it->second);
  };
}

state::JobChange JobRegistry::changes(Job& job) {
  state::JobChange change;
  if (!job.round) return change;  // no round: nothing to keep
  change.job = encode_job_record(*job.round);
  for (std::string& id : job.round->take_changed_nodes()) {
    if (!job.round->knows(id)) {
      change.nodes.emplace(std::move(id), std::nullopt);
      continue;
    }
    auto link = job.links.find(id);
    const bool linked = link != job.links.end();
    std::string record = encode_node_record(*job.round, id, linked ? link->second.token : 0,
                                            linked ? link->second.join_request : 0);
    change.nodes.emplace(std::move(id), std::move(record));
  }
  return change;
}

Status JobRegistry::restore(state::StateStore& store, DecisionJournal::FailureHandler on_failure) {
  auto stored = store.load_all();
  if (!stored) return stored.status().with_context("loading the state from " + store.describe());
  if (Status hosts = restore_excluded_hosts(store); !hosts) return hosts;
  const SteadyTime now = clock_.steady_now();
  std::vector<std::pair<std::string, JobSnapshot>> jobs;
  for (auto& [id, bytes] : *stored) {
    auto snap = decode_job_snapshot(id, bytes, now);
    if (!snap) return snap.status().with_context(store.describe());
    jobs.emplace_back(id, std::move(*snap));
  }
  for (auto& [id, snap] : jobs) {
    auto& job = jobs_[id];
    job = std::make_unique<Job>(executor_, id);
    if (snap.round) job->round.emplace(std::move(*snap.round));
    if (job->round && snap.whole_record) {
      // Its nodes are inside the old job record: the first save gives each a record of its own.
      for (const auto& node : job->round->snapshot().nodes) job->round->mark_changed(node.node_id);
    }
    for (const auto& [node, token] : snap.tokens) {
      Job::Link& link = job->links[node];
      link.token = token;
      // What the old server sent is unknown: the node's first push after the restart says
      // where the job is, in case it missed a decision recorded but not yet sent.
      link.delivery = DeliveryLog::restored();
      if (auto join = snap.join_requests.find(node); join != snap.join_requests.end()) {
        // A node whose answer the old server never sent joins again with this request id.
        link.join_request = join->second;
        Reply answer;
        answer.request_id = join->second;
        answer.integer = static_cast<int64_t>(token);
        link.delivery.remember(answer);
      }
    }
    if (job->round) {
      std::vector<std::string> nodes;
      nodes.reserve(snap.tokens.size());
      for (const auto& [node, token] : snap.tokens) nodes.push_back(node);
      for (auto& [node, push] : job->round->catch_up_all(nodes)) {
        job->links[node].delivery.record(std::move(push));
      }
    }
    schedule(*job);
    spdlog::info("restored job '{}' from {}: round {}, {} node(s), {} restart(s) used", id,
                 store.describe(), job->round ? job->round->round() : 0, snap.tokens.size(),
                 job->round ? job->round->restart_count() : 0);
  }
  journal_.attach(&store, std::move(on_failure));
  return Status();
}

}  // namespace ddprun::rdzv
