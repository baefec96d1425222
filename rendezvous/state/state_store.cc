#include "rendezvous/state/state_store.h"

namespace ddprun::rdzv::state {

void apply_change(std::map<std::string, StoredJob>& jobs, const std::string& job_id,
                  JobChange change) {
  if (!change.job) {
    jobs.erase(job_id);
    return;
  }
  StoredJob& stored = jobs[job_id];
  stored.job = std::move(*change.job);
  for (auto& [node, record] : change.nodes) {
    if (record) {
      stored.nodes[node] = std::move(*record);
    } else {
      stored.nodes.erase(node);
    }
  }
}

}  // namespace ddprun::rdzv::state
