#include "rendezvous/server/job_registry.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "rendezvous/wire/codec.h"
#include "rendezvous/server/job_snapshot.h"
#include "rendezvous/wire/node_name.h"
#include "progress/stragglers.h"

namespace ddprun::rdzv {
namespace {

ServerMessage to_message(const Push& push) {
  return std::visit([](const auto& p) { return ServerMessage(p); }, push);
}

}  // namespace

JobRegistry::JobRegistry(boost::asio::any_io_executor executor, const Clock& clock,
                         std::shared_ptr<ServerCounters> counters)
    : executor_(std::move(executor)),
      clock_(clock),
      counters_(std::move(counters)),
      token_rng_(std::random_device{}()) {}

JobRegistry::~JobRegistry() { cancel_timers(); }

Reply JobRegistry::error_reply(uint32_t request_id, std::string message) {
  Reply r;
  r.request_id = request_id;
  r.ok = false;
  r.error = std::move(message);
  return r;
}

JobRegistry::Job& JobRegistry::open_connection(const std::string& job_id) {
  auto& slot = jobs_[job_id];
  if (!slot) slot = std::make_unique<Job>(executor_, job_id);
  ++slot->connections;
  return *slot;
}

void JobRegistry::close_connection(Job& job, Peer& peer, const std::string& node_id) {
  --job.connections;
  auto link = job.links.find(node_id);
  if (!node_id.empty() && link != job.links.end() && link->second.peer == &peer) {
    link->second.peer = nullptr;
    if (job.round) {
      commit(job, nullptr, {}, std::nullopt, job.round->detach(node_id, clock_.steady_now()),
             false);
    }
    schedule(job);
  }
  erase_if_idle(job);
}

void JobRegistry::join(Job& job, Peer& peer, const JoinMsg& msg, std::string& node_id) {
  auto fail = [&](std::string why) { peer.send(error_reply(msg.request_id, std::move(why))); };
  const std::string& joining = msg.node.node_id;
  if (joining.empty()) return fail("join without a node id");
  if (!node_id.empty() && node_id != joining) {
    return fail(
        fmt::format("this connection already joined as node '{}'", node_display_name(node_id)));
  }
  auto link = job.links.find(joining);
  if (link != job.links.end()) {
    if (const Reply* earlier = link->second.delivery.answered(msg.request_id)) {
      const Reply answer = *earlier;  // the log changes below
      if (link->second.peer == &peer) {
        answer_again(job, peer, joining, msg.request_id);
        return;
      }
      if (!link->second.peer) {  // an open connection still holds it: refused below
        rejoin_after_lost_reply(job, peer, link->second, answer, msg, node_id);
        return;
      }
    }
  }
  if (link != job.links.end() && link->second.peer && link->second.peer != &peer) {
    return fail(
        fmt::format("node id '{}' is already connected to job '{}'; node ids must be "
                    "unique per job",
                    joining, job.id));
  }
  if (Status valid = validate(msg.job); !valid) return fail(valid.message());
  const SteadyTime now = clock_.steady_now();
  if (!job.round) job.round.emplace(job.id, msg.job, now);
  // A job that moved here after its host was lost goes on counting its restarts.
  job.round->adopt_restart_count(msg.restarts_used);
  auto decisions = job.round->join(msg.node, msg.job, now);
  if (!decisions) {
    if (job.round->empty()) job.round.reset();  // a bad first join must not fix the options
    return fail(decisions.error_message());
  }
  job.round->reattach(joining);  // a join retried after a lost reply ends any grace
  auto& l = job.links[joining];
  l.peer = &peer;
  l.standby_host = msg.node.master_addr;
  l.standby_port = msg.standby_port;
  if (l.token == 0) l.token = token_rng_() | 1;  // never 0: 0 means "no token"
  l.join_request = msg.request_id;
  job.round->mark_changed(joining);  // its token and join request are in its record
  node_id = joining;
  Reply ok;
  ok.request_id = msg.request_id;
  ok.integer = static_cast<int64_t>(l.token);
  spdlog::debug("job '{}': node '{}' joined", job.id, joining);
  commit(job, &peer, joining, ok, std::move(*decisions), false);
}

void JobRegistry::resume(Job& job, Peer& peer, const ResumeMsg& msg, std::string& node_id) {
  auto link = job.links.find(msg.node_id);
  const bool member = link != job.links.end() && link->second.token == msg.token && job.round &&
                      job.round->knows(msg.node_id);
  if (!member) {
    peer.send(error_reply(msg.request_id,
                          fmt::format("node '{}' is no longer a member of job '{}' (dropped "
                                      "after heartbeat_timeout); join again",
                                      msg.node_id, job.id)));
    return;
  }
  Job::Link& l = link->second;
  auto missed = l.delivery.resume(msg.pushes_received);
  if (!missed) {
    peer.send(
        error_reply(msg.request_id, fmt::format("node '{}' cannot resume its place in job '{}': {}",
                                                msg.node_id, job.id, missed.error_message())));
    return;
  }
  job.round->reattach(msg.node_id);
  take_over(l, peer, msg.node_id);
  node_id = msg.node_id;
  Reply ok;
  ok.request_id = msg.request_id;
  peer.send(ok);
  for (const Push& p : *missed) peer.send(to_message(p));
  schedule(job);
}

void JobRegistry::take_over(Job::Link& link, Peer& peer, const std::string& node_id) {
  if (link.peer && link.peer != &peer) {
    link.peer->kick(
        fmt::format("node '{}' reconnected on a newer connection", node_display_name(node_id)));
  }
  link.peer = &peer;
}

bool JobRegistry::answer_again(Job& job, Peer& peer, const std::string& node_id,
                               uint32_t request_id) {
  auto link = job.links.find(node_id);
  if (node_id.empty() || link == job.links.end() || link->second.peer != &peer) return false;
  const Reply* earlier = link->second.delivery.answered(request_id);
  if (!earlier) return false;
  spdlog::debug("job '{}': node '{}' sent request {} again; answering as before", job.id, node_id,
                request_id);
  // Through commit: the answer must not overtake the record of what the request changed.
  commit(job, &peer, node_id, *earlier, {}, false);
  return true;
}

void JobRegistry::rejoin_after_lost_reply(Job& job, Peer& peer, Job::Link& link,
                                          const Reply& answer, const JoinMsg& msg,
                                          std::string& node_id) {
  const std::string& joining = msg.node.node_id;
  // It never received a push: the answer to its first join was lost, and they follow it.
  auto missed = link.delivery.resume(0);
  if (!missed || !job.round || !job.round->reattach(joining)) {
    const std::string why = missed ? std::string("it was dropped") : missed.error_message();
    peer.send(error_reply(msg.request_id,
                          fmt::format("node '{}' cannot take its place in job '{}' again: {}",
                                      joining, job.id, why)));
    return;
  }
  spdlog::debug("job '{}': node '{}' joined again after losing the answer", job.id, joining);
  take_over(link, peer, joining);
  node_id = joining;
  peer.send(answer);
  for (const Push& p : *missed) peer.send(to_message(p));
  schedule(job);
}

Status JobRegistry::acknowledge(Job& job, const std::string& node_id, uint64_t pushes_received) {
  auto link = job.links.find(node_id);
  if (node_id.empty() || link == job.links.end()) return Status();
  return link->second.delivery.acknowledge(pushes_received);
}

void JobRegistry::leave(Job& job, Peer& peer, const LeaveMsg& msg, std::string& node_id) {
  Reply ok;
  ok.request_id = msg.request_id;
  peer.send(ok);
  if (node_id.empty()) return;
  const std::string leaving = std::exchange(node_id, std::string());
  job.links.erase(leaving);
  if (!job.round) return;
  commit(job, nullptr, {}, std::nullopt, job.round->leave(leaving, clock_.steady_now()), true);
}

void JobRegistry::report_failure(Job& job, Peer& peer, const ReportFailureMsg& msg,
                                 const std::string& node_id) {
  if (node_id.empty() || !job.round) {
    return peer.send(error_reply(msg.request_id, "report_worker_failure before join"));
  }
  if (answer_again(job, peer, node_id, msg.request_id)) return;
  auto decisions = job.round->report_failure(node_id, msg.round, msg.failure_report, msg.exit_code,
                                             clock_.steady_now());
  if (!decisions) return peer.send(error_reply(msg.request_id, decisions.error_message()));
  Reply ok;
  ok.request_id = msg.request_id;
  commit(job, &peer, node_id, ok, std::move(*decisions), false);
}

void JobRegistry::report_success(Job& job, Peer& peer, const ReportSuccessMsg& msg,
                                 const std::string& node_id) {
  if (node_id.empty() || !job.round) {
    return peer.send(error_reply(msg.request_id, "report_success before join"));
  }
  if (answer_again(job, peer, node_id, msg.request_id)) return;
  auto decisions = job.round->report_success(node_id, msg.round, clock_.steady_now());
  if (!decisions) return peer.send(error_reply(msg.request_id, decisions.error_message()));
  Reply ok;
  ok.request_id = msg.request_id;
  commit(job, &peer, node_id, ok, std::move(*decisions), false);
}

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
    reply.payload = encode_stragglers(
        progress::publish_stragglers(job.stragglers, stragglers_of(job, msg.straggler_threshold_milli)));
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

void JobRegistry::commit(Job& job, Peer* reply_to, const std::string& reply_node,
                         std::optional<Reply> reply, Decisions decisions, bool prune_links) {
  if (!host_node_id_.empty()) name_successor(job, decisions);
  if (reply) {
    // Kept now, not once recorded: a copy of the request arriving meanwhile is answered again
    // (after the record), not done again.
    auto link = job.links.find(reply_node);
    if (link != job.links.end() && !link->second.delivery.answered(reply->request_id)) {
      link->second.delivery.remember(*reply);
    }
  }
  auto deliver = [this, id = job.id, reply_to, reply_node, reply = std::move(reply),
                  decisions = std::move(decisions), prune_links] {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return;  // forgotten meanwhile: nobody is left to tell
    Job& j = *it->second;
    if (reply) {
      // The requester may have disconnected while the state was being recorded.
      auto link = j.links.find(reply_node);
      if (link != j.links.end() && link->second.peer == reply_to) reply_to->send(*reply);
    }
    dispatch(j, decisions);
    after_change(j, prune_links);
  };
  if (!journal_.recording()) {
    if (job.round) job.round->take_changed_nodes();  // nothing keeps them: forget at once
    return deliver();
  }
  journal_.record(job.id, state_of(job.id), std::move(deliver));
  schedule(job);  // the deadlines move now; the pushes wait for the record
}

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

// Every RoundAssigned of a closing round names the same successor: the standby server of the
// member with the lowest group rank other than the node hosting this server.
void JobRegistry::name_successor(const Job& job, Decisions& decisions) const {
  const RoundAssigned* chosen = nullptr;
  const Job::Link* chosen_link = nullptr;
  for (const Outgoing& out : decisions) {
    const auto* a = std::get_if<RoundAssigned>(&out.push);
    if (!a || out.node_id == host_node_id_) continue;
    auto link = job.links.find(out.node_id);
    if (link == job.links.end() || link->second.standby_port == 0) continue;
    if (!chosen || a->group_rank < chosen->group_rank) {
      chosen = a;
      chosen_link = &link->second;
    }
  }
  if (!chosen_link) return;
  for (Outgoing& out : decisions) {
    if (auto* a = std::get_if<RoundAssigned>(&out.push)) {
      a->successor_host = chosen_link->standby_host;
      a->successor_port = chosen_link->standby_port;
    }
  }
}

void JobRegistry::dispatch(Job& job, const Decisions& decisions) {
  for (const Outgoing& out : decisions) {
    if (const auto* assigned = std::get_if<RoundAssigned>(&out.push);
        assigned && assigned->round != job.last_assigned_round) {
      // A round closed: every member gets one RoundAssigned; count the round once.
      job.last_assigned_round = assigned->round;
      if (counters_ && job.round) {
        counters_->round_durations.observe(
            std::chrono::duration_cast<Millis>(clock_.steady_now() - job.round->round_opened_at()));
      }
    }
    auto link = job.links.find(out.node_id);
    if (link == job.links.end()) continue;
    // Kept until acknowledged: a cut may lose it even after it was written.
    link->second.delivery.record(out.push);
    if (link->second.peer) link->second.peer->send(to_message(out.push));
  }
}

// Bookkeeping after the round state changed: links of dropped nodes go (only after drops: it
// walks every link), and the deadline moves.
void JobRegistry::after_change(Job& job, bool prune_links) {
  if (prune_links && job.round) {
    std::erase_if(job.links, [&](const auto& kv) { return !job.round->knows(kv.first); });
  }
  schedule(job);
}

void JobRegistry::schedule(Job& job) {
  std::optional<SteadyTime> next = job.round ? job.round->next_deadline() : std::nullopt;
  if (next == job.timer_at) return;
  job.timer_at = next;
  if (!next) {
    job.timer.cancel();
    return;
  }
  job.timer.expires_at(*next);  // cancels the previous wait
  job.timer.async_wait([this, id = job.id, at = *next](const boost::system::error_code& ec) {
    if (ec) return;  // rescheduled or cancelled; the registry may be gone
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second->timer_at == at) on_timer(id);
  });
}

