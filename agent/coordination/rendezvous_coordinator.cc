#include "agent/coordination/rendezvous_coordinator.h"

#include <spdlog/spdlog.h>

#include "agent/progress/progress_entry.h"
#include "common/exit_codes.h"
#include "rendezvous/wire/node_name.h"

namespace ddprun::agent {
namespace {

RoundAssignment to_assignment(const rdzv::RoundAssignment& a, bool agent_store) {
  RoundAssignment out;
  out.round = static_cast<int>(a.round);
  out.group_rank = static_cast<int>(a.group_rank);
  out.group_world_size = static_cast<int>(a.group_world_size);
  out.rank_offset = static_cast<int>(a.rank_offset);
  out.world_size = static_cast<int>(a.world_size);
  out.master_addr = a.master_addr;
  out.master_port = a.master_port;
  out.restart_count = static_cast<int>(a.restart_count);
  out.max_restarts = static_cast<int>(a.max_restarts);  // what the server agreed on
  out.use_agent_store = agent_store;  // the job's agreed terms (same_terms checks it)
  return out;
}

// The report another node sent; empty when there is none or it cannot be read (the caller
// then logs the push's message instead).
FailureReport parse_report(const std::string& json_text) {
  FailureReport report;
  auto json = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (json.is_object()) {
    try {
      report = json.get<FailureReport>();
    } catch (const nlohmann::json::exception& e) {
      spdlog::warn("rendezvous: unreadable failure report from another node: {}", e.what());
      report = {};
    }
  }
  return report;
}

}  // namespace

RendezvousCoordinator::RendezvousCoordinator(RendezvousCoordinatorOptions options,
                                             rdzv::RendezvousClient& client)
    : options_(std::move(options)), client_(client), current_server_(options_.server) {
  client_.set_event_handler([this](const rdzv::RendezvousEvent& e) { on_event(e); });
}

RendezvousCoordinator::~RendezvousCoordinator() { client_.set_event_handler(nullptr); }

void RendezvousCoordinator::set_event_handler(std::function<void(const CoordinatorEvent&)> h) {
  handler_ = std::move(h);
}

void RendezvousCoordinator::join(const JoinOffer& offer,
                                 std::function<void(Result<RoundAssignment>)> done) {
  if (connected_) {
    send_join(offer, std::move(done));
    return;
  }
  client_.connect([this, offer, done = std::move(done)](const Status& s) mutable {
    if (closed_) return;
    if (!s) {
      // The client's error names the server and says what happened (unreachable, refused).
      done(s);
      return;
    }
    connected_ = true;
    send_join(offer, std::move(done));
  });
}

void RendezvousCoordinator::send_join(const JoinOffer& offer,
                                      std::function<void(Result<RoundAssignment>)> done) {
  rdzv::JoinRequest request;
  request.node.node_id = options_.node_id;
  request.node.local_world_size = static_cast<uint32_t>(offer.local_world_size);
  if (options_.node_rank_hint) {
    request.node.node_rank_hint = static_cast<uint32_t>(*options_.node_rank_hint);
  }
  request.node.master_addr = offer.master_addr;
  request.node.master_port = static_cast<uint16_t>(offer.master_port);
  request.job = options_.job;
  request.standby_port = options_.standby_port;
  request.restarts_used = restart_count_;
  request.survivors = survivors_;
  client_.join(std::move(request), [this, offer, done = std::move(done)](
                                       Result<rdzv::RoundAssignment> a) mutable {
    if (closed_) return;
    if (!a) {
      // The server was lost while this node waited for a round: join at the successor.
      if (a.status().kind() == ErrorKind::kUnavailable && fail_over(a.error_message())) {
        return join(offer, std::move(done));
      }
      done(a.status());
      return;
    }
    successor_.reset();
    if (!a->successor_host.empty() && a->successor_port != 0) {
      successor_ = rdzv::ServerAddress{a->successor_host, a->successor_port};
    }
    survivors_ = 0;
    last_group_world_size_ = static_cast<int>(a->group_world_size);
    restart_count_ = a->restart_count;
    done(to_assignment(*a, options_.job.agent_store));
  });
}

void RendezvousCoordinator::report_failure(const FailureReport& report,
                                           std::function<void(FailureDecision)> done) {
  pending_failure_ = std::move(done);
  client_.report_worker_failure(
      nlohmann::json(report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      report.exit_code(),
      [this, report](const Status& s) {
        if (s || closed_) return;
        if (!client_.connected()) {
          // Unanswered because the server is gone: the job may go on at the successor.
          if (!fail_over(s.message())) end_with_lost_server(s.message());
          return;
        }
        fail_job(s.message(), report, report.exit_code());
      },
      report.not_restartable);
}

void RendezvousCoordinator::report_success(std::function<void(Status)> done) {
  pending_success_ = std::move(done);
  client_.report_success([this](const Status& s) {
    if (s || closed_ || !pending_success_) return;
    std::exchange(pending_success_, nullptr)(s);
  });
}

void RendezvousCoordinator::on_event(const rdzv::RendezvousEvent& event) {
  if (closed_) return;
  if (const auto* restart = std::get_if<rdzv::RestartRequested>(&event)) {
    on_restart(*restart);
  } else if (const auto* failed = std::get_if<rdzv::JobFailed>(&event)) {
    fail_job(failed->message, parse_report(failed->failure_report), failed->exit_code);
  } else if (std::holds_alternative<rdzv::JobSucceeded>(event)) {
    if (pending_success_) std::exchange(pending_success_, nullptr)(Status());
  } else if (const auto* lost = std::get_if<rdzv::ConnectionLost>(&event)) {
    // "lost the rendezvous server at <host:port>: <why>"
    if (!fail_over(lost->message)) end_with_lost_server(lost->message);
  }
}

// The server is gone for good: the client's reconnects failed for heartbeat_timeout, or at
// once when the server's process is gone (its side closed the connection, then its kernel
// refused the reconnect: rendezvous/client/channel.h, "gone server"). When
// the last round named a successor and enough nodes may survive, the rendezvous moves there
// and the job goes on as after any lost member: a pending failure report is answered as a
// restart that consumed nothing, running workers are stopped to join the next round.
bool RendezvousCoordinator::fail_over(const std::string& why) {
  if (!successor_) return false;
  if (!client_.lost_in_good_standing(options_.job.heartbeat_timeout)) {
    // Stopped or cut off longer than the server keeps a silent node: the others went on (or
    // finished) without this node, which must not start a job of its own at the successor.
    spdlog::error(
        "{}; this node itself was cut off from the rendezvous for longer than "
        "heartbeat_timeout, so the job went on without it",
        why);
    successor_.reset();
    return false;
  }
  if (last_group_world_size_ - 1 < static_cast<int>(options_.job.min_nodes)) {
    spdlog::error(
        "{}; the rendezvous could move to {}, but the last round had {} node(s), so at most {} "
        "remain, fewer than the job's minimum of {}",
        why, rdzv::to_string(*successor_), last_group_world_size_, last_group_world_size_ - 1,
        options_.job.min_nodes);
    successor_.reset();
    return false;
  }
  const rdzv::ServerAddress to = *std::exchange(successor_, std::nullopt);
  spdlog::warn(
      "{}; the node hosting the rendezvous is lost: the rendezvous moves to {} (the successor "
      "the last round named) and the job goes on without that node",
      why, rdzv::to_string(to));
  current_server_ = rdzv::to_string(to);
  // Every other member of the last round comes too: the successor need not wait a last call.
  survivors_ = static_cast<uint32_t>(last_group_world_size_ - 1);
  client_.move_to(to);
  connected_ = false;
  if (pending_failure_) {
    FailureDecision decision;
    decision.restart = true;
    decision.counted = false;  // a lost member, not this node's failure, ended the round
    std::exchange(pending_failure_, nullptr)(decision);
    return true;
  }
  pending_success_ = nullptr;
  CoordinatorEvent e;
  e.kind = CoordinatorEvent::Kind::kRejoin;
  e.reason =
      "rendezvous: the node hosting it was lost; stopping workers to join the next round "
      "at " +
      rdzv::to_string(to);
  if (handler_) handler_(e);
  return true;
}

// The server is gone and the job cannot go on: the report's root cause says so, and what to do.
void RendezvousCoordinator::end_with_lost_server(const std::string& why) {
  FailureReport report;
  report.cause = "the rendezvous server at " + current_server_ + " was lost (" + why +
                 "); the job cannot go on without it. For a job that survives the loss of any "
                 "node, run ddp-rendezvous (with replicas) as the endpoint, or give --nnodes a "
                 "minimum the other nodes can meet";
  fail_job(report.cause, report, kExitRendezvousLost);
}

void RendezvousCoordinator::on_restart(const rdzv::RestartRequested& restart) {
  const bool worker_failure = restart.reason == rdzv::RestartReason::kWorkerFailure;
  if (pending_failure_) {
    // We reported a failure of this round. A worker-failure restart is the server's answer
    // (counted, with the job's first report); any other reason means the round had already
    // ended without our report, which the server then ignored: rejoin, nothing counted.
    FailureDecision decision;
    decision.restart = true;
    decision.counted = worker_failure;
    if (worker_failure) decision.report = parse_report(restart.failure_report);
    std::exchange(pending_failure_, nullptr)(decision);
    return;
  }
  // At the exit barrier the round did not finish everywhere: the job restarts as a whole, so
  // this node runs again too (the barrier's answer is the event, not `done`).
  const bool at_barrier = std::exchange(pending_success_, nullptr) != nullptr;
  CoordinatorEvent e;
  e.kind = CoordinatorEvent::Kind::kRejoin;
  e.worker_failure = worker_failure;
  if (worker_failure) e.report = parse_report(restart.failure_report);  // --node_failure_limit
  e.reason = std::string("rendezvous: ") + rdzv::to_string(restart.reason) + " (" +
             restart.message + ")" +
             (at_barrier ? ": the job did not finish everywhere; joining the next round"
                         : ": stopping workers to join the next round");
  if (handler_) handler_(e);
}

void RendezvousCoordinator::fail_job(std::string reason, FailureReport report, int exit_code) {
  if (pending_failure_) {
    FailureDecision decision;
    decision.restart = false;
    decision.report = std::move(report);
    decision.exit_code = exit_code;
    if (decision.report.failures.empty()) spdlog::error("{}", reason);
    std::exchange(pending_failure_, nullptr)(decision);
    return;
  }
  // Otherwise (running, or waiting at the exit barrier) the agent ends the job from the event,
  // with the job's report and exit code.
  pending_success_ = nullptr;
  CoordinatorEvent e;
  e.kind = CoordinatorEvent::Kind::kJobFailed;
  e.reason = std::move(reason);
  e.report = std::move(report);
  e.exit_code = exit_code;
  if (handler_) handler_(e);
}

void RendezvousCoordinator::share_progress(const std::vector<RankProgress>& ranks,
                                           uint32_t straggler_threshold_milli,
                                           StragglerHandler on_stragglers) {
  std::vector<rdzv::RankProgressEntry> entries;
  entries.reserve(ranks.size());
  for (const RankProgress& r : ranks) entries.push_back(to_progress_entry(r));
  client_.share_progress(std::move(entries), straggler_threshold_milli,
                         [this, on_stragglers = std::move(on_stragglers),
                          straggler_threshold_milli](Result<rdzv::StragglerFinding> finding) {
                           if (closed_ || !on_stragglers || straggler_threshold_milli == 0) return;
                           // A lost answer is not news: the next share asks again.
                           if (!finding)
                             return spdlog::debug("stragglers: {}", finding.status().message());
                           on_stragglers(*finding);
                         });
}

void RendezvousCoordinator::job_progress(
    std::function<void(Result<std::vector<RankProgress>>)> done) {
  client_.job_progress(
      [this, done = std::move(done)](Result<std::vector<rdzv::NodeProgress>> nodes) {
        if (closed_) return;
        if (!nodes) return done(nodes.status());
        std::vector<RankProgress> ranks;
        for (const rdzv::NodeProgress& node : *nodes) {
          for (const rdzv::RankProgressEntry& e : node.ranks) {
            ranks.push_back(from_progress_entry(e, rdzv::node_display_name(node.node_id)));
          }
        }
        done(std::move(ranks));
      });
}

void RendezvousCoordinator::close() { closed_ = true; }

void RendezvousCoordinator::close_excluded(const std::string& reason) {
  closed_ = true;
  exclude_reason_ = reason;
}

void RendezvousCoordinator::close_gracefully(std::function<void()> done) {
  closed_ = true;
  if (!exclude_reason_.empty()) return client_.close_excluded(exclude_reason_, std::move(done));
  client_.close(std::move(done));
}

}  // namespace ddprun::agent
