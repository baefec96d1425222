#include "agent/progress/heartbeat_watcher.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/posix_fd.h"

namespace ddprun::agent {
namespace {

constexpr std::uint32_t kContentEvents = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO;
constexpr std::uint32_t kWatchMask = kContentEvents | IN_ATTRIB | IN_ONLYDIR;

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// The slot a file name stands for: its local rank for rank_<r>, local_world_size + r for
// auto_<r> (when those are offered), or -1 when it is not one of ours.
int slot_of(std::string_view name, int local_world_size, bool automatic_files) {
  for (const bool automatic : {false, true}) {
    if (automatic && !automatic_files) break;
    const std::string_view prefix = automatic ? "auto_" : "rank_";
    if (name.substr(0, prefix.size()) != prefix) continue;
    const std::string_view digits = name.substr(prefix.size());
    int rank = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
    if (ec != std::errc() || end != digits.data() + digits.size()) return -1;
    if (rank < 0 || rank >= local_world_size) return -1;
    // "rank_01" is not rank 1
    if (HeartbeatWatcher::file_name(rank, automatic) != name) return -1;
    return automatic ? local_world_size + rank : rank;
  }
  return -1;
}

Status create_rank_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return Status::error("cannot create heartbeat file " + path + ": " + std::strerror(errno));
  }
  UniqueFd owned(fd);
  // The umask may have taken the owner's write bit; a file left by a former run may be wider.
  if (::fchmod(fd, 0600) != 0) {
    return Status::error("cannot set mode 0600 on heartbeat file " + path + ": " +
                         std::strerror(errno));
  }
  return {};
}

}  // namespace

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "0.153", "2", "12.5": seconds, as a worker writes them; nullopt for anything else.
std::optional<std::chrono::microseconds> parse_busy_seconds(std::string_view text) {
  constexpr double kMostSeconds = 1e6;
  const std::size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
  if (whole.empty() || !std::all_of(whole.begin(), whole.end(), is_digit)) return std::nullopt;
  if (dot != std::string_view::npos &&
      (fraction.empty() || !std::all_of(fraction.begin(), fraction.end(), is_digit))) {
    return std::nullopt;
  }
  double seconds = 0;
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), seconds, std::chars_format::fixed);
  if (ec != std::errc() || end != text.data() + text.size() || seconds >= kMostSeconds) {
    return std::nullopt;
  }
  return std::chrono::microseconds(std::llround(seconds * 1e6));
}

}  // namespace

HeartbeatContent parse_heartbeat(std::string_view content) {
  const std::size_t newline = content.find('\n');
  if (newline == std::string_view::npos) return {};  // maybe half-written
  std::string_view line = content.substr(0, newline);
  while (!line.empty() && is_blank(line.front())) line.remove_prefix(1);
  while (!line.empty() && is_blank(line.back())) line.remove_suffix(1);
  const std::size_t blank = std::min(line.find(' '), line.find('\t'));
  std::string_view step_text = line.substr(0, blank);
  std::string_view busy_text = blank == std::string_view::npos ? "" : line.substr(blank);
  while (!busy_text.empty() && is_blank(busy_text.front())) busy_text.remove_prefix(1);
  if (step_text.empty() || !is_digit(step_text.front())) return {};
  std::int64_t step = 0;
  auto [end, ec] = std::from_chars(step_text.data(), step_text.data() + step_text.size(), step);
  if (ec != std::errc() || end != step_text.data() + step_text.size()) return {};
  HeartbeatContent parsed{step, std::nullopt};
  if (!busy_text.empty()) parsed.busy = parse_busy_seconds(busy_text);
  return parsed;
}

struct HeartbeatWatcher::Impl : std::enable_shared_from_this<Impl> {
  Impl(boost::asio::io_context& io, HeartbeatWatcherOptions opts, Handler handler, const Clock& c,
       int ranks)
      : options(opts),
        on_heartbeat(std::move(handler)),
        clock(c),
        local_world_size(ranks),
        inotify(io),
        rest(io) {}

