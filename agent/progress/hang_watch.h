// Hang detection for one node's workers, attempt by attempt: the parts that watch progress
// (heartbeat files, torch's file-timer pipe) and the detector that decides, on the agent's loop.
//
//   per attempt: begin_attempt(dir) → worker_env(r) for each worker → worker_started(r, pid)
//                → workers_running() starts the clocks → worker_exited(r, pid) as they end
//                → end_attempt()
//   events:      on_hang(verdict)        a rank stopped making progress (--hang_timeout)
//                on_timer_expired(exp)   torch's FileTimerClient scope expired; the server has
//                                        already signalled that worker as the request asked
//
// Nothing polls: heartbeats arrive through inotify, the timer pipe through its reads, and one
// Asio timer is armed at the detector's next deadline. Heartbeat files are always offered
// (DDPRUN_HEARTBEAT_FILE), so that progress can be shown even without hang detection.
//
// Not thread-safe: use on the agent's io_context thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/file_timer/file_timer_server.h"
#include "agent/progress/hang_detector.h"
#include "agent/progress/heartbeat_watcher.h"
#include "agent/progress/progress_options.h"
#include "agent/progress/progress_watch.h"
#include "common/clock.h"
#include "common/result.h"

namespace ddprun::agent {

class HangWatch final : public ProgressWatch {
 public:
  HangWatch(boost::asio::io_context& io, ProgressOptions options, const Clock& clock);
  ~HangWatch() override;

  // on_share is called at most once per share interval (hang_timeout / 4, within 100 ms–5 s;
  // kStragglerShareInterval when only stragglers are judged).
  void set_events(Events events) override { events_ = std::move(events); }
  bool detecting() const override { return options_.hang_timeout > Millis(0); }
  bool watching() const override {
    return detecting() || options_.judge_stragglers() || options_.auto_progress ||
           options_.max_no_progress_restarts > 0;
  }
  // The least time between two reads of the heartbeat files: a rank that steps a thousand times
  // a second costs the agent at most 1000 / 20 wake-ups, and a read holds the latest step.
  static constexpr Millis kHeartbeatReadInterval{20};
  // How often a node shares its ranks' busy times when no hang detection asks for more often.
  static constexpr Millis kStragglerShareInterval{2'000};
  // Heartbeat files (and the timer pipe) in `dir`, created.
  Status begin_attempt(const std::string& dir, int nproc) override;
  std::vector<std::pair<std::string, std::string>> worker_env(int local_rank) const override;
  void worker_started(int local_rank, pid_t pid) override;
  void workers_running() override;
  void worker_exited(int local_rank, pid_t pid) override;
  void end_attempt() override;
  std::vector<LocalRankProgress> progress() const override;

 private:
  void on_heartbeat(const Heartbeat& beat);
  void arm();
  void share_soon();
  Millis share_interval() const;

  boost::asio::io_context& io_;
  const ProgressOptions options_;
  const Clock& clock_;
  Events events_;
  boost::asio::steady_timer timer_;
  std::unique_ptr<HeartbeatWatcher> heartbeats_;
  std::unique_ptr<FileTimerServer> file_timer_;
  std::optional<HangDetector> detector_;
  // Per local rank: it wrote its heartbeat file itself this attempt (a script's own heartbeat,
  // the worker SDK's), so its automatic progress is not counted besides.
  std::vector<bool> explicit_heartbeats_;
  std::optional<SteadyTime> armed_at_;
  boost::asio::steady_timer share_timer_;
  bool share_pending_ = false;
  std::optional<SteadyTime> shared_at_;
};

}  // namespace ddprun::agent
