#include "agent/progress/hang_watch.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace ddprun::agent {

HangWatch::HangWatch(boost::asio::io_context& io, ProgressOptions options, const Clock& clock)
    : io_(io), options_(options), clock_(clock), timer_(io), share_timer_(io) {}

HangWatch::~HangWatch() { end_attempt(); }

Status HangWatch::begin_attempt(const std::string& dir, int nproc) {
  end_attempt();
  // The files always (a script may write its heartbeats whether or not anyone looks); the
  // watch only when something reads them: hang detection, stragglers.
  HeartbeatWatcherOptions watcher_options;
  watcher_options.watch = watching();
  watcher_options.automatic_files = options_.auto_progress;
  watcher_options.min_wakeup_interval = kHeartbeatReadInterval;
  explicit_heartbeats_.assign(static_cast<std::size_t>(nproc), false);
  auto watcher = HeartbeatWatcher::create(
      io_, dir, nproc, watcher_options, [this](const Heartbeat& beat) { on_heartbeat(beat); },
      clock_);
  if (!watcher) return watcher.status().with_context("heartbeat files");
  heartbeats_ = std::move(watcher.value());
  if (options_.file_timer) {
    auto server = FileTimerServer::create(io_, dir, {},
                                          [this](const TimerExpiry& expiry, const Status& sent) {
                                            if (!sent)
                                              spdlog::warn("file timer: {}", sent.message());
                                            if (events_.on_timer_expired)
                                              events_.on_timer_expired(expiry);
                                          });
    if (!server) return server.status().with_context("torch's file timer");
    file_timer_ = std::move(server.value());
  }
  HangDetectorOptions detector_options;
  detector_options.hang_timeout = options_.hang_timeout;
  detector_options.first_heartbeat_timeout = options_.first_heartbeat_timeout;
  detector_.emplace(detector_options, nproc);
  return {};
}

std::vector<std::pair<std::string, std::string>> HangWatch::worker_env(int local_rank) const {
  std::vector<std::pair<std::string, std::string>> env;
  if (heartbeats_) {
    for (auto& entry : heartbeats_->worker_env(local_rank)) env.push_back(std::move(entry));
  }
  if (file_timer_) env.push_back(file_timer_->worker_env());
  // Python workers print every thread's traceback on the SIGABRT that stops a hung group.
  if (detecting()) env.emplace_back("PYTHONFAULTHANDLER", "1");
  return env;
}

void HangWatch::worker_started(int local_rank, pid_t pid) {
  if (file_timer_) file_timer_->add_worker(pid, local_rank);
}

void HangWatch::workers_running() {
  if (!detector_) return;
  detector_->start(clock_.steady_now());
  arm();
}

void HangWatch::worker_exited(int local_rank, pid_t pid) {
  // Its last heartbeats were written before it exited: they count before it stops counting.
  if (heartbeats_) heartbeats_->catch_up();
  if (file_timer_) file_timer_->remove_worker(pid);
  if (detector_) detector_->worker_exited(local_rank);
  arm();
}

void HangWatch::end_attempt() {
  timer_.cancel();
  armed_at_.reset();
  share_timer_.cancel();
  share_pending_ = false;
  shared_at_.reset();
  heartbeats_.reset();
  file_timer_.reset();
  detector_.reset();
}

std::vector<LocalRankProgress> HangWatch::progress() const {
  return detector_ ? detector_->progress(clock_.steady_now()) : std::vector<LocalRankProgress>{};
}

void HangWatch::on_heartbeat(const Heartbeat& beat) {
  if (!detector_) return;
  // An explicit heartbeat wins: once a rank writes its own file, its automatic progress (the
  // same steps, counted by torch's hooks) would count them twice.
  auto explicit_seen = explicit_heartbeats_.begin() + beat.local_rank;
  if (!beat.automatic) *explicit_seen = true;
  if (beat.automatic && *explicit_seen) return;
  const auto before = detector_->progress(beat.at)[static_cast<std::size_t>(beat.local_rank)];
  if (!detector_->heartbeat(beat.local_rank, beat.step, beat.at, beat.busy)) return;
  arm();
  // Other nodes only need steps (and first heartbeats): the ages move on their own.
  if (before.heartbeats == 0 || (beat.step && beat.step != before.last_step)) share_soon();
}

Millis HangWatch::share_interval() const {
  if (!detecting()) return kStragglerShareInterval;
  const Millis for_hangs = std::clamp(options_.hang_timeout / 4, Millis(100), Millis(5'000));
  return options_.judge_stragglers() ? std::min(for_hangs, kStragglerShareInterval) : for_hangs;
}

// At most one share per interval: the first change goes at once, later ones are batched.
void HangWatch::share_soon() {
  if (!watching() || !events_.on_share || share_pending_) return;
  const SteadyTime now = clock_.steady_now();
  auto share = [this] {
    share_pending_ = false;
    shared_at_ = clock_.steady_now();
    if (detector_) events_.on_share(detector_->progress(*shared_at_));
  };
  if (!shared_at_ || now - *shared_at_ >= share_interval()) return share();
  share_pending_ = true;
  share_timer_.expires_at(*shared_at_ + share_interval());
  share_timer_.async_wait([share](const boost::system::error_code& ec) {
    if (!ec) share();
  });
}

// One timer at the detector's next deadline. A heartbeat that only moves the deadline later
// leaves the armed wake alone: it re-checks and re-arms then, so the loop wakes at most once per
// timeout however often workers beat.
void HangWatch::arm() {
  if (!detector_) return;
  const std::optional<SteadyTime> next = detector_->next_deadline();
  if (next == armed_at_ || (next && armed_at_ && *next > *armed_at_)) return;
  armed_at_ = next;
  if (!next) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(*next);
  timer_.async_wait([this, at = *next](const boost::system::error_code& ec) {
    if (ec || !detector_ || armed_at_ != at) return;
    armed_at_.reset();
    if (auto verdict = detector_->check(clock_.steady_now())) {
      if (events_.on_hang) events_.on_hang(*verdict);
      return;
    }
    arm();
  });
}

}  // namespace ddprun::agent
