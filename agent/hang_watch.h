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

#include "agent/file_timer_server.h"
#include "agent/hang_detector.h"
#include "agent/heartbeat_watcher.h"
#include "agent/progress_watch.h"
#include "common/clock.h"
#include "common/result.h"

namespace ddprun::agent {

struct HangOptions {
  // --hang_timeout: a rank that sent a heartbeat and then none for this long is hung. 0: off
  // (the default).
  Millis hang_timeout{0};
  // --first_heartbeat_timeout: the longest a rank may take to its first heartbeat (start-up,
  // data loading); never shorter than hang_timeout. 0 (the default): a rank that never sends a
  // heartbeat is not stopped for that alone (a program without the SDK, a script whose steps
  // torch's hooks do not see); the launcher says so at start.
  Millis first_heartbeat_timeout{0};
  // TORCHELASTIC_ENABLE_FILE_TIMER=1: serve torch's FileTimerClient pipe, as torchrun does.
  bool file_timer = false;
  // --straggler_threshold in thousandths (progress/stragglers.h); 0 (the default): off. When
  // set, heartbeats are watched (for their busy times) and shared even without hang detection.
  uint32_t straggler_threshold_milli = 0;
  bool judge_stragglers() const { return straggler_threshold_milli > 0; }
  // Python workers report their own steps and busy times (agent/python/, DDPRUN_AUTO_PROGRESS_
  // FILE), so their progress is read for every Python job: metrics, status lines and the
  // rendezvous's status show each rank's step. The launcher sets it for Python entry points
  // unless --no_auto_progress. Default false.
  bool auto_progress = false;
};

class HangWatch final : public ProgressWatch {
 public:
  HangWatch(boost::asio::io_context& io, HangOptions options, const Clock& clock);
  ~HangWatch() override;

  // on_share is called at most once per share interval (hang_timeout / 4, within 100 ms–5 s;
  // kStragglerShareInterval when only stragglers are judged).
  void set_events(Events events) override { events_ = std::move(events); }
  bool detecting() const override { return options_.hang_timeout > Millis(0); }
  bool watching() const override {
    return detecting() || options_.judge_stragglers() || options_.auto_progress;
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
  const HangOptions options_;
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
