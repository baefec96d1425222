// The agent as a service: an AgentObserver that tells the service manager (systemd's notify
// protocol, through a ServiceNotifier) how this node's part of the job is doing.
//
//   READY=1      once, when the node has joined its first round and its workers run
//   STATUS=...   a line for `systemctl status` on every change: job id, state (joining,
//                running, stopping, restarting, finished, failed), round, world size, nodes,
//                restarts used out of the budget; with a progress query (hang detection on),
//                while the workers run, their steps and oldest heartbeat (progress_summary.h),
//                looked at every second and sent only when the line changed; the job's
//                stragglers while any are named (--straggler_threshold)
//   WATCHDOG=1   from the agent's event loop while the job runs (ServiceWatchdog)
//   STOPPING=1   when the job is over for this node, as the last message
//
// Wired in launcher/run_job.cc; the agent knows nothing of it. With a NullServiceNotifier
// (no NOTIFY_SOCKET) it costs a few string operations per event.
#pragma once

#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/agent_observer.h"
#include "agent/progress/progress_summary.h"
#include "common/service_notifier.h"
#include "common/service_watchdog.h"

namespace ddprun::agent {

// What the status line says; kept by ServiceStatus, rendered by describe().
struct ServiceState {
  enum class Phase { kStarting, kJoining, kRunning, kStopping, kRestarting, kFinished, kFailed };
  Phase phase = Phase::kStarting;
  std::string job_id;
  int attempt = 0;        // worker groups started before the current one
  int round = -1;         // -1: no round yet
  int world_size = 0;     // workers in the round
  int nodes = 0;          // nodes in the round
  int group_rank = 0;     // this node among them
  int local_workers = 0;  // workers on this node
  int restarts_used = 0;  // TORCHELASTIC_RESTART_COUNT of the round
  int max_restarts = 0;
  int exit_code = 0;       // kFinished / kFailed
  std::string last_event;  // e.g. "rank 3 exited with code 1", for stopping / restarting
  std::string progress;    // describe(ProgressSummary), shown while running
  std::string stragglers;  // describe_stragglers(), shown while running when any are named
};
const char* to_string(ServiceState::Phase phase);
// "job <id>: <state>; round R, world size W (N nodes, this is node G with L workers); restarts
// U/M[; <last event>][; <progress>][; <stragglers>]", shortened to what is known.
std::string describe(const ServiceState& state);
// "straggler: rank 3 (node b) 2.1x the median busy time of 0.20 s" (or "stragglers: rank 3
// (node b) 2.1x, rank 5 (node c) 1.8x the median ..."); empty when none is named.
std::string describe_stragglers(const rdzv::StragglerFinding& finding);

// Not thread-safe: called by the agent on its loop. `notifier` must outlive it.
class ServiceStatus final : public AgentObserver {
 public:
  // Starts the watchdog (when the notifier has one) on `io` at once: the loop is alive while
  // the node waits for its first round too. `job_id` names the job in every line.
  ServiceStatus(boost::asio::io_context& io, ServiceNotifier& notifier, std::string job_id);

  // Shows the workers' progress from `query` while they run (set it before the job starts).
  // The line is refreshed every kProgressPeriod at most, and only sent when it changed; the
  // timer runs only while workers run and the notifier is active (someone reads the line).
  void set_progress_query(ProgressQuery query) { progress_query_ = std::move(query); }
  static constexpr Millis kProgressPeriod{1'000};

  void on_joining(int attempt) override;
  void on_health_check_failed(const std::string& why) override;
  void on_left_unfit(UnfitReason reason, const std::string& why) override;
  void on_round_assigned(const RoundAssignment& assignment, Millis waited) override;
  void on_workers_started(const RoundAssignment& assignment, int workers,
                          std::optional<SteadyTime> failed_at) override;
  void on_group_finished(const GroupResult& result) override;
  void on_restart(bool counted) override;
  void on_stragglers(const rdzv::StragglerFinding& finding) override;
  void on_job_finished(int exit_code) override;

  const ServiceState& state() const { return state_; }
  bool ready_sent() const { return ready_sent_; }

 private:
  void publish();  // STATUS= when the line changed
  void refresh_progress();
  void schedule_progress();

  ServiceNotifier& notifier_;
  ServiceWatchdog watchdog_;
  ServiceState state_;
  ProgressQuery progress_query_;
  boost::asio::steady_timer progress_timer_;
  bool progress_scheduled_ = false;
  std::string last_line_;
  bool ready_sent_ = false;
  bool stopped_ = false;  // STOPPING=1 sent: nothing follows it
};

}  // namespace ddprun::agent
