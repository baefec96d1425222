// The heartbeat channel: any worker, in any language, says "I am making progress" by writing
// one small file, and the agent hears it on its event loop at once (inotify), without polling.
//
// Contract with workers (agreed with the SDK team; do not change it):
//   * each worker gets DDPRUN_HEARTBEAT_FILE = <dir>/rank_<local_rank>, a file that exists
//     (empty, mode 0600) before the worker starts, in a directory the agent makes per attempt;
//   * a worker signals progress by writing (or rewriting at offset 0) that file with its step
//     number as decimal text and a newline, or by just touching it (progress, no step);
//   * after the step, on the same line, it may add how long it was busy in that step, in
//     seconds ("1234 0.153\n"): the time from the end of the previous step's synchronisation to
//     its arrival at this step's (stragglers: progress/stragglers.h). The worker SDK's DDP
//     writes it; a Python script measures it around its own step;
//   * without the variable (not run by ddprun), a worker sends nothing.
//   * a Python worker's automatic progress (agent/python/, docs: "Progress without a line of
//     code") writes the same lines to a second file per rank, DDPRUN_AUTO_PROGRESS_FILE =
//     <dir>/auto_<local_rank>, offered only with HeartbeatWatcherOptions::automatic_files. Its
//     heartbeats say so (Heartbeat::automatic); an explicit heartbeat wins (HangWatch).
// One-liners:
//   shell   echo "$step" > "$DDPRUN_HEARTBEAT_FILE"        (or: touch "$DDPRUN_HEARTBEAT_FILE")
//   Python  pathlib.Path(os.environ["DDPRUN_HEARTBEAT_FILE"]).write_text(f"{step}\n")
//           (with the busy time: .write_text(f"{step} {busy:.6f}\n"))
//   C++     std::ofstream(std::getenv("DDPRUN_HEARTBEAT_FILE")) << step << '\n';
//
// How it is read: inotify on the directory (IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB, and
// IN_MOVED_TO for writers that rename a temp file into place) wakes the loop; every event
// queued by then is drained, and each file that changed yields ONE heartbeat per wake-up
// (bursts coalesce). A file whose content may have changed is read then (its first line, at
// most max_read_bytes); a touch alone (IN_ATTRIB) is not read. The step is known only when
// the first line is a whole decimal number followed by '\n': a half-written line, garbage or
// an empty file give a heartbeat with no step. So a reader racing a rewrite can report "no
// step" once; consumers keep the last step they knew (HangDetector does).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "common/result.h"

