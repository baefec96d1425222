#include "rendezvous/server/round_state.h"

#include <algorithm>

#include <fmt/format.h>

#include "rendezvous/wire/node_name.h"

namespace ddprun::rdzv {
namespace {
int64_t ms(Millis d) { return d.count(); }
}  // namespace

RoundState::RoundState(std::string job_id, JobOptions options, SteadyTime now)
    : job_id_(std::move(job_id)), options_(options), round_opened_at_(now) {}

Status RoundState::check_options(const NodeInfo& node, const JobOptions& asked) const {
  if (!same_terms(options_, asked)) {
    return Status::refused(fmt::format(
        "node '{}' asked job '{}' for nnodes={}:{} max_restarts={} agent_store={}, but the job "
        "runs with nnodes={}:{} max_restarts={} agent_store={}; start every node with the same "
        "--nnodes, --max_restarts and TORCH_DISABLE_SHARE_RDZV_TCP_STORE",
        node.node_id, job_id_, asked.min_nodes, asked.max_nodes, asked.max_restarts,
        asked.agent_store, options_.min_nodes, options_.max_nodes, options_.max_restarts,
        options_.agent_store));
  }
  if (node.local_world_size == 0) {
    return Status::invalid_argument(fmt::format("node '{}' joined with a local world size of 0",
                                                node_display_name(node.node_id)));
  }
  return Status();
}

Result<Decisions> RoundState::join(const NodeInfo& node, const JobOptions& asked, SteadyTime now) {
  if (finished()) {
    return Status::refused(fmt::format("job '{}' has already {}; use a new --rdzv_id", job_id_,
                                       phase_ == Phase::kSucceeded ? "succeeded" : "failed"));
  }
  if (Status s = check_options(node, asked); !s) return s;
  Decisions out;
  auto [it, inserted] = nodes_.try_emplace(node.node_id);
  NodeRecord& rec = it->second;
  if (!inserted && (rec.state == NodeState::kPending || rec.state == NodeState::kStandby)) {
    if (!(rec.info == node)) changed_.insert(node.node_id);
    rec.info = node;  // a repeated join while waiting: idempotent
    return out;
  }
  changed_.insert(node.node_id);
  rec.info = node;
  rec.join_seq = next_join_seq_++;
  if (inserted) rec.state = NodeState::kIdle;  // idle and not expected: in no count yet
  if (phase_ == Phase::kGathering) {
    join_gathering(rec, now, out);
  } else {
    join_running(rec, now, out);
  }
  return out;
}

void RoundState::set_node(NodeRecord& rec, NodeState state, bool expected, bool succeeded) {
  if (rec.state != state || rec.expected != expected || rec.succeeded != succeeded) {
    changed_.insert(rec.info.node_id);
  }
  count_node(rec, -1);
  rec.state = state;
  rec.expected = expected;
  rec.succeeded = succeeded;
  count_node(rec, +1);
}

void RoundState::count_node(const NodeRecord& rec, int sign) {
  const auto add = [sign](size_t& counter, bool counts) {
    if (counts) counter = sign > 0 ? counter + 1 : counter - 1;
  };
  add(pending_count_, rec.state == NodeState::kPending);
  add(standby_count_, rec.state == NodeState::kStandby);
  add(member_count_, rec.state == NodeState::kMember);
  add(succeeded_count_, rec.state == NodeState::kMember && rec.succeeded);
  add(expected_missing_, rec.expected && rec.state == NodeState::kIdle);
}

void RoundState::join_gathering(NodeRecord& rec, SteadyTime now, Decisions& out) {
  set_node(rec, NodeState::kPending, /*expected=*/false, rec.succeeded);
  maybe_close(now, out);
}

void RoundState::join_running(NodeRecord& rec, SteadyTime now, Decisions& out) {
  if (rec.state == NodeState::kMember) {
    // A member asking to join again has restarted: the round it was in is over for everyone.
    set_node(rec, NodeState::kStandby, rec.expected, /*succeeded=*/false);
    open_round(
        now, RestartReason::kMemberLost,
        fmt::format("node '{}' re-joined the rendezvous", node_display_name(rec.info.node_id)),
        out);
    return;
  }
  set_node(rec, NodeState::kStandby, rec.expected, rec.succeeded);
  // Scale up only when there is room and the job is not already finishing.
  if (member_count_ < options_.max_nodes && succeeded_count_ == 0) {
    open_round(now, RestartReason::kScaleUp,
               fmt::format("node '{}' is waiting to join", node_display_name(rec.info.node_id)),
               out);
  }
}

void RoundState::open_round(SteadyTime now, RestartReason reason, const std::string& why,
                            Decisions& out, const std::string& failure_report) {
  const RestartRequested restart{round_, reason, why, failure_report};
  ++round_;
  phase_ = Phase::kGathering;
  round_opened_at_ = now;
  min_reached_at_.reset();
  barrier_deadline_.reset();
  expected_total_ = 0;
  for (auto& [id, rec] : nodes_) {
    if (rec.state == NodeState::kMember) {
      out.push_back({id, restart});
      set_node(rec, NodeState::kIdle, /*expected=*/true, /*succeeded=*/false);
      ++expected_total_;
    }
  }
  maybe_close(now, out);
}

// Waiting nodes (spares) enter a gathering round in arrival order, leaving room for every
// survivor still expected back. Run whenever that room may have grown: a round opened, a
// survivor was lost or dropped (issue 22: a spare waited forever beside a lost member's place).
void RoundState::admit_standby() {
  // Called at every join: without spares, or without room, nothing to look at (a scan of every
  // node here made a round of N joins quadratic: 3.7 s of CPU at 16,384 nodes).
  if (standby_count_ == 0 || pending_count_ + expected_missing_ >= options_.max_nodes) return;
  std::vector<NodeRecord*> standby;
  standby.reserve(standby_count_);
  for (auto& [id, rec] : nodes_) {
    if (rec.state == NodeState::kStandby) standby.push_back(&rec);
  }
  std::sort(standby.begin(), standby.end(),
            [](auto* a, auto* b) { return a->join_seq < b->join_seq; });
  for (NodeRecord* rec : standby) {
    if (pending_count_ + expected_missing_ >= options_.max_nodes) break;
    set_node(*rec, NodeState::kPending, rec->expected, rec->succeeded);
  }
}

void RoundState::maybe_close(SteadyTime now, Decisions& out) {
  if (phase_ != Phase::kGathering) return;
  admit_standby();
  if (pending_count_ >= options_.max_nodes) return close_round(out);
  if (pending_count_ >= options_.min_nodes) {
    if (!min_reached_at_) min_reached_at_ = now;
    const bool survivors_back = (expected_total_ > 0 && expected_missing_ == 0) ||
                                (moved_survivors_ > 0 && pending_count_ >= moved_survivors_);
    if (survivors_back || now >= *min_reached_at_ + options_.last_call_timeout) {
      close_round(out);
    }
    return;
  }
  min_reached_at_.reset();
  if (now >= round_opened_at_ + options_.join_timeout) {
    fail_job(
        JobFailureReason::kTooFewNodes,
        fmt::format("rendezvous of job '{}' timed out: {} of at least {} nodes joined "
                    "round {} within join_timeout ({} ms); start more nodes or raise "
                    "join_timeout",
                    job_id_, pending_count_, options_.min_nodes, round_, ms(options_.join_timeout)),
        "", kRendezvousFailureExitCode, out);
  }
}

std::vector<std::pair<uint32_t, RoundState::NodeRecord*>> RoundState::assign_ranks() {
  std::vector<NodeRecord*> joined;
  joined.reserve(pending_count_);
  for (auto& [id, rec] : nodes_) {
    if (rec.state == NodeState::kPending) joined.push_back(&rec);
  }
  std::sort(joined.begin(), joined.end(),
            [](auto* a, auto* b) { return a->join_seq < b->join_seq; });
  const auto n = static_cast<uint32_t>(joined.size());
  std::vector<NodeRecord*> by_rank(n, nullptr);
  std::vector<bool> placed(n, false);
  auto place_by = [&](auto wanted) {
    for (uint32_t i = 0; i < n; ++i) {
      std::optional<uint32_t> r = wanted(*joined[i]);
      if (!placed[i] && r && *r < n && !by_rank[*r]) {
        by_rank[*r] = joined[i];
        placed[i] = true;
      }
    }
  };
  place_by([](const NodeRecord& r) { return r.info.node_rank_hint; });
  place_by([](const NodeRecord& r) { return r.last_group_rank; });
  uint32_t next_free = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (placed[i]) continue;
    while (by_rank[next_free]) ++next_free;
    by_rank[next_free] = joined[i];
  }
  std::vector<std::pair<uint32_t, NodeRecord*>> ranks;
  ranks.reserve(n);
  for (uint32_t r = 0; r < n; ++r) ranks.emplace_back(r, by_rank[r]);
  return ranks;
}

