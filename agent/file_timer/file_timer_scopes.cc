#include "agent/file_timer/file_timer_scopes.h"

#include <algorithm>
#include <chrono>

namespace ddprun::agent {
namespace {

// Far enough to mean "never" and near enough that the steady clock's 64-bit nanoseconds
// cannot overflow (a client may send any finite number).
constexpr double kLongestWaitSeconds = 1e9;  // about 31 years

SteadyTime to_deadline(double expiration_time, SteadyTime now, WallTime wall_now) {
  const double wall_seconds = std::chrono::duration<double>(wall_now.time_since_epoch()).count();
  const double wait = std::clamp(expiration_time - wall_seconds, 0.0, kLongestWaitSeconds);
  return now +
         std::chrono::duration_cast<SteadyTime::duration>(std::chrono::duration<double>(wait));
}

}  // namespace

void FileTimerScopes::add_worker(pid_t pid, int local_rank) { workers_[pid] = local_rank; }

void FileTimerScopes::remove_worker(pid_t pid) {
  workers_.erase(pid);
  drop_scopes_of(pid);
}

void FileTimerScopes::drop_scopes_of(pid_t pid) {
  // Keys are ordered by pid first: a worker's scopes are one contiguous range.
  auto first = scopes_.lower_bound(Key{pid, std::string()});
  auto last = first;
  while (last != scopes_.end() && last->first.first == pid) ++last;
  scopes_.erase(first, last);
}

Status FileTimerScopes::apply(const FileTimerRequest& request, SteadyTime now, WallTime wall_now) {
  if (!is_worker(request.pid)) {
    return Status::refused("timer request for scope '" + request.scope_id + "' from pid " +
                           std::to_string(request.pid) +
                           ", which is not a worker of this node: ignored (only the agent's "
                           "own workers are ever signalled)");
  }
  Key key{request.pid, request.scope_id};
  if (request.is_release()) {
    scopes_.erase(key);
    return {};
  }
  auto it = scopes_.find(key);
  if (it == scopes_.end() && scopes_.size() >= max_scopes_) {
    return Status::refused("timer request for scope '" + request.scope_id + "' from pid " +
                           std::to_string(request.pid) + ": " + std::to_string(max_scopes_) +
                           " scopes are already held; release scopes when they end");
  }
  scopes_[std::move(key)] = Scope{to_deadline(request.expiration_time, now, wall_now),
                                  request.expiration_time, request.signal};
  return {};
}

std::optional<SteadyTime> FileTimerScopes::next_deadline() const {
  std::optional<SteadyTime> earliest;
  for (const auto& [key, scope] : scopes_) {
    if (!earliest || scope.deadline < *earliest) earliest = scope.deadline;
  }
  return earliest;
}

std::vector<TimerExpiry> FileTimerScopes::take_expired(SteadyTime now) {
  std::map<pid_t, std::vector<std::pair<std::string, Scope>>> due;
  for (const auto& [key, scope] : scopes_) {
    if (scope.deadline <= now) due[key.first].emplace_back(key.second, scope);
  }
  std::vector<TimerExpiry> out;
  for (auto& [pid, expired] : due) {
    out.push_back(decide(pid, std::move(expired)));
    drop_scopes_of(pid);  // the worker is being killed (or let go): its other scopes go too
  }
  return out;
}

TimerExpiry FileTimerScopes::decide(pid_t pid,
                                    std::vector<std::pair<std::string, Scope>> expired) const {
  std::stable_sort(expired.begin(), expired.end(), [](const auto& a, const auto& b) {
    return a.second.expiration_time < b.second.expiration_time;
  });
  TimerExpiry expiry;
  expiry.pid = pid;
  expiry.local_rank = workers_.at(pid);
  for (const auto& [scope_id, scope] : expired) expiry.expired_scopes.push_back(scope_id);
  // torch's rule: the first expired scope, in expiration order, that names a signal decides.
  auto decider = std::find_if(expired.begin(), expired.end(),
                              [](const auto& e) { return e.second.signal > 0; });
  if (decider == expired.end()) decider = expired.begin();
  expiry.scope_id = decider->first;
  expiry.signal = std::max(decider->second.signal, 0);
  expiry.expiration_time = decider->second.expiration_time;
  return expiry;
}

}  // namespace ddprun::agent