namespace ddprun::agent {

inline constexpr char kHeartbeatFileEnv[] = "DDPRUN_HEARTBEAT_FILE";
inline constexpr char kAutoProgressFileEnv[] = "DDPRUN_AUTO_PROGRESS_FILE";

// What one heartbeat file says.
struct HeartbeatContent {
  std::optional<std::int64_t> step;
  std::optional<std::chrono::microseconds> busy;  // only with a step
  bool operator==(const HeartbeatContent&) const = default;
};

// A heartbeat file's content: its first line, when that is optional blanks, decimal digits (the
// step; no sign; fits int64), optionally blanks and the busy seconds (digits, optionally '.' and
// more digits; below 10^6 s), optional blanks (spaces, tabs, '\r') and '\n'. A first line
// without its '\n' (maybe half-written) or without a whole step says nothing; a busy time that
// is not one leaves the step known and the busy time not. Pure.
HeartbeatContent parse_heartbeat(std::string_view content);

// One heartbeat as observed.
struct Heartbeat {
  int local_rank = 0;
  std::optional<std::int64_t> step;               // nullopt: a touch, or no whole step in the file
  SteadyTime at;                                  // when the agent woke up for it
  std::optional<std::chrono::microseconds> busy;  // the busy time it reported, if any
  bool automatic = false;  // from the rank's auto_<local_rank> file, not its own heartbeat file
};

struct HeartbeatWatcherOptions {
  // Bytes read from the start of a file; a first line longer than this has no step. Default
  // 64 (a 19-digit step and its newline fit with room to spare).
  std::size_t max_read_bytes = 64;
  // inotify reads per wake-up before the loop gets a turn (a worker writing in a tight loop
  // must not keep the loop here). Default 64.
  std::size_t max_reads_per_wakeup = 64;
  // false: only the directory and the files, no watch (no handler call ever). For workers
  // that write heartbeats while nobody looks (hang detection off): an inotify instance costs
  // nothing while it lives, but closing it waits for an RCU grace period, several
  // milliseconds at the end of every attempt. Default true.
  bool watch = true;
  // Also offer auto_<local_rank> files (DDPRUN_AUTO_PROGRESS_FILE), for Python workers'
  // automatic progress. Default false.
  bool automatic_files = false;
  // After a wake-up, the next one comes no sooner than this. A worker that steps a thousand
  // times a second then costs the agent at most 1000/interval wake-ups: the kernel merges a
  // file's unread identical events, and the file read then holds the latest step. Default 0.
  Millis min_wakeup_interval{0};
};

// Counters since creation, for tests, logs and metrics.
struct HeartbeatWatcherStats {
  std::uint64_t wakeups = 0;     // the inotify descriptor woke the loop
  std::uint64_t heartbeats = 0;  // handler calls
  std::uint64_t file_reads = 0;  // heartbeat files read
  std::uint64_t overflows = 0;   // inotify queue overflows (every rank then counts as beating)
};

// Thread-safety: not thread-safe; create, use and destroy it on the io_context's thread.
// Blocking: nothing blocks (a file read is one pread of max_read_bytes from a local file).
// Ownership: the caller owns the watcher; destroying it stops the watch (the loop may go on;
// pending handlers then do nothing). It never deletes the directory or the files.
class HeartbeatWatcher {
 public:
  using Handler = std::function<void(const Heartbeat&)>;

  // Creates `dir` if missing (mode 0700), creates rank_0 .. rank_<local_world_size - 1> in it
  // empty with mode 0600 (truncating any left there), then starts watching on `io`. Call it
  // before the workers start. `clock` (steady time of heartbeats) must outlive the watcher.
  static Result<std::unique_ptr<HeartbeatWatcher>> create(
      boost::asio::io_context& io, const std::string& dir, int local_world_size,
      HeartbeatWatcherOptions options, Handler on_heartbeat,
      const Clock& clock = SystemClock::instance());

  HeartbeatWatcher(const HeartbeatWatcher&) = delete;
  HeartbeatWatcher& operator=(const HeartbeatWatcher&) = delete;
  ~HeartbeatWatcher();

  // "rank_<local_rank>": the contract's file name; "auto_<local_rank>" with `automatic`.
  static std::string file_name(int local_rank, bool automatic = false);
  // <dir>/rank_<local_rank> (<dir>/auto_<local_rank>).
  std::string file_for(int local_rank, bool automatic = false) const;
  // {DDPRUN_HEARTBEAT_FILE, file_for(local_rank)}, and with automatic files
  // {DDPRUN_AUTO_PROGRESS_FILE, file_for(local_rank, true)}: add them to that worker's
  // environment.
  std::vector<std::pair<std::string, std::string>> worker_env(int local_rank) const;

  // Delivers now what the kernel has queued (the handler runs inside), without waiting for the
  // next wake-up or its pacing: a worker that has exited wrote its last step before it did, and
  // that step must count (--max_no_progress_restarts). Nothing without a watch.
  void catch_up();

  const HeartbeatWatcherStats& stats() const;

 private:
  struct Impl;
  explicit HeartbeatWatcher(std::shared_ptr<Impl> impl);
  // Shared with the pending wait, which holds it weakly.
  std::shared_ptr<Impl> impl_;
};

}  // namespace ddprun::agent