void JobRegistry::on_timer(const std::string& job_id) {
  Job& job = *jobs_.at(job_id);
  job.timer_at.reset();
  if (!job.round) return;
  commit(job, nullptr, {}, std::nullopt, job.round->advance(clock_.steady_now()), true);
  erase_if_idle(job);
}

void JobRegistry::erase_if_idle(Job& job) {
  if (job.connections > 0 || (job.round && !job.round->empty())) return;
  const std::string id = job.id;  // copied: erasing destroys `job`
  spdlog::debug("job '{}' has no nodes and no connections left; forgetting it", id);
  jobs_.erase(id);
  if (journal_.recording()) journal_.record(id, state_of(id), {});
}

std::vector<JobRegistry::JobView> JobRegistry::views() const {
  std::vector<JobView> out;
  out.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) {
    JobView s;
    s.id = id;
    s.connections = job->connections;
    if (job->round) s.round = job->round->snapshot();
    s.stragglers = stragglers_of(*job, job->straggler_threshold_milli);
    for (const auto& [node_id, link] : job->links) {
      JobView::LinkView view;
      if (link.peer) {
        view.address = link.peer->address();
        view.last_heard = link.peer->last_heard();
      }
      s.links.emplace(node_id, std::move(view));
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const JobView& a, const JobView& b) { return a.id < b.id; });
  return out;
}

void JobRegistry::cancel_timers() {
  for (auto& [id, job] : jobs_) {
    job->timer.cancel();
    job->timer_at.reset();
  }
}

}  // namespace ddprun::rdzv
