#include "rendezvous/server/job_registry.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "progress/stragglers.h"
#include "rendezvous/server/job_snapshot.h"
#include "rendezvous/wire/codec.h"
#include "rendezvous/wire/node_name.h"
#include "rendezvous/wire/payload_codec.h"

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
  if (refuse_excluded(peer, msg)) return;
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
  job.round->expect_survivors(msg.survivors);
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
  if (!msg.exclude_reason.empty()) exclude_host(job, node_id, msg.exclude_reason);
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
                                             clock_.steady_now(), msg.not_restartable);
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
