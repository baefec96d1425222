// Agent: its workers' progress (what it shares with the coordinator, status lines and metrics) and
// what it does about a hang (the verdict, then the report once the stacks are read). The rest
// of the lifecycle is agent.cc.
#include "agent/agent.h"

#include <csignal>

#include <spdlog/spdlog.h>

#include "agent/progress/hang_culprits.h"
#include "agent/progress/hang_report.h"

namespace ddprun::agent {

std::vector<RankProgress> Agent::progress() const {
  if (phase_ != Phase::kSupervising) return {};
  std::vector<LocalRankProgress> running;
  for (const LocalRankProgress& p : progress_watch_.progress()) {
    if (p.state != RankState::kExited) running.push_back(p);
  }
  return global(running);
}

// Not while a hang is investigated: that shares its own.
void Agent::share(const std::vector<LocalRankProgress>& progress) {
  if (hang_.active() || phase_ != Phase::kSupervising) return;
  const uint32_t threshold = options_.progress.straggler_threshold_milli;
  if (!coordinator_.shares_progress() && threshold == 0) return;
  coordinator_.share_progress(global(progress), threshold,
                              [this](const rdzv::StragglerFinding& finding) {
                                // An answer for an attempt that has ended says nothing now.
                                if (phase_ != Phase::kSupervising || hang_.active()) return;
                                stragglers_.update(finding);
                                notify([&](AgentObserver& o) { o.on_stragglers(finding); });
                              });
}

std::vector<RankProgress> Agent::rank_progress() const {
  if (!progress_watch_.watching() || !assignment_) return {};
  return global(progress_watch_.progress());
}

// This node's ranks' progress under their global ranks, named by this node.
std::vector<RankProgress> Agent::global(const std::vector<LocalRankProgress>& local) const {
  std::vector<RankProgress> ranks;
  ranks.reserve(local.size());
  const int offset = assignment_ ? assignment_->rank_offset : 0;
  for (const LocalRankProgress& p : local) {
    ranks.push_back(
        to_rank_progress(p, offset + p.local_rank,
                         options_.node_name.empty() ? options_.hostname : options_.node_name));
  }
  return ranks;
}

// Ranks stopped making progress. Which one stopped first shows in what each was doing, and
// only their stacks say that: every worker of the job is stopped with SIGABRT (Python prints
// every thread's stack, SDK programs theirs), and the culprits are named once the stacks are
// read (settle_hang). HangResponse (progress/hang_response.h) paces both steps across nodes.
void Agent::on_hang(const HangVerdict& verdict) {
  if (phase_ != Phase::kSupervising || !assignment_ || hang_.active()) return;
  group_->stop_failures_with(SIGABRT);  // a rank dying of the hang leaves the others' stacks
  spdlog::warn(
      "hang detected: no progress on this node for {} s; stopping the workers with SIGABRT to "
      "see where each rank is, then naming the one that stopped first",
      format_hang_seconds(verdict.hung.front().silent_for));
  hang_.respond(global(progress_watch_.progress()), hung_attempt(Phase::kSupervising),
                [this](const std::vector<WorkerFailure>& failures) {
                  group_->fail_running(failures, SIGABRT);
                });
}

// The workers of a hung attempt have exited: the report names the culprits among their stacks
// (and, multi-node, the other nodes').
void Agent::settle_hang(FailureReport report) {
  const int attempt = attempt_ - 1;
  hang_.settle(
      std::move(report), hung_attempt(Phase::kReporting),
      [this, attempt](int local_rank) {
        return output_.stderr_lines(local_rank, attempt, kHungStackLines);
      },
      [this](const FailureReport& named) { send_report(named); });
}

// The attempt that hung, for HangResponse: it is current while the agent stays in `phase` of
// the same round.
HangResponse::Attempt Agent::hung_attempt(Phase phase) const {
  const int round = assignment_ ? assignment_->round : -1;
  return {assignment_ ? assignment_->world_size : options_.nproc_per_node, options_.nproc_per_node,
          [this, phase, round] {
            return phase_ == phase && assignment_ && assignment_->round == round;
          }};
}

}  // namespace ddprun::agent