void RoundState::close_round(Decisions& out) {
  auto ranks = assign_ranks();
  uint32_t world_size = 0;
  for (auto& [rank, rec] : ranks) world_size += rec->info.local_world_size;
  const NodeInfo& master = ranks.front().second->info;
  uint32_t offset = 0;
  out.reserve(out.size() + ranks.size());
  for (auto& [rank, rec] : ranks) {
    set_node(*rec, NodeState::kMember, rec->expected, /*succeeded=*/false);
    rec->last_group_rank = rank;
    changed_.insert(rec->info.node_id);
    RoundAssigned a{job_id_,
                    round_,
                    rank,
                    static_cast<uint32_t>(ranks.size()),
                    rec->info.local_world_size,
                    offset,
                    world_size,
                    master.master_addr,
                    master.master_port,
                    restart_count_,
                    options_.max_restarts,
                    /*successor_host=*/{},
                    /*successor_port=*/0};
    offset += rec->info.local_world_size;
    out.push_back({rec->info.node_id, std::move(a)});
  }
  // Survivors that did not come back in time are no longer expected; they may join later.
  for (auto& [id, rec] : nodes_) {
    if (rec.expected) set_node(rec, rec.state, /*expected=*/false, rec.succeeded);
  }
  expected_total_ = 0;
  moved_survivors_ = 0;
  min_reached_at_.reset();
  phase_ = Phase::kRunning;
}

