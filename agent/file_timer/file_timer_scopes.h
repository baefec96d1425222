// The file-based timer's bookkeeping: which worker holds which scope until when, and what to do
// when scopes expire. Pure: no I/O and no clock reads; times come in, decisions come out, so it
// is tested on a fake clock. FileTimerServer (file_timer_server.h) drives it from the FIFO.
//
// Semantics follow torch's FileTimerServer (1.13 and 2.x), with one deliberate difference:
//   * a scope is keyed by (pid, scope_id); acquiring it again replaces it; releasing an unknown
//     scope does nothing;
//   * when a worker's scopes expire, the signal sent is that of its earliest-expiring scope that
//     names one (> 0); then every scope of that worker is dropped, expired or not (torch clears a
//     reaped worker's timers the same way). Scopes naming no signal expire without a kill;
//   * DIFFERENCE: only workers registered with add_worker() are tracked. torch's server
//     os.kill()s whatever pid a request names; here a request from any other pid (a worker's own
//     child, another job's process writing to the wrong FIFO, a pid reused after its worker was
//     reaped) is refused and never signalled. A worker removed with remove_worker() loses its
//     scopes at once, so a pid is never signalled after its worker was reaped (torch 2.x drops
//     the timers of pids no longer running on its next pass; 1.13 keeps them).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/file_timer/file_timer_request.h"
#include "common/clock.h"
#include "common/result.h"

namespace ddprun::agent {

// One worker whose scopes expired: what FileTimerScopes::take_expired decided.
struct TimerExpiry {
  pid_t pid = -1;
  int local_rank = -1;
  std::string scope_id;  // the scope that decided: the earliest expired one naming a signal,
                         // else the earliest expired one
  int signal = 0;        // what to send to `pid`; 0 when no expired scope named a signal (> 0)
  double expiration_time = 0;               // that scope's, seconds since the epoch
  std::vector<std::string> expired_scopes;  // every scope of the worker that expired, earliest
                                            // first
};

// Not thread-safe: one owner (the agent's event loop).
class FileTimerScopes {
 public:
  // `max_scopes` bounds how many scopes are held at once (over all workers).
  explicit FileTimerScopes(std::size_t max_scopes = 4096) : max_scopes_(max_scopes) {}

  // Registers a worker of this node. Re-registering a pid updates its local rank.
  void add_worker(pid_t pid, int local_rank);
  // The worker was reaped (or is no longer ours): forgets it and drops its scopes.
  void remove_worker(pid_t pid);
  bool is_worker(pid_t pid) const { return workers_.count(pid) > 0; }

  // Applies one request received at (`now`, `wall_now`). The scope's deadline is fixed here on
  // the monotonic clock: now + (expiration_time - wall_now), so that a later jump of the wall
  // clock does not move it; an expiration already past is due at `now`. Errors (kRefused): the
  // pid is not a registered worker, or `max_scopes` are already held.
  Status apply(const FileTimerRequest& request, SteadyTime now, WallTime wall_now);

  // The earliest deadline of any scope held; nullopt when none is.
  std::optional<SteadyTime> next_deadline() const;
  // Removes what is due at `now` and returns one decision per worker, in pid order (see the
  // file comment for the rules).
  std::vector<TimerExpiry> take_expired(SteadyTime now);

  std::size_t scope_count() const { return scopes_.size(); }

 private:
  struct Scope {
    SteadyTime deadline;
    double expiration_time = 0;
    int signal = 0;
  };
  using Key = std::pair<pid_t, std::string>;

  TimerExpiry decide(pid_t pid, std::vector<std::pair<std::string, Scope>> expired) const;
  void drop_scopes_of(pid_t pid);

  std::size_t max_scopes_;
  std::map<pid_t, int> workers_;  // registered pid -> local rank
  std::map<Key, Scope> scopes_;   // only registered pids appear here
};

}  // namespace ddprun::agent
