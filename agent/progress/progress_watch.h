// The agent's view of its workers' progress, attempt by attempt: what each worker adds to its
// environment, the pids to watch, and events when a rank hangs or a torch file-timer scope
// expires. HangWatch (hang_watch.h) watches heartbeat files and torch's timer pipe; the agent's
// lifecycle tests use a fake that touches no file.
//
//   per attempt: begin_attempt(dir) → worker_env(r) for each worker → worker_started(r, pid)
//                → workers_running() → worker_exited(r, pid) as they end → end_attempt()
//
// Not thread-safe: use on the agent's io_context thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "agent/file_timer/file_timer_scopes.h"
#include "agent/progress/hang_detector.h"
#include "common/result.h"

namespace ddprun::agent {

class ProgressWatch {
 public:
  struct Events {
    std::function<void(const HangVerdict& verdict)> on_hang;
    std::function<void(const TimerExpiry& expiry)> on_timer_expired;
    // The ranks' progress changed (a new step, a first heartbeat): share it with the other
    // nodes (and learn the stragglers). Called at most once per share interval, and only while
    // watching().
    std::function<void(const std::vector<LocalRankProgress>& progress)> on_share;
  };

  virtual ~ProgressWatch() = default;
  // Where events go; set once, before the first attempt.
  virtual void set_events(Events events) = 0;
  // Whether hangs are detected (--hang_timeout > 0).
  virtual bool detecting() const = 0;
  // Whether the ranks' heartbeats are read at all (hang detection, stragglers): progress() and
  // on_share have something to say.
  virtual bool watching() const { return detecting(); }
  // A new attempt of `nproc` workers, whose progress files go in `dir`.
  virtual Status begin_attempt(const std::string& dir, int nproc) = 0;
  // What worker `local_rank` adds to its environment.
  virtual std::vector<std::pair<std::string, std::string>> worker_env(int local_rank) const = 0;
  virtual void worker_started(int local_rank, pid_t pid) = 0;
  // Every worker of the attempt runs: the detector's clocks start.
  virtual void workers_running() = 0;
  // Called before the pid can be reused (when the exit is reported, before anything else).
  virtual void worker_exited(int local_rank, pid_t pid) = 0;
  virtual void end_attempt() = 0;
  // Each local rank's progress now (empty between attempts).
  virtual std::vector<LocalRankProgress> progress() const = 0;
};

}  // namespace ddprun::agent
