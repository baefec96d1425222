// What torchrun's agent does when TORCHELASTIC_ENABLE_FILE_TIMER=1: a named pipe that workers'
// torch.distributed.elastic.timer.FileTimerClient write requests to, served on the agent's
// Asio loop, killing a worker whose scope expired with the signal the request names.
//
// How the agent uses it (torchrun's LocalElasticAgent._setup_local_watchdog, for reference):
//   1. create() the server in a directory of the agent's own; put worker_env() (the variable
//      TORCHELASTIC_TIMER_FILE=<fifo path>) into every worker's environment;
//   2. add_worker(pid, local_rank) right after each worker is spawned, on the same loop turn,
//      before the loop reads the FIFO again; remove_worker(pid) in the reap handler, before
//      anything else (a reaped pid may be reused: it must never be signalled again);
//   3. the ExpiryHandler hears every expiry (worker, scope, signal) for the failure report;
//      the worker's exit then reaches the agent through SIGCHLD as usual.
//
// The wire format is in file_timer_request.h, the bookkeeping and its rules (and how they
// differ from torch's server) in file_timer_scopes.h. In short: only registered workers are
// ever signalled, by pid (as torch does: the process, not its group); requests from any
// other pid are logged and ignored.
//
// Where it differs from torch's FileTimerServer (read in torch 1.13 and in PyTorch 2.x main):
//   * only registered workers are signalled (torch kills any pid a request names);
//   * torch polls the FIFO (max_interval 0.1 s in LocalElasticAgent); here requests and
//     deadlines wake the loop, so a kill comes within milliseconds of the expiry;
//   * after killing a worker, PyTorch 2.x's server also sends the same signal to its own
//     process (the agent); ddprun does not: the worker's exit is a failure like any other,
//     handled by the worker group and the restart budget;
//   * the clients of both versions write the same bytes. 2.x's client retries a failed open
//     (10 x 0.1 s) while the server is not up yet; here the FIFO exists, with a reader, before
//     any worker starts, so 1.13's single try (BrokenPipeError) never fails.
// Note: torch's default scope id for `expires(after=...)` is "<file>#<line>" of the frame
// above expires(); in torch 1.13 that is contextlib's own frame, so every default scope of a
// worker has the same id.
//
// Nothing polls: the FIFO's read end is an Asio descriptor (each request wakes the loop), and
// one steady timer is armed at the earliest deadline of any scope held. The server also holds
// a write end of its own FIFO, so the read end never sees end of file when the last client
// closes, and a client's non-blocking open never fails while the server exists.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>

#include "agent/file_timer/file_timer_scopes.h"
#include "common/result.h"

namespace ddprun::agent {

// The environment variables of torchrun's contract.
inline constexpr char kEnableFileTimerEnv[] = "TORCHELASTIC_ENABLE_FILE_TIMER";  // "1": enable
inline constexpr char kTimerFileEnv[] = "TORCHELASTIC_TIMER_FILE";  // the FIFO, for workers

// Sends a signal to one process, behind an interface so that the server's glue is tested
// without killing anything.
class SignalSender {
 public:
  virtual ~SignalSender() = default;
  // Sends `signo` to process `pid` alone. An error says why it could not be sent.
  virtual Status send(pid_t pid, int signo) = 0;
};

// kill(2). Thread-safe.
class PosixSignalSender final : public SignalSender {
 public:
  Status send(pid_t pid, int signo) override;
  static PosixSignalSender& instance();
};

struct FileTimerServerOptions {
  // The FIFO's name inside the directory given to create(). Default "torchelastic_timer".
  std::string fifo_name = "torchelastic_timer";
  // Scopes held at once, over all workers; requests beyond are refused (logged). Default 4096.
  std::size_t max_scopes = 4096;
  // Bad or refused requests logged at warning level; later ones go to debug level, so that a
  // broken client cannot flood the console. Default 20.
  std::size_t max_logged_errors = 20;
};

// Counters since creation, for tests, logs and metrics.
struct FileTimerServerStats {
  std::uint64_t requests = 0;      // acquires and releases applied
  std::uint64_t malformed = 0;     // lines that were not a valid request (logged)
  std::uint64_t refused = 0;       // valid requests refused: not a worker's pid, too many scopes
  std::uint64_t expiries = 0;      // workers whose scopes expired
  std::uint64_t signals_sent = 0;  // signals delivered to expired workers
};

// Thread-safety: not thread-safe; create, use and destroy it on the io_context's thread.
// Blocking: nothing blocks; every operation returns at once. Ownership: the caller owns the
// server; `signals` must outlive it. Destroying it closes the FIFO, cancels the timer and
// removes the FIFO; the io_context may go on running (pending handlers then do nothing).
class FileTimerServer {
 public:
  // `sent`: whether the signal was delivered; ok (and nothing sent) when expiry.signal == 0.
  using ExpiryHandler = std::function<void(const TimerExpiry& expiry, const Status& sent)>;

  // Creates the FIFO `dir`/`options.fifo_name` (mode 0600; `dir` must exist) and starts
  // serving it on `io`. An existing FIFO of that name is replaced (as torch does); any other
  // existing file is an error, never removed. `on_expiry` may be empty.
  static Result<std::unique_ptr<FileTimerServer>> create(
      boost::asio::io_context& io, const std::string& dir, FileTimerServerOptions options,
      ExpiryHandler on_expiry, SignalSender& signals = PosixSignalSender::instance());

  FileTimerServer(const FileTimerServer&) = delete;
  FileTimerServer& operator=(const FileTimerServer&) = delete;
  ~FileTimerServer();

  // The FIFO's path.
  const std::string& path() const { return path_; }
  // {TORCHELASTIC_TIMER_FILE, path()}: add it to every worker's environment.
  std::pair<std::string, std::string> worker_env() const { return {kTimerFileEnv, path_}; }

  // A worker of this node: its scopes are tracked and it may be signalled. See the file
  // comment for when to call these.
  void add_worker(pid_t pid, int local_rank);
  void remove_worker(pid_t pid);

  const FileTimerServerStats& stats() const;

 private:
  struct Impl;
  FileTimerServer(std::string path, std::shared_ptr<Impl> impl);

  std::string path_;
  // Shared with the pending Asio handlers, which hold it weakly: once the server is gone,
  // a handler that still runs finds nothing and returns.
  std::shared_ptr<Impl> impl_;
};

}  // namespace ddprun::agent