  void wait();
  void on_ready();
  // Drains and delivers; false when the watch ended.
  bool deliver();
  // Reads every queued event (bounded); marks the ranks they concern. False when the watch
  // ended (directory removed) or the descriptor failed.
  bool drain(std::vector<std::uint8_t>& touched);
  HeartbeatContent read(int slot);
  int slots() const { return local_world_size * (options.automatic_files ? 2 : 1); }

  const HeartbeatWatcherOptions options;
  const Handler on_heartbeat;
  const Clock& clock;
  const int local_world_size;
  std::string dir;
  boost::asio::posix::stream_descriptor inotify;
  boost::asio::steady_timer rest;  // min_wakeup_interval between wake-ups
  HeartbeatWatcherStats stats;
};

// Per rank, what the wake-up saw.
enum : std::uint8_t { kUntouched = 0, kAttribOnly = 1, kContentChanged = 2 };

void HeartbeatWatcher::Impl::wait() {
  std::weak_ptr<Impl> weak = weak_from_this();
  inotify.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [weak](const boost::system::error_code& ec) {
                       auto self = weak.lock();
                       if (!self || ec) return;  // gone, or closed by the destructor
                       self->on_ready();
                     });
}

void HeartbeatWatcher::Impl::on_ready() {
  ++stats.wakeups;
  if (!deliver()) return;
  if (options.min_wakeup_interval <= Millis(0)) return wait();
  std::weak_ptr<Impl> weak = weak_from_this();
  rest.expires_after(options.min_wakeup_interval);
  rest.async_wait([weak](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || !self->inotify.is_open()) return;
    self->wait();
  });
}

bool HeartbeatWatcher::Impl::deliver() {
  std::vector<std::uint8_t> touched(static_cast<std::size_t>(slots()), kUntouched);
  const bool watching = drain(touched);
  const SteadyTime now = clock.steady_now();
  for (int slot = 0; slot < slots(); ++slot) {
    const std::uint8_t seen = touched[static_cast<std::size_t>(slot)];
    if (seen == kUntouched) continue;
    const HeartbeatContent content = seen == kContentChanged ? read(slot) : HeartbeatContent{};
    Heartbeat beat{slot % local_world_size, content.step, now, content.busy,
                   slot >= local_world_size};
    ++stats.heartbeats;
    if (on_heartbeat) on_heartbeat(beat);
  }
  return watching;
}

void HeartbeatWatcher::catch_up() {
  if (impl_->inotify.is_open()) impl_->deliver();
}

bool HeartbeatWatcher::Impl::drain(std::vector<std::uint8_t>& touched) {
  alignas(inotify_event) std::array<char, 4096> buffer;
  for (std::size_t reads = 0; reads < options.max_reads_per_wakeup; ++reads) {
    const ssize_t n = ::read(inotify.native_handle(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) {
      spdlog::error("heartbeat watch on {}: read failed ({}); heartbeats are no longer seen", dir,
                    n < 0 ? std::strerror(errno) : "end of file");
      return false;
    }
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer.data() + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if (event->mask & IN_Q_OVERFLOW) {  // events were lost: anyone may have beaten
        ++stats.overflows;
        std::fill(touched.begin(), touched.end(), kContentChanged);
        continue;
      }
      if (event->mask & IN_IGNORED) {
        spdlog::warn(
            "heartbeat watch on {} ended (directory removed?); heartbeats are no "
            "longer seen",
            dir);
        return false;
      }
      if (event->len == 0) continue;  // an event on the directory itself
      const int slot = slot_of(event->name, local_world_size, options.automatic_files);
      if (slot < 0) continue;  // another file (a writer's temp file)
      auto& seen = touched[static_cast<std::size_t>(slot)];
      seen = std::max(seen, (event->mask & kContentEvents) ? std::uint8_t{kContentChanged}
                                                           : std::uint8_t{kAttribOnly});
    }
  }
  return true;  // more may be queued: the descriptor stays readable and wakes the loop again
}

