// RoundState: what members tell of themselves between rounds (leaving, losing and regaining
// their connection, being dropped) and how their workers ended (failure and success
// reports). The rounds themselves (joins, closing, ranks, deadlines) are round_state.cc.
#include "rendezvous/server/round_state.h"

#include <fmt/format.h>

#include "rendezvous/wire/node_name.h"

namespace ddprun::rdzv {

std::optional<std::pair<uint32_t, std::string>> RoundState::member_placement(
    const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.state != NodeState::kMember) return std::nullopt;
  return std::make_pair(it->second.last_group_rank.value_or(0), it->second.info.master_addr);
}

Decisions RoundState::leave(const std::string& node_id, SteadyTime now) {
  Decisions out;
  drop(node_id, now, fmt::format("node '{}' left the job", node_display_name(node_id)), out);
  return out;
}

Decisions RoundState::detach(const std::string& node_id, SteadyTime now) {
  Decisions out;
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.grace_deadline) return out;
  NodeRecord& rec = it->second;
  rec.grace_deadline = now + options_.heartbeat_timeout;
  graces_.emplace(*rec.grace_deadline, node_id);
  if (phase_ != Phase::kRunning || rec.state != NodeState::kMember || rec.succeeded) return out;
  // At the exit barrier (some members finished) nobody can be stuck in a collective with it
  // for long: its grace decides. A blip then costs nothing; a restart now would make the
  // finished nodes run their workers again for a node that is most likely finishing too.
  if (succeeded_count_ > 0) return out;
  // Its workers' peers are stuck in collectives with it: restart them now, not after the grace
  // (a dead agent takes its workers with it; waiting would only stall the survivors).
  open_round(now, RestartReason::kMemberLost,
             fmt::format("node '{}' lost: its connection to the rendezvous server dropped",
                         node_display_name(node_id)),
             out);
  // It cannot re-join before it reconnects: the round must not wait for it as a survivor.
  if (rec.expected) {
    set_node(rec, rec.state, /*expected=*/false, rec.succeeded);
    --expected_total_;
  }
  maybe_close(now, out);
  return out;
}

bool RoundState::reattach(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return false;
  if (it->second.grace_deadline) {
    graces_.erase({*it->second.grace_deadline, node_id});
    it->second.grace_deadline.reset();
  }
  return true;
}

void RoundState::drop(const std::string& node_id, SteadyTime now, const std::string& why,
                      Decisions& out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  NodeRecord rec = std::move(it->second);
  count_node(rec, -1);
  nodes_.erase(it);
  changed_.insert(node_id);
  if (rec.grace_deadline) graces_.erase({*rec.grace_deadline, node_id});
  if (finished()) return;
  switch (rec.state) {
    case NodeState::kMember:
      // One that finished its work: leaving is not a loss.
      if (rec.succeeded) return maybe_succeed(out);
      return open_round(now, RestartReason::kMemberLost, why, out);
    case NodeState::kPending:
      return maybe_close(now, out);
    case NodeState::kIdle:
      if (rec.expected) {
        --expected_total_;
        maybe_close(now, out);
      }
      return;
    case NodeState::kStandby:
      return;
  }
}

Result<Decisions> RoundState::report_failure(const std::string& node_id, uint64_t round,
                                             const std::string& failure_report, int32_t exit_code,
                                             SteadyTime now, const std::string& not_restartable) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) {
    return Status::not_found(
        fmt::format("node '{}' is not part of job '{}'", node_display_name(node_id), job_id_));
  }
  Decisions out;
  // A second report of the same round arrives after the first already ended it: ignored, the
  // first failure is the root cause every node reports.
  if (phase_ != Phase::kRunning || round != round_ || it->second.state != NodeState::kMember) {
    return out;
  }
  if (!not_restartable.empty()) {
    // The node knows why another attempt cannot help (a rank asked to stop, or attempts kept
    // failing at the same step): no restart is consumed, the job ends with its reason.
    fail_job(JobFailureReason::kNotRestartable,
             fmt::format("workers of node '{}' failed in round {} of job '{}' and must not be "
                         "restarted: {}",
                         node_display_name(node_id), round_, job_id_, not_restartable),
             failure_report, exit_code, out);
  } else if (restart_count_ < options_.max_restarts) {
    ++restart_count_;
    open_round(
        now, RestartReason::kWorkerFailure,
        fmt::format("workers of node '{}' failed in round {}", node_display_name(node_id), round_),
        out, failure_report);
  } else {
    fail_job(JobFailureReason::kRestartsExhausted,
             fmt::format("workers of node '{}' failed in round {} of job '{}' and no restarts "
                         "are left (max_restarts={})",
                         node_id, round_, job_id_, options_.max_restarts),
             failure_report, exit_code, out);
  }
  return out;
}

Result<Decisions> RoundState::report_success(const std::string& node_id, uint64_t round,
                                             SteadyTime now) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) {
    return Status::not_found(
        fmt::format("node '{}' is not part of job '{}'", node_display_name(node_id), job_id_));
  }
  Decisions out;
  NodeRecord& rec = it->second;
  if (phase_ != Phase::kRunning || round != round_ || rec.state != NodeState::kMember ||
      rec.succeeded) {
    return out;
  }
  set_node(rec, rec.state, rec.expected, /*succeeded=*/true);
  if (succeeded_count_ == 1) barrier_deadline_ = now + options_.exit_barrier_timeout;
  maybe_succeed(out);
  return out;
}

void RoundState::maybe_succeed(Decisions& out) {
  if (phase_ != Phase::kRunning || succeeded_count_ < member_count_) return;
  phase_ = Phase::kSucceeded;
  push_to_all(JobSucceeded{round_}, out);
}

}  // namespace ddprun::rdzv
