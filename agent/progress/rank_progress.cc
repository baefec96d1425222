#include "agent/progress/rank_progress.h"

#include <utility>

namespace ddprun::agent {

RankProgress to_rank_progress(const LocalRankProgress& progress, int rank, std::string node) {
  RankProgress out;
  out.rank = rank;
  out.node = std::move(node);
  out.local_rank = progress.local_rank;
  out.last_step = progress.last_step;
  out.heartbeat_age = progress.silent_for;
  out.heartbeat_seen = progress.last_heartbeat.has_value();
  out.busy = progress.busy;
  return out;
}

}  // namespace ddprun::agent
