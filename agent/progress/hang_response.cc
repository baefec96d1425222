#include "agent/progress/hang_response.h"

#include <utility>

#include <spdlog/spdlog.h>

#include "agent/progress/hang_report.h"

namespace ddprun::agent {

HangResponse::HangResponse(Coordinator& coordinator, DeadlineTimer& timer, const Clock& clock,
                           HangResponseOptions options)
    : coordinator_(coordinator),
      clock_(clock),
      options_(options),
      investigation_(coordinator, timer, clock, options.investigation) {}

void HangResponse::reset() {
  investigation_.cancel();
  ranks_.clear();
}

// Only a job whose ranks are spread over nodes that share progress waits for the others.
bool HangResponse::multi_node(const Attempt& attempt) const {
  return coordinator_.shares_progress() && attempt.world_size > attempt.local_world_size;
}

void HangResponse::respond(std::vector<RankProgress> ranks, Attempt attempt, Stop stop) {
  if (active()) return;
  ranks_ = std::move(ranks);
  for (RankProgress& r : ranks_) r.activity = RankActivity::kStopping;
  if (!multi_node(attempt)) return stop(hung_failures(ranks_));
  investigation_.await_verdicts(ranks_, attempt.world_size, options_.agreement_timeout,
                                [this, current = std::move(attempt.current),
                                 stop = std::move(stop)](const std::vector<RankProgress>&) {
                                  if (current()) stop(hung_failures(ranks_));
                                });
}

void HangResponse::settle(FailureReport report, Attempt attempt, const StackOf& stack_of,
                          Send send) {
  std::vector<RankProgress> local = ranks_;
  read_hung_stacks(local, stack_of);
  if (!multi_node(attempt)) return name_culprits(std::move(report), local, send);
  investigation_.await_stacks(
      local, attempt.world_size, options_.stacks_timeout,
      [this, current = std::move(attempt.current), report = std::move(report),
       send = std::move(send)](const std::vector<RankProgress>& job) {
        if (current()) name_culprits(report, job, send);
      });
}

// Every node names the same culprits from the same ranks: the report says which rank stopped
// first, not only which ones this node saw stop.
void HangResponse::name_culprits(FailureReport report, const std::vector<RankProgress>& job,
                                 const Send& send) {
  std::vector<WorkerFailure> culprits = hang_culprit_failures(report, job, clock_.wall_now());
  for (const WorkerFailure& f : culprits) spdlog::error("{}", f.error_message);
  if (!culprits.empty()) report.failures = std::move(culprits);
  ranks_.clear();
  send(std::move(report));
}

}  // namespace ddprun::agent
