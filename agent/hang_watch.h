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
#include "common/clock.h"
#include "common/result.h"

namespace ddprun::agent {

struct HangOptions {
  // --hang_timeout: a rank that sent a heartbeat and then none for this long is hung. 0: off
  // (the default).
  Millis hang_timeout{0};
  // --first_heartbeat_timeout: the longest a rank may take to its first heartbeat (start-up,
  // data loading). Default 600 s; never shorter than hang_timeout.
  Millis first_heartbeat_timeout{600'000};
  // TORCHELASTIC_ENABLE_FILE_TIMER=1: serve torch's FileTimerClient pipe, as torchrun does.
  bool file_timer = false;
};

class HangWatch {
 public:
  struct Events {
    std::function<void(const HangVerdict& verdict)> on_hang;
    std::function<void(const TimerExpiry& expiry)> on_timer_expired;
    // The ranks' progress changed (a new step, a first heartbeat): share it with the other
    // nodes. Called at most once per share interval (hang_timeout / 4, within 100 ms–5 s),
    // and only while detecting.
    std::function<void(const std::vector<LocalRankProgress>& progress)> on_share;
  };

  HangWatch(boost::asio::io_context& io, HangOptions options, const Clock& clock, Events events);
  ~HangWatch();

  bool detecting() const { return options_.hang_timeout > Millis(0); }

  // A new attempt of `nproc` workers: heartbeat files (and the timer pipe) in `dir`, created.
  Status begin_attempt(const std::string& dir, int nproc);
  // What worker `local_rank` adds to its environment.
  std::vector<std::pair<std::string, std::string>> worker_env(int local_rank) const;
  void worker_started(int local_rank, pid_t pid);
  // Every worker of the attempt runs: the detector's clocks start.
  void workers_running();
  // Call before the pid can be reused (i.e. when the exit is reported, before anything else).
  void worker_exited(int local_rank, pid_t pid);
  void end_attempt();

  // Each local rank's progress now (empty between attempts).
  std::vector<LocalRankProgress> progress() const;

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
  std::optional<SteadyTime> armed_at_;
  boost::asio::steady_timer share_timer_;
  bool share_pending_ = false;
  std::optional<SteadyTime> shared_at_;
};

}  // namespace ddprun::agent
