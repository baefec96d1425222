#include "rendezvous/wire/job_options.h"

#include <fmt/format.h>

namespace ddprun::rdzv {

Status validate(const JobOptions& o) {
  if (o.min_nodes == 0 || o.max_nodes < o.min_nodes) {
    return Status::invalid_argument(
        fmt::format("invalid nnodes {}:{} (need 0 < MIN <= MAX)", o.min_nodes, o.max_nodes));
  }
  if (o.join_timeout <= Millis(0) || o.heartbeat_timeout <= Millis(0) ||
      o.exit_barrier_timeout <= Millis(0)) {
    return Status::invalid_argument("join, heartbeat and exit-barrier timeouts must be positive");
  }
  if (o.last_call_timeout < Millis(0)) {
    return Status::invalid_argument("last_call_timeout must not be negative");
  }
  return Status();
}

bool same_terms(const JobOptions& agreed, const JobOptions& asked) {
  return agreed.min_nodes == asked.min_nodes && agreed.max_nodes == asked.max_nodes &&
         agreed.max_restarts == asked.max_restarts && agreed.agent_store == asked.agent_store;
}

}  // namespace ddprun::rdzv