std::vector<std::string> RoundState::take_changed_nodes() {
  std::vector<std::string> out(changed_.begin(), changed_.end());
  changed_.clear();
  return out;
}

void RoundState::mark_changed(const std::string& node_id) {
  if (nodes_.contains(node_id)) changed_.insert(node_id);
}

std::optional<Push> RoundState::catch_up(const std::string& node_id) const {
  auto all = catch_up_all({node_id});
  if (all.empty()) return std::nullopt;
  return std::move(all.front().second);
}

std::vector<std::pair<std::string, Push>> RoundState::catch_up_all(
    const std::vector<std::string>& node_ids) const {
  std::vector<std::pair<std::string, Push>> out;
  // The members by group rank, as close_round() placed them, with the global rank each one's
  // workers start at: computed once for all the nodes asked about (a restored job asks about
  // every node; sorting the members for each made a restart of 10,000 nodes take minutes).
  std::vector<const NodeRecord*> members;
  std::unordered_map<const NodeRecord*, uint32_t> offsets;
  uint32_t world_size = 0;
  if (phase_ == Phase::kRunning) {
    for (const auto& [id, r] : nodes_) {
      if (r.state == NodeState::kMember) members.push_back(&r);
    }
    std::sort(members.begin(), members.end(), [](const NodeRecord* a, const NodeRecord* b) {
      return a->last_group_rank.value_or(0) < b->last_group_rank.value_or(0);
    });
    for (const NodeRecord* r : members) {
      offsets[r] = world_size;
      world_size += r->info.local_world_size;
    }
  }
  for (const std::string& node_id : node_ids) {
    auto it = nodes_.find(node_id);
    if (it == nodes_.end()) continue;
    const NodeRecord& rec = it->second;
    if (phase_ == Phase::kSucceeded) {
      out.emplace_back(node_id, JobSucceeded{round_});
    } else if (phase_ == Phase::kFailed) {
      if (failure_) out.emplace_back(node_id, *failure_);
    } else if (phase_ == Phase::kGathering && rec.state == NodeState::kIdle && rec.expected &&
               round_ > 0) {
      out.emplace_back(node_id, RestartRequested{round_ - 1, RestartReason::kMemberLost,
                                                 fmt::format("round {} ended while the "
                                                             "rendezvous server restarted",
                                                             round_ - 1),
                                                 ""});
    } else if (phase_ == Phase::kRunning && rec.state == NodeState::kMember) {
      const NodeInfo& master = members.front()->info;
      out.emplace_back(
          node_id, RoundAssigned{job_id_, round_, rec.last_group_rank.value_or(0),
                                 static_cast<uint32_t>(members.size()), rec.info.local_world_size,
                                 offsets.at(&rec), world_size, master.master_addr,
                                 master.master_port, restart_count_, options_.max_restarts,
                                 /*successor_host=*/{}, /*successor_port=*/0});
    }
  }
  return out;
}

