#include "agent/rendezvous_coordinator.h"

#include <spdlog/spdlog.h>

namespace ddprun::agent {
namespace {

RoundAssignment to_assignment(const rdzv::RoundAssignment& a) {
  RoundAssignment out;
  out.round = static_cast<int>(a.round);
  out.group_rank = static_cast<int>(a.group_rank);
  out.group_world_size = static_cast<int>(a.group_world_size);
  out.rank_offset = static_cast<int>(a.rank_offset);
  out.world_size = static_cast<int>(a.world_size);
  out.master_addr = a.master_addr;
  out.master_port = a.master_port;
  out.restart_count = static_cast<int>(a.restart_count);
  out.use_agent_store = false;  // rank 0's worker hosts the TCPStore
  return out;
}

// The report other nodes sent, or an empty one when it is not ours to parse.
FailureReport parse_report(const std::string& text) {
  FailureReport report;
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_object()) {
    try {
      report = json.get<FailureReport>();
    } catch (const nlohmann::json::exception&) {
      report = {};  // a sentence, not a report: the caller logs the reason instead
    }
  }
  return report;
}

}  // namespace

RendezvousCoordinator::RendezvousCoordinator(boost::asio::io_context& io,
                                             RendezvousCoordinatorOptions options)
    : options_(std::move(options)), client_(io, options_.client) {
  client_.set_event_handler([this](const rdzv::RendezvousEvent& e) { on_event(e); });
}

RendezvousCoordinator::~RendezvousCoordinator() = default;

void RendezvousCoordinator::set_event_handler(std::function<void(const CoordinatorEvent&)> h) {
  handler_ = std::move(h);
}

void RendezvousCoordinator::join(const JoinOffer& offer,
                                 std::function<void(Result<RoundAssignment>)> done) {
  if (connected_) {
    send_join(offer, std::move(done));
    return;
  }
  client_.connect([this, offer, done = std::move(done)](Status s) mutable {
    if (closed_) return;
    if (!s) {
      done(s.with_context("cannot reach the rendezvous server at " + options_.client.host + ":" +
                          std::to_string(options_.client.port)));
      return;
    }
    connected_ = true;
    send_join(offer, std::move(done));
  });
}

void RendezvousCoordinator::send_join(const JoinOffer& offer,
                                      std::function<void(Result<RoundAssignment>)> done) {
  rdzv::JoinRequest request;
  request.node_id = options_.node_id;
  request.local_world_size = static_cast<uint32_t>(offer.local_world_size);
  if (options_.node_rank_hint)
    request.node_rank_hint = static_cast<uint32_t>(*options_.node_rank_hint);
  request.master_addr = offer.master_addr;
  request.master_port = static_cast<uint16_t>(offer.master_port);
  request.min_nodes = static_cast<uint32_t>(options_.min_nodes);
  request.max_nodes = static_cast<uint32_t>(options_.max_nodes);
  request.max_restarts = static_cast<uint32_t>(options_.max_restarts);
  request.join_timeout = options_.join_timeout;
  request.last_call_timeout = options_.last_call_timeout;
  request.heartbeat_timeout = options_.heartbeat_timeout;
  request.exit_barrier_timeout = options_.exit_barrier_timeout;
  client_.join(std::move(request), [this, done = std::move(done)](Result<rdzv::RoundAssignment> a) {
    if (closed_) return;
    if (!a) {
      done(a.status());
      return;
    }
    done(to_assignment(*a));
  });
}

void RendezvousCoordinator::report_failure(const FailureReport& report,
                                           std::function<void(FailureDecision)> done) {
  pending_failure_ = std::move(done);
  client_.report_worker_failure(nlohmann::json(report).dump(), report.exit_code(),
                                [this, report](Status s) {
                                  if (!s && !closed_)
                                    fail_job(s.message(), report, report.exit_code());
                                });
}

void RendezvousCoordinator::report_success(std::function<void(Status)> done) {
  pending_success_ = std::move(done);
  client_.report_success([this](Status s) {
    if (s || closed_ || !pending_success_) return;
    auto cb = std::move(pending_success_);
    pending_success_ = nullptr;
    cb(s);
  });
}

void RendezvousCoordinator::on_event(const rdzv::RendezvousEvent& event) {
  if (closed_) return;
  if (const auto* restart = std::get_if<rdzv::RestartRequested>(&event)) {
    if (pending_failure_) {  // the answer to our own report: restart
      auto cb = std::move(pending_failure_);
      pending_failure_ = nullptr;
      FailureDecision decision;
      decision.restart = true;
      decision.report = parse_report(restart->report);
      cb(decision);
      return;
    }
    CoordinatorEvent e;
    e.kind = CoordinatorEvent::Kind::kRejoin;
    e.reason = std::string("rendezvous: ") + rdzv::to_string(restart->reason) +
               ": stopping workers to join the next round";
    if (handler_) handler_(e);
  } else if (const auto* failed = std::get_if<rdzv::JobFailed>(&event)) {
    fail_job(failed->reason, parse_report(failed->report), failed->exit_code);
  } else if (std::holds_alternative<rdzv::JobSucceeded>(event)) {
    if (pending_success_) {
      auto cb = std::move(pending_success_);
      pending_success_ = nullptr;
      cb(Status());
    }
  } else if (const auto* lost = std::get_if<rdzv::ConnectionLost>(&event)) {
    fail_job(lost->message, {}, 1);  // "lost the rendezvous server at <host:port>: <why>"
  }
}

void RendezvousCoordinator::fail_job(std::string reason, FailureReport report, int exit_code) {
  if (pending_failure_) {
    auto cb = std::move(pending_failure_);
    pending_failure_ = nullptr;
    FailureDecision decision;
    decision.restart = false;
    decision.report = report.failures.empty() ? FailureReport{} : report;
    decision.exit_code = exit_code;
    if (decision.report.failures.empty()) spdlog::error("{}", reason);
    cb(decision);
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

void RendezvousCoordinator::close() { closed_ = true; }

void RendezvousCoordinator::close_gracefully(std::function<void()> done) {
  closed_ = true;
  client_.close(std::move(done));
}

}  // namespace ddprun::agent
