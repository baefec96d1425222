#include "agent/service_status.h"

#include <fmt/format.h>

#include "agent/process/exit_status.h"
#include "progress/stragglers.h"

namespace ddprun::agent {

const char* to_string(ServiceState::Phase phase) {
  using P = ServiceState::Phase;
  switch (phase) {
    case P::kStarting:
      return "starting";
    case P::kJoining:
      return "joining";
    case P::kRunning:
      return "running";
    case P::kStopping:
      return "stopping workers";
    case P::kRestarting:
      return "restarting";
    case P::kFinished:
      return "finished";
    case P::kFailed:
      return "failed";
  }
  return "?";
}

std::string describe(const ServiceState& s) {
  using P = ServiceState::Phase;
  std::string line =
      fmt::format("job {}: {}", s.job_id.empty() ? "?" : s.job_id, to_string(s.phase));
  if (s.phase == P::kJoining) {
    line += s.attempt == 0 ? " the first round" : fmt::format(" round (attempt {})", s.attempt);
  }
  if (s.phase == P::kFinished || s.phase == P::kFailed) {
    line += fmt::format(" (exit code {})", s.exit_code);
  }
  if (s.round >= 0) {
    line += fmt::format("; round {}, world size {} ({} node{}, this is node {} with {} worker{})",
                        s.round, s.world_size, s.nodes, s.nodes == 1 ? "" : "s", s.group_rank,
                        s.local_workers, s.local_workers == 1 ? "" : "s");
    line += fmt::format("; restarts {}/{}", s.restarts_used, s.max_restarts);
  }
  if (!s.last_event.empty() && s.phase != P::kRunning && s.phase != P::kJoining) {
    line += "; " + s.last_event;
  }
  if (s.phase == P::kRunning && !s.progress.empty()) line += "; " + s.progress;
  if (s.phase == P::kRunning && !s.stragglers.empty()) line += "; " + s.stragglers;
  return line;
}

std::string describe_stragglers(const rdzv::StragglerFinding& f) {
  if (f.stragglers.empty() || f.median_us == 0) return {};
  std::string line = f.stragglers.size() == 1 ? "straggler: " : "stragglers: ";
  // A job-wide problem shows its first few: the rest are in the log and in ddp-rendezvous status.
  constexpr size_t kShown = 4;
  for (size_t i = 0; i < f.stragglers.size() && i < kShown; ++i) {
    const rdzv::StragglerEntry& s = f.stragglers[i];
    line += fmt::format("{}rank {} (node {}) {:.1f}x", i == 0 ? "" : ", ", s.rank, s.node,
                        static_cast<double>(s.busy_us) / static_cast<double>(f.median_us));
  }
  if (f.stragglers.size() > kShown) {
    line += fmt::format(" and {} more", f.stragglers.size() - kShown);
  }
  return line + " the median busy time of " + progress::format_busy(f.median_us);
}

ServiceStatus::ServiceStatus(boost::asio::io_context& io, ServiceNotifier& notifier,
                             std::string job_id)
    : notifier_(notifier), watchdog_(io, notifier), progress_timer_(io) {
  state_.job_id = std::move(job_id);
  watchdog_.start();
}

void ServiceStatus::on_joining(int attempt) {
  state_.attempt = attempt;
  // A rejoin after a failure stays "restarting" until the new round runs.
  if (state_.phase != ServiceState::Phase::kRestarting)
    state_.phase = ServiceState::Phase::kJoining;
  publish();
}

void ServiceStatus::on_health_check_failed(const std::string& why) {
  // The first line only: the check's output follows it in the log.
  state_.last_event = why.substr(0, why.find('\n'));
  // A check that fails while the workers run stops them now; a "running" line shows no event,
  // so without this the reason would reach systemctl only once every worker had exited.
  if (state_.phase == ServiceState::Phase::kRunning) state_.phase = ServiceState::Phase::kStopping;
  publish();
}

// Why the node leaves the job (its workers' failures, a rank's request, a kept-out host): what
// an operator looking at `systemctl status` needs before draining it.
void ServiceStatus::on_left_unfit(UnfitReason, const std::string& why) {
  state_.last_event = why.substr(0, why.find('\n'));
  publish();
}

void ServiceStatus::on_round_assigned(const RoundAssignment& a, Millis waited) {
  state_.round = a.round;
  state_.world_size = a.world_size;
  state_.nodes = a.group_world_size;
  state_.group_rank = a.group_rank;
  state_.restarts_used = a.restart_count;
  state_.max_restarts = a.max_restarts;
}

void ServiceStatus::on_workers_started(const RoundAssignment& a, int workers,
                                       std::optional<SteadyTime> failed_at) {
  state_.local_workers = workers;
  state_.phase = ServiceState::Phase::kRunning;
  state_.last_event.clear();
  refresh_progress();
  schedule_progress();
  if (!ready_sent_) {
    // Start-up is done: the node is in the job and its workers exist (exec confirmed).
    ready_sent_ = true;
    last_line_ = describe(state_);
    notifier_.ready(last_line_);
    return;
  }
  publish();
}

void ServiceStatus::on_group_finished(const GroupResult& result) {
  if (result.outcome == GroupResult::Outcome::kSucceeded) {
    state_.last_event = "every worker exited 0";
  } else if (result.outcome == GroupResult::Outcome::kFailed && !result.failures.empty()) {
    const WorkerFailure& root = result.failures.front();
    state_.last_event =
        root.exit.signal != 0
            ? fmt::format("rank {} was killed by {}", root.rank, signal_name(root.exit.signal))
            : fmt::format("rank {} exited with code {}", root.rank, root.exit.code);
  } else {
    state_.last_event = "workers stopped";
  }
  state_.phase = ServiceState::Phase::kStopping;
  publish();
}

void ServiceStatus::on_restart(bool counted) {
  state_.phase = ServiceState::Phase::kRestarting;
  if (counted) ++state_.restarts_used;  // the next round will say so too
  publish();
}

void ServiceStatus::on_stragglers(const rdzv::StragglerFinding& finding) {
  state_.stragglers = describe_stragglers(finding);
  publish();
}

void ServiceStatus::on_job_finished(int exit_code) {
  state_.exit_code = exit_code;
  state_.phase = exit_code == 0 ? ServiceState::Phase::kFinished : ServiceState::Phase::kFailed;
  publish();
  // No ping (nor progress) after STOPPING=1: it is the last thing the manager hears.
  progress_timer_.cancel();
  watchdog_.stop();
  stopped_ = true;
  notifier_.stopping();
}

void ServiceStatus::refresh_progress() {
  state_.progress.clear();
  if (progress_query_ && state_.phase == ServiceState::Phase::kRunning) {
    state_.progress = describe(summarize_progress(progress_query_()));
  }
}

// One timer, while the workers run: ages move on their own, so the line is looked at again
// each period (not at each heartbeat, which may come thousands of times a second).
void ServiceStatus::schedule_progress() {
  if (!progress_query_ || !notifier_.active() || progress_scheduled_ || stopped_) return;
  progress_scheduled_ = true;
  progress_timer_.expires_after(kProgressPeriod);
  progress_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: `this` may be gone
    progress_scheduled_ = false;
    if (stopped_ || state_.phase != ServiceState::Phase::kRunning) return;
    refresh_progress();
    publish();
    schedule_progress();
  });
}

void ServiceStatus::publish() {
  if (stopped_) return;
  std::string line = describe(state_);
  if (line == last_line_) return;
  last_line_ = std::move(line);
  notifier_.status(last_line_);
}

}  // namespace ddprun::agent