Decisions RoundState::advance(SteadyTime now) {
  Decisions out;
  while (!graces_.empty() && graces_.begin()->first <= now) {
    const std::string id = graces_.begin()->second;
    drop(id, now,
         fmt::format("node '{}' lost: its connection dropped and it did not reconnect within "
                     "heartbeat_timeout ({} ms)",
                     id, ms(options_.heartbeat_timeout)),
         out);
  }
  maybe_close(now, out);
  if (phase_ == Phase::kRunning && barrier_deadline_ && now >= *barrier_deadline_) {
    std::vector<std::string> missing;
    for (auto& [id, rec] : nodes_) {
      if (rec.state == NodeState::kMember && !rec.succeeded) missing.push_back(id);
    }
    std::sort(missing.begin(), missing.end());
    fail_job(JobFailureReason::kExitBarrierTimeout,
             fmt::format("exit barrier of job '{}' timed out after {} ms: {} of {} nodes did "
                         "not finish ({})",
                         job_id_, ms(options_.exit_barrier_timeout), missing.size(), member_count_,
                         fmt::join(missing, ", ")),
             "", kRendezvousFailureExitCode, out);
  }
  return out;
}

std::optional<SteadyTime> RoundState::next_deadline() const {
  std::optional<SteadyTime> next;
  auto consider = [&](SteadyTime t) {
    if (!next || t < *next) next = t;
  };
  if (!graces_.empty()) consider(graces_.begin()->first);
  if (phase_ == Phase::kGathering) {
    consider(min_reached_at_ ? *min_reached_at_ + options_.last_call_timeout
                             : round_opened_at_ + options_.join_timeout);
  } else if (phase_ == Phase::kRunning && barrier_deadline_) {
    consider(*barrier_deadline_);
  }
  return next;
}

RoundState::Snapshot RoundState::snapshot() const {
  Snapshot out;
  out.phase = phase_;
  out.round = round_;
  out.restart_count = restart_count_;
  out.options = options_;
  out.round_opened_at = round_opened_at_;
  out.nodes.reserve(nodes_.size());
  for (const auto& [id, rec] : nodes_) {
    NodeView v;
    v.node_id = id;
    switch (rec.state) {
      case NodeState::kIdle:
        v.phase = NodePhase::kIdle;
        break;
      case NodeState::kPending:
        v.phase = NodePhase::kPending;
        break;
      case NodeState::kStandby:
        v.phase = NodePhase::kStandby;
        break;
      case NodeState::kMember:
        v.phase = NodePhase::kMember;
        break;
    }
    v.group_rank = rec.last_group_rank;
    v.local_world_size = rec.info.local_world_size;
    v.detached = rec.grace_deadline.has_value();
    out.nodes.push_back(std::move(v));
  }
  std::sort(out.nodes.begin(), out.nodes.end(), [](const NodeView& a, const NodeView& b) {
    const uint64_t ra = a.group_rank ? *a.group_rank : UINT64_MAX;
    const uint64_t rb = b.group_rank ? *b.group_rank : UINT64_MAX;
    return ra != rb ? ra < rb : a.node_id < b.node_id;
  });
  return out;
}

void RoundState::fail_job(JobFailureReason reason, const std::string& message,
                          const std::string& failure_report, int32_t exit_code, Decisions& out) {
  phase_ = Phase::kFailed;
  failure_ = JobFailed{reason, message, failure_report, exit_code};
  push_to_all(*failure_, out);
}

void RoundState::push_to_all(const Push& push, Decisions& out) const {
  for (const auto& [id, rec] : nodes_) out.push_back({id, push});
}

}  // namespace ddprun::rdzv
