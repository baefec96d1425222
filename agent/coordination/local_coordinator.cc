#include "agent/coordination/local_coordinator.h"

#include <boost/asio/post.hpp>

#include "agent/progress/progress_entry.h"
#include "progress/stragglers.h"

namespace ddprun::agent {

void LocalCoordinator::join(const JoinOffer& offer,
                            std::function<void(Result<RoundAssignment>)> done) {
  RoundAssignment a;
  const int nodes = static_cast<int>(job_.max_nodes);
  a.round = round_++;
  a.group_rank = group_rank_;
  a.group_world_size = nodes;
  a.rank_offset = group_rank_ * offer.local_world_size;
  a.world_size = nodes * offer.local_world_size;
  a.master_addr = offer.master_addr;
  a.master_port = offer.master_port;
  a.restart_count = restarts_;
  a.max_restarts = static_cast<int>(job_.max_restarts);
  a.use_agent_store = job_.agent_store;
  boost::asio::post(io_, [this, a, done = std::move(done)] {
    if (!closed_) done(a);
  });
}

void LocalCoordinator::share_progress(const std::vector<RankProgress>& ranks,
                                      uint32_t straggler_threshold_milli,
                                      StragglerHandler on_stragglers) {
  if (straggler_threshold_milli == 0 || !on_stragglers || ranks.empty()) return;
  std::vector<rdzv::RankProgressEntry> entries;
  entries.reserve(ranks.size());
  for (const RankProgress& r : ranks) entries.push_back(to_progress_entry(r));
  const progress::NodeRanks node{ranks.front().node, entries};
  boost::asio::post(
      io_, [this, finding = progress::find_stragglers({&node, 1}, straggler_threshold_milli),
            on_stragglers = std::move(on_stragglers)] {
        if (!closed_) on_stragglers(finding);
      });
}

void LocalCoordinator::report_failure(const FailureReport& report,
                                      std::function<void(FailureDecision)> done) {
  FailureDecision decision;
  // A failure that must not be restarted ends the job whatever budget is left.
  decision.restart =
      report.not_restartable.empty() && restarts_ < static_cast<int>(job_.max_restarts);
  if (decision.restart) ++restarts_;
  decision.report = report;
  decision.exit_code = report.exit_code();
  boost::asio::post(io_, [this, decision = std::move(decision), done = std::move(done)] {
    if (!closed_) done(decision);
  });
}

void LocalCoordinator::report_success(std::function<void(Status)> done) {
  boost::asio::post(io_, [this, done = std::move(done)] {
    if (!closed_) done(Status());
  });
}

}  // namespace ddprun::agent