HeartbeatContent HeartbeatWatcher::Impl::read(int slot) {
  ++stats.file_reads;
  const std::string path = dir + "/" + file_name(slot % local_world_size, slot >= local_world_size);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return {};  // renamed away between the event and now: no step
  UniqueFd owned(fd);
  std::string content(options.max_read_bytes, '\0');
  ssize_t n;
  do {
    n = ::pread(fd, content.data(), content.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return {};
  content.resize(static_cast<std::size_t>(n));
  return parse_heartbeat(content);
}

Result<std::unique_ptr<HeartbeatWatcher>> HeartbeatWatcher::create(
    boost::asio::io_context& io, const std::string& dir, int local_world_size,
    HeartbeatWatcherOptions options, Handler on_heartbeat, const Clock& clock) {
  if (local_world_size < 1) {
    return Status::invalid_argument("heartbeat watcher: local_world_size must be at least 1, not " +
                                    std::to_string(local_world_size));
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::error("cannot create heartbeat directory " + dir + ": " + std::strerror(errno));
  }
  // Files first, watch second: creating them must not count as heartbeats.
  for (int rank = 0; rank < local_world_size; ++rank) {
    if (Status s = create_rank_file(dir + "/" + file_name(rank)); !s.ok()) return s;
    if (!options.automatic_files) continue;
    if (Status s = create_rank_file(dir + "/" + file_name(rank, true)); !s.ok()) return s;
  }
  if (!options.watch) {
    auto impl =
        std::make_shared<Impl>(io, options, std::move(on_heartbeat), clock, local_world_size);
    impl->dir = dir;
    return std::unique_ptr<HeartbeatWatcher>(new HeartbeatWatcher(std::move(impl)));
  }
  UniqueFd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd.valid()) {
    return Status::error(std::string("cannot watch heartbeats: inotify_init1: ") +
                         std::strerror(errno));
  }
  if (::inotify_add_watch(fd.get(), dir.c_str(), kWatchMask) < 0) {
    return Status::error("cannot watch heartbeat directory " + dir + ": " + std::strerror(errno));
  }
  auto impl = std::make_shared<Impl>(io, options, std::move(on_heartbeat), clock, local_world_size);
  impl->dir = dir;
  boost::system::error_code ec;
  impl->inotify.assign(fd.get(), ec);
  if (ec) return Status::error("cannot watch heartbeat directory " + dir + ": " + ec.message());
  fd.release();  // the stream descriptor owns it now
  impl->wait();
  return std::unique_ptr<HeartbeatWatcher>(new HeartbeatWatcher(std::move(impl)));
}

HeartbeatWatcher::HeartbeatWatcher(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

HeartbeatWatcher::~HeartbeatWatcher() {
  boost::system::error_code ignored;
  impl_->rest.cancel();
  if (impl_->inotify.is_open()) impl_->inotify.close(ignored);
}

std::string HeartbeatWatcher::file_name(int local_rank, bool automatic) {
  return (automatic ? "auto_" : "rank_") + std::to_string(local_rank);
}

std::string HeartbeatWatcher::file_for(int local_rank, bool automatic) const {
  return impl_->dir + "/" + file_name(local_rank, automatic);
}

std::vector<std::pair<std::string, std::string>> HeartbeatWatcher::worker_env(
    int local_rank) const {
  std::vector<std::pair<std::string, std::string>> env = {
      {kHeartbeatFileEnv, file_for(local_rank)}};
  if (impl_->options.automatic_files) {
    env.emplace_back(kAutoProgressFileEnv, file_for(local_rank, true));
  }
  return env;
}

const HeartbeatWatcherStats& HeartbeatWatcher::stats() const { return impl_->stats; }

}  // namespace ddprun::agent
